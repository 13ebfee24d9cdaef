"""Text Generation Inference's native API at the HTTP layer: huggingface_hub's real
``InferenceClient.text_generation`` (sync and async, whole and streamed, with and without
``details``) and hand-written ``requests``/``httpx`` posts, against a local server answering in
TGI's own shape (its router's ``GenerateResponse``, ``StreamResponse`` events and the
``x-prompt-tokens``/``x-generated-tokens`` headers of a whole answer): exact tokens, once."""

from __future__ import annotations

import asyncio
import json
import warnings
from typing import Any

import pytest

from ..local_server import Answer, LocalServer
from .conftest import attributes, only, tokens

hub = pytest.importorskip("huggingface_hub")

PROMPT = "The huggingface_hub library is "
WORDS = ["100", "%", " open", " source"]  # four generated tokens
PROMPT_TOKENS = 7  # what the server counted; the prefill lists as many
TIMINGS = {
    "x-compute-type": "gpu+optimized",
    "x-compute-time": "0.41",
    "x-compute-characters": str(len(PROMPT)),
    "x-total-time": "410",
    "x-validation-time": "1",
    "x-queue-time": "0",
    "x-inference-time": "409",
    "x-time-per-token": "102",
}


def _tokens() -> list[dict[str, Any]]:
    return [
        {"id": 1425 + i, "text": text, "logprob": -0.5, "special": False}
        for i, text in enumerate(WORDS)
    ]


def _details(parameters: dict[str, Any]) -> dict[str, Any]:
    prefill = [{"id": 1, "text": "<s>", "logprob": None}] + [
        {"id": 400 + i, "text": f"w{i}", "logprob": -1.25} for i in range(PROMPT_TOKENS - 1)
    ]
    return {
        "finish_reason": "length",
        "generated_tokens": len(WORDS),
        "seed": None,
        "prefill": prefill if parameters.get("decoder_input_details") else [],
        "tokens": _tokens(),
    }


def _whole(path: str, parameters: dict[str, Any]) -> Answer:
    """``GenerateResponse`` (``details`` only when asked for), its counts in headers (a
    ``/bare/`` path: a proxy that drops them; ``/odd/``: one that mangles them)."""
    data: dict[str, Any] = {"generated_text": "".join(WORDS)}
    if parameters.get("details") or parameters.get("decoder_input_details"):
        data["details"] = _details(parameters)
    headers = dict(TIMINGS)
    if path.startswith("/odd/"):  # a count that is not one
        headers["x-prompt-tokens"] = "7 tokens"
    elif not path.startswith("/bare/"):
        headers["x-prompt-tokens"] = str(PROMPT_TOKENS)
        headers["x-generated-tokens"] = str(len(WORDS))
    if "/models/" in path:  # the serverless API's list
        return 200, "application/json", json.dumps([data]).encode(), headers
    return 200, "application/json", json.dumps(data).encode(), headers


def _stream(parameters: dict[str, Any]) -> Answer:
    """``StreamResponse`` events, one per token; the last with ``generated_text`` and, when
    asked for, ``details`` (TGI 2.x: ``input_length``). No counts in the headers: they are
    sent before the first token."""
    events = []
    for index, token in enumerate(_tokens(), 1):
        last = index == len(WORDS)
        details = None
        if last and parameters.get("details"):
            details = {
                "finish_reason": "length",
                "generated_tokens": len(WORDS),
                "seed": None,
                "input_length": PROMPT_TOKENS,
            }
        event = {
            "index": index,
            "token": token,
            "generated_text": "".join(WORDS) if last else None,
            "details": details,
        }
        events.append(f"data:{json.dumps(event)}\n\n")
    headers = {
        "x-compute-type": "gpu+optimized",
        "x-compute-characters": str(len(PROMPT)),
        "x-accel-buffering": "no",
    }
    return 200, "text/event-stream", "".join(events).encode(), headers


def tgi_answer(path: str, body: Any) -> Answer:
    """TGI's router: ``/`` (streams when the body says so), ``/generate``, ``/generate_stream``;
    other tasks at ``/`` answered as an inference endpoint would (a summary), except under
    ``/tgi/`` (:func:`tgi_only`)."""
    body = body if isinstance(body, dict) else {}
    parameters = body.get("parameters") or {}
    if path.endswith("/generate_stream") or (not path.endswith("/generate") and body.get("stream")):
        return _stream(parameters)
    generation_only = path.startswith("/tgi/")
    if (
        "inputs" in body
        and not path.endswith("/generate")
        and not parameters
        and not generation_only
    ):
        return 200, "application/json", json.dumps([{"summary_text": "short"}]).encode(), {}
    return _whole(path, parameters)


@pytest.fixture(scope="module")
def tgi():
    running = LocalServer(tgi_answer)
    yield running
    running.close()


