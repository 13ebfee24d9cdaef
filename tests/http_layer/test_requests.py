"""The HTTP layer on ``requests``: a hand-written ``requests.post`` nobody named, plain and
streamed, and azure-ai-inference (``requests`` under azure-core) through its real client."""

from __future__ import annotations

import pytest

from .conftest import attributes, only, tokens

requests = pytest.importorskip("requests")

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Say hello"}]}


def test_a_hand_written_requests_post_is_recorded_plain_and_streamed(telemetry, server):
    url = f"{server.url}/v1/chat/completions"
    plain = requests.post(url, json=CHAT)
    with requests.post(url, json={**CHAT, "stream": True}, stream=True) as response:
        lines = [line for line in response.iter_lines() if line]
    assert plain.json()["choices"][0]["message"]["content"] == "Hello there"
    assert lines[-1] == b"data: [DONE]"
    whole, stream = attributes(telemetry)
    assert tokens(whole) == tokens(stream) == (120, 30)
    assert (
        whole["gen_ai.request.model"] == "gpt-4o-mini"
        and whole["gen_ai.provider.name"] == "127.0.0.1"
    )
    assert stream["otel_tokens.stream.end"] == "exhausted"


def test_requests_that_are_not_a_model_call_pass_untouched(telemetry, server):
    requests.post(f"{server.url}/v1/files", json={"purpose": "batch"})
    requests.post(f"{server.url}/v1/chat/completions", data={"model": "m"})  # a form
    assert telemetry.finished() == []


def test_a_requests_stream_closed_unread_ends_its_call(telemetry, server):
    response = requests.post(
        f"{server.url}/v1/chat/completions", json={**CHAT, "stream": True}, stream=True
    )
    response.close()
    assert only(telemetry)["otel_tokens.stream.end"] == "closed"


def test_azure_ai_inference_complete_stream_and_embeddings(telemetry, named):
    inference = pytest.importorskip("azure.ai.inference")
    from azure.core.credentials import AzureKeyCredential

    url, key = named("azure.ai.inference"), AzureKeyCredential("test")
    chat = inference.ChatCompletionsClient(endpoint=url, credential=key)
    answer = chat.complete(messages=[{"role": "user", "content": "Say hello"}], model="Phi-4")
    streamed = "".join(
        u.choices[0].delta.content or ""
        for u in chat.complete(
            messages=[{"role": "user", "content": "Say hello"}], model="Phi-4", stream=True
        )
        if u.choices
    )
    embedded = inference.EmbeddingsClient(endpoint=url, credential=key).embed(
        input=["hello"], model="embed-v3"
    )
    assert answer.choices[0].message.content == streamed == "Hello there"
    assert embedded.usage.prompt_tokens == 9
    whole, stream, embed = attributes(telemetry)
    for attrs in (whole, stream):
        assert tokens(attrs) == (120, 30) and attrs["gen_ai.request.model"] == "Phi-4"
        assert attrs["gen_ai.provider.name"] == "azure.ai.inference"
    assert (
        embed["gen_ai.operation.name"] == "embeddings" and embed["gen_ai.usage.input_tokens"] == 9
    )


def _over_requests():  # type: ignore[no-untyped-def]
    """An httpx transport that sends with requests (as some clients' adapters do)."""
    import httpx

    class OverRequests(httpx.BaseTransport):
        def handle_request(self, request):  # type: ignore[no-untyped-def]
            sent = requests.post(str(request.url), data=request.read(),
                                 headers={"content-type": "application/json"})  # fmt: skip
            kind = sent.headers["content-type"]
            return httpx.Response(
                sent.status_code, headers={"content-type": kind}, content=sent.content
            )

    return OverRequests()


def test_an_httpx_transport_sending_with_requests_is_recorded_once(telemetry, server):
    import httpx

    with httpx.Client(transport=_over_requests()) as client:
        answer = client.post(f"{server.url}/v1/chat/completions", json=CHAT).json()
    assert answer["usage"]["prompt_tokens"] == 120
    assert [tokens(a) for a in attributes(telemetry)] == [(120, 30)]
