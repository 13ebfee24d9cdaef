"""ibm-watsonx-ai's ``ModelInference`` through its real client against a real local HTTPS
server answering in watsonx.ai's own shapes, recorded by the HTTP layer's watsonx wire
format: ``chat``/``chat_stream`` (OpenAI's chat shape, ``model_id``), ``generate``/
``generate_text_stream`` (``results[].input_token_count``/``generated_token_count``; the
stream's events as a public recording of watsonx.ai's traffic has them: the input count in the
first event, the generated count running), async ``achat``, ``agenerate`` and their streams; exact tokens under
``ibm.watsonx.ai``; answers unchanged."""

from __future__ import annotations

import asyncio
import json

import pytest

from .conftest import attributes, tokens
from .tls_server import TlsServer

pytest.importorskip("ibm_watsonx_ai")
from ibm_watsonx_ai import APIClient, Credentials
from ibm_watsonx_ai.foundation_models import ModelInference

MODEL = "ibm/granite-3-8b-instruct"
CHAT_USAGE = {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}
HELLO = [{"role": "user", "content": "Say hello"}]


def _sse(events: list[dict]) -> bytes:
    return "".join(
        f"id: {i}\nevent: message\ndata: {json.dumps(e)}\n\n" for i, e in enumerate(events, 1)
    ).encode()


def _chunk(text: str, last: bool) -> dict:
    choice = {"index": 0, "delta": {"role": "assistant", "content": text},
              "finish_reason": "stop" if last else None}  # fmt: skip
    chunk = {"id": "chat-1", "object": "chat.completion.chunk", "model_id": MODEL,
             "choices": [choice], "created": 1728811660}  # fmt: skip
    if last:
        chunk["usage"] = CHAT_USAGE
    return chunk


def _result(text: str, generated: int, given: int, reason: str) -> dict:
    return {"model_id": MODEL, "created_at": "2024-03-10T14:40:37.661Z",
            "results": [{"generated_text": text, "generated_token_count": generated,
                         "input_token_count": given, "stop_reason": reason}]}  # fmt: skip


def post(path: str, body: dict) -> tuple[str, bytes]:
    path = path.partition("?")[0]
    if path.endswith("/text/chat"):
        message = {"role": "assistant", "content": "Hello there"}
        answer = {"id": "chat-1", "model_id": MODEL, "created": 1728811660,
                  "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                  "usage": CHAT_USAGE}  # fmt: skip
        return "application/json", json.dumps(answer).encode()
    if path.endswith("/text/chat_stream"):
        return "text/event-stream", _sse([_chunk("Hello", False), _chunk(" there", True)])
    if path.endswith("/text/generation"):
        return "application/json", json.dumps(_result("Hello there", 11, 8, "eos_token")).encode()
    events = [_result("", 0, 8, "not_finished"), _result("Hello", 1, 0, "not_finished"),
              _result(" there", 11, 0, "eos_token")]  # fmt: skip
    return "text/event-stream", _sse(events)


def get(path: str) -> tuple[str, bytes]:
    """What the client asks before its first call: the platform's version, the project."""
    if path.startswith("/v2/projects/"):
        project = {"metadata": {"guid": "p"}, "entity": {"storage": {"type": "assetfiles"}}}
        return "application/json", json.dumps(project).encode()
    return "application/json", json.dumps({"version": "5.1.0"}).encode()


@pytest.fixture(scope="module")
def server():
    running = TlsServer(get, post)
    yield running
    running.close()


def _model(server: TlsServer) -> ModelInference:
    credentials = Credentials(url=server.url, token="test", instance_id="openshift",
                              version="5.1", verify=server.cert)  # fmt: skip
    client = APIClient(credentials, project_id="p")
    return ModelInference(model_id=MODEL, api_client=client, validate=False)


def test_chat_and_generate_plain_and_streamed(http_telemetry, server, provider_urls):
    provider_urls(server.url, "ibm.watsonx.ai")
    model = _model(server)
    chat = model.chat(messages=HELLO)
    streamed = "".join(
        c["choices"][0]["delta"].get("content") or "" for c in model.chat_stream(messages=HELLO)
    )
    generated = model.generate(prompt="Say hello", params={"max_new_tokens": 64})
    text = "".join(model.generate_text_stream(prompt="Say hello"))
    assert chat["choices"][0]["message"]["content"] == "Hello there" == streamed == text
    assert generated["results"][0]["generated_token_count"] == 11  # unchanged
    spans = attributes(http_telemetry)
    assert [tokens(a) for a in spans] == [(12, 5), (12, 5), (8, 11), (8, 11)]
    assert [a["gen_ai.operation.name"] for a in spans] == ["chat", "chat", "text_completion", "text_completion"]  # fmt: skip
    for attrs in spans:
        assert attrs["gen_ai.provider.name"] == "ibm.watsonx.ai"
        assert attrs["gen_ai.request.model"] == MODEL and attrs["gen_ai.response.model"] == MODEL
        assert "otel_tokens.cost.usd" not in attrs  # genai-prices lists no watsonx.ai price
    assert spans[1]["otel_tokens.stream.end"] == spans[3]["otel_tokens.stream.end"] == "exhausted"
    assert http_telemetry.errors() == {}


def test_async_chat_and_generate(http_telemetry, server, provider_urls):
    provider_urls(server.url, "ibm.watsonx.ai")
    model = _model(server)

    async def run() -> tuple:
        chat = await model.achat(messages=HELLO)
        generated = await model.agenerate(prompt="Say hello")
        chunks = [c async for c in await model.achat_stream(messages=HELLO)]
        events = [e async for e in await model.agenerate_stream(prompt="Say hello")]
        texts = [e["results"][0]["generated_text"] for e in events]
        streamed = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
        return (chat["choices"][0]["message"]["content"], generated["results"][0]["generated_text"],
                streamed, "".join(texts))  # fmt: skip

    assert asyncio.run(run()) == ("Hello there",) * 4
    spans = attributes(http_telemetry)
    assert [tokens(a) for a in spans] == [(12, 5), (8, 11), (12, 5), (8, 11)]
    assert [a.get("otel_tokens.stream.end") for a in spans[2:]] == ["exhausted", "exhausted"]


def test_ibm_cloud_hosts_are_watsonx_and_look_alikes_are_not():
    from otel_tokens.endpoints import endpoint

    for url, provider in (
        ("https://us-south.ml.cloud.ibm.com/ml/v1/text/chat", "ibm.watsonx.ai"),
        ("https://private.eu-de.ml.cloud.ibm.com/ml/v1/text/chat", "ibm.watsonx.ai"),
        ("https://ml.cloud.ibm.com.evil.example/ml/v1/text/chat", "ml.cloud.ibm.com.evil.example"),
    ):
        host = url.split("/")[2]
        assert endpoint(url, host, "http").provider == provider