@pytest.fixture(scope="module")
def tgi_only():
    """A TGI server: text generation alone, a prompt with no parameter generating too."""
    running = LocalServer(lambda path, body: tgi_answer(f"/tgi{path}", body))
    yield running
    running.close()


def test_text_generation_whole_with_and_without_details(telemetry, tgi):
    client = hub.InferenceClient(tgi.url)
    text = client.text_generation(PROMPT, max_new_tokens=4)
    detailed = client.text_generation(PROMPT, max_new_tokens=4, details=True)
    prefilled = client.text_generation(PROMPT, details=True, decoder_input_details=True)
    assert text == detailed.generated_text == prefilled.generated_text == "100% open source"
    assert len(prefilled.details.prefill) == PROMPT_TOKENS
    plain, with_details, with_prefill = attributes(telemetry)
    for attrs in (plain, with_details, with_prefill):  # x-prompt-tokens, then the output count
        assert tokens(attrs) == (PROMPT_TOKENS, len(WORDS))
        assert attrs["gen_ai.operation.name"] == "text_completion"
        assert attrs["gen_ai.request.stream"] is False
        # a TGI server on this machine: self-hosted, named by its host, no cost
        assert attrs["gen_ai.provider.name"] == "127.0.0.1" and "otel_tokens.cost.usd" not in attrs
    assert with_details["gen_ai.response.finish_reasons"] == ("length",)
    assert [path for path, _ in tgi.requests[-3:]] == ["/", "/", "/"]


def test_text_generation_of_a_prompt_alone_sync_and_async(telemetry, tgi, tgi_only):
    # text_generation(prompt) posts {"inputs", "parameters": {}}, what summarization posts to
    # the same path: the call itself says it is text generation (exact, from the headers)
    client = hub.InferenceClient(tgi_only.url)

    async def run() -> str:
        return await hub.AsyncInferenceClient(tgi_only.url).text_generation(PROMPT)

    assert client.text_generation(PROMPT) == asyncio.run(run()) == "100% open source"
    assert [body for _, body in tgi_only.requests[-2:]] == [
        {"inputs": PROMPT, "parameters": {}}
    ] * 2
    whole, awaited = attributes(telemetry)
    for attrs in (whole, awaited):
        assert tokens(attrs) == (PROMPT_TOKENS, len(WORDS))
        assert attrs["gen_ai.operation.name"] == "text_completion"
        assert attrs["gen_ai.request.stream"] is False
    # the same body sent by another task, or by hand, is not taken for text generation
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hub.InferenceClient(tgi.url).summarization("A long text to summarise.")
    httpx = pytest.importorskip("httpx")
    httpx.post(f"{tgi_only.url}/", json={"inputs": PROMPT, "parameters": {}})
    assert len(attributes(telemetry)) == 2


def test_text_generation_streamed_with_and_without_details(telemetry, tgi):
    client = hub.InferenceClient(tgi.url)
    words = list(client.text_generation(PROMPT, max_new_tokens=4, stream=True))
    detailed = list(client.text_generation(PROMPT, max_new_tokens=4, stream=True, details=True))
    assert "".join(words) == detailed[-1].generated_text == "100% open source"
    bare, with_details = attributes(telemetry)
    # without details the stream says its tokens (one event each), not its input: unknown
    assert tokens(bare) == (None, len(WORDS))
    assert tokens(with_details) == (PROMPT_TOKENS, len(WORDS))
    assert with_details["gen_ai.response.finish_reasons"] == ("length",)
    for attrs in (bare, with_details):
        assert attrs["gen_ai.request.stream"] is True
        assert attrs["otel_tokens.stream.end"] == "exhausted"


def test_async_text_generation_whole_and_streamed(telemetry, tgi):
    async def run() -> tuple[str, str]:
        client = hub.AsyncInferenceClient(tgi.url)
        whole = await client.text_generation(PROMPT, max_new_tokens=4)
        parts = [
            part.token.text
            async for part in await client.text_generation(
                PROMPT, max_new_tokens=4, stream=True, details=True
            )
        ]
        return whole, "".join(parts)

    assert asyncio.run(run()) == ("100% open source", "100% open source")
    whole, stream = attributes(telemetry)
    assert tokens(whole) == tokens(stream) == (PROMPT_TOKENS, len(WORDS))
    assert stream["gen_ai.request.stream"] is True


def test_serverless_models_path_names_the_model(telemetry, tgi):
    client = hub.InferenceClient(model=f"{tgi.url}/models/openai-community/gpt2")
    answer = client.text_generation(PROMPT, max_new_tokens=4, details=True)
    assert answer.details.generated_tokens == len(WORDS)
    attrs = only(telemetry)
    assert attrs["gen_ai.request.model"] == "openai-community/gpt2"
    assert tokens(attrs)[1] == len(WORDS)


def test_hand_written_requests_and_httpx_posts_to_generate(telemetry, tgi):
    requests = pytest.importorskip("requests")
    httpx = pytest.importorskip("httpx")
    body = {"inputs": PROMPT, "parameters": {"max_new_tokens": 4}}
    whole = requests.post(f"{tgi.url}/generate", json=body)
    assert whole.json()["generated_text"] == "100% open source"
    # behind a proxy that drops the count headers: the prefill and details say them
    asked = {"details": True, "decoder_input_details": True}
    bare = httpx.post(f"{tgi.url}/bare/generate", json={"inputs": PROMPT, "parameters": asked})
    assert bare.json()["details"]["generated_tokens"] == len(WORDS)
    with httpx.stream("POST", f"{tgi.url}/generate_stream", json=body) as response:
        lines = [line for line in response.iter_lines() if line]
    assert len(lines) == len(WORDS)
    plain, prefilled, stream = attributes(telemetry)
    assert tokens(plain) == tokens(prefilled) == (PROMPT_TOKENS, len(WORDS))
    assert tokens(stream) == (None, len(WORDS)) and stream["gen_ai.request.stream"] is True


def test_only_text_generation_is_taken_on_paths_other_tasks_share(telemetry, tgi):
    requests = pytest.importorskip("requests")
    client = hub.InferenceClient(tgi.url)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        client.summarization("A long text to summarise.")  # {"inputs", "parameters": {}} at /
    requests.post(f"{tgi.url}/", json={"inputs": "A text to embed"})  # an embedding server's
    requests.post(f"{tgi.url}/v1/generate", json={"prompt": "hi", "max_tokens": 4})  # Cohere v1
    assert list(client.text_generation(PROMPT, stream=True)) == WORDS  # a stream: generation
    (attrs,) = attributes(telemetry)  # the text generation alone, once
    assert tokens(attrs) == (None, len(WORDS)) and attrs["gen_ai.request.stream"] is True


def test_a_count_header_that_is_not_a_count_is_unusable_and_the_answer_passes(telemetry, tgi):
    httpx = pytest.importorskip("httpx")
    body = {"inputs": PROMPT, "parameters": {"max_new_tokens": 4}}
    answer = httpx.post(f"{tgi.url}/odd/generate", json=body)
    assert answer.json() == {"generated_text": "100% open source"}
    assert answer.headers["x-prompt-tokens"] == "7 tokens"
    assert tokens(only(telemetry)) == (None, None)
    assert telemetry.errors() == {"usage_invalid": 1}


def test_the_router_host_names_the_provider_and_the_path_the_model(telemetry):
    """Hugging Face's router (``router.huggingface.co/hf-inference/models/{id}``), answered in
    memory (no network here): its host is the provider, as :mod:`otel_tokens.endpoints` names
    it, the path's id the model."""
    httpx = pytest.importorskip("httpx")
    headers = {"x-prompt-tokens": str(PROMPT_TOKENS), "x-generated-tokens": str(len(WORDS))}
    answer = httpx.Response(200, json={"generated_text": "".join(WORDS)}, headers=headers)
    with httpx.Client(transport=httpx.MockTransport(lambda request: answer)) as client:
        client.post(
            "https://router.huggingface.co/hf-inference/models/openai-community/gpt2",
            json={"inputs": PROMPT, "parameters": {"max_new_tokens": 4}},
        )
    attrs = only(telemetry)
    assert attrs["gen_ai.provider.name"] == "router.huggingface.co"
    assert attrs["gen_ai.request.model"] == "openai-community/gpt2"
    assert tokens(attrs) == (PROMPT_TOKENS, len(WORDS))


#: path -> whether it is TGI's (its body then decides); the others are other formats' or tasks'
PATHS = {
    "/": True,
    "/generate": True,
    "/generate_stream": True,
    "/models/openai-community/gpt2": True,
    "/api/generate": False,  # Ollama's
    "/models/chat/completions": False,  # Azure AI inference's (OpenAI format)
    "/hf-inference/models/gpt2/v1/chat/completions": False,  # the router's OpenAI route
    "/v1beta/models/gemini-2.0-flash:countTokens": False,  # a Gemini method
    "/models/gpt2/pipeline/feature-extraction": False,  # another task's route
}


def test_tgi_paths_are_told_from_other_formats_and_tasks():
    from otel_tokens.capture.wire import tgi
    from otel_tokens.capture.wire.formats import find

    def is_tgi(path: str) -> bool:
        found = find(path)
        return found is not None and found.accepts in (tgi._native, tgi._shared)

    assert {path: is_tgi(path) for path in PATHS} == PATHS
