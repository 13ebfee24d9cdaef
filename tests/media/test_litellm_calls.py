"""litellm ``embedding``, ``text_completion`` and ``responses`` (and ``aembedding``,
``atext_completion``, ``aresponses``), plain and streamed, through the real library against a
server answering in OpenAI's shapes (its API reference's examples): each call recorded once,
litellm's, under the provider litellm routes it to and at its price, with the openai SDK
capture and the HTTP layer beneath it installed too (in either order)."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from otel_tokens.capture.http import http_patches
from otel_tokens.capture.sdk import openai as openai_sdk

from ..local_server import LocalServer
from ..telemetry.conftest import handling
from .conftest import price, spans, tokens

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network at import
litellm = pytest.importorskip("litellm")
from otel_tokens.capture.sdk import litellm_patches

EMBEDDED = {"prompt_tokens": 8, "total_tokens": 8}
COMPLETED = {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}
RESPONDED = {"input_tokens": 36, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 9,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 45}  # fmt: skip


def _sse(events: list) -> bytes:
    return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"


def _embeddings(body: dict) -> dict:
    return {"object": "list", "model": body["model"], "usage": EMBEDDED,
            "data": [{"object": "embedding", "index": 0, "embedding": [0.0023, -0.0093]}]}  # fmt: skip


def _completion(body: dict, text: str = " there", usage: dict | None = COMPLETED) -> dict:
    return {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": body["model"],
            "choices": [{"text": text, "index": 0, "logprobs": None,
                         "finish_reason": "stop" if usage else None}],
            **({"usage": usage} if usage else {})}  # fmt: skip


def _response(body: dict, status: str = "completed") -> dict:
    message = {
        "type": "message",
        "id": "msg_1",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Hello there", "annotations": []}],
    }
    return {"id": "resp_1", "object": "response", "created_at": 1, "status": status,
            "model": body["model"], "output": [message] if status == "completed" else [],
            "usage": RESPONDED if status == "completed" else None, "parallel_tool_calls": True,
            "tool_choice": "auto", "tools": [], "text": {"format": {"type": "text"}}}  # fmt: skip


def _response_events(body: dict) -> list:
    start = _response(body, "in_progress")
    return [
        {"type": "response.created", "sequence_number": 0, "response": start},
        {"type": "response.output_text.delta", "sequence_number": 1, "item_id": "msg_1",
         "output_index": 0, "content_index": 0, "delta": "Hello"},
        {"type": "response.output_text.delta", "sequence_number": 2, "item_id": "msg_1",
         "output_index": 0, "content_index": 0, "delta": " there"},
        {"type": "response.completed", "sequence_number": 3, "response": _response(body)},
    ]  # fmt: skip


MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "stop_reason": "end_turn",
           "model": "claude-3-5-haiku-20241022", "content": [{"type": "text", "text": "hey"}],
           "usage": {"input_tokens": 20, "output_tokens": 4}}  # fmt: skip


COHERE = {"id": "emb-1", "texts": ["Hello"], "response_type": "embeddings_by_type",
          "embeddings": {"float": [[0.0023, -0.0093]]},
          "meta": {"api_version": {"version": "2"}, "billed_units": {"input_tokens": 4}}}  # fmt: skip


def _answer(path: str, body) -> tuple:
    streamed = body.get("stream") is True
    if path.endswith("/v1/embed"):  # Cohere's, which litellm calls over its own HTTP client
        return 200, "application/json", json.dumps(COHERE).encode(), {}
    if path.endswith("/v1/messages"):  # Anthropic's, where litellm.responses goes by completion
        return 200, "application/json", json.dumps(MESSAGE).encode(), {}
    if path.endswith("/embeddings"):
        return 200, "application/json", json.dumps(_embeddings(body)).encode(), {}
    if path.endswith("/completions") and streamed:
        chunks = [_completion(body, " the", None), _completion(body, "re", None),
                  {**_completion(body, "", None), "choices": [], "usage": COMPLETED}]  # fmt: skip
        return 200, "text/event-stream", _sse(chunks), {}
    if path.endswith("/completions"):
        return 200, "application/json", json.dumps(_completion(body)).encode(), {}
    if path.endswith("/responses") and streamed:
        return 200, "text/event-stream", _sse(_response_events(body)), {}
    if path.endswith("/responses"):
        return 200, "application/json", json.dumps(_response(body)).encode(), {}
    return 404, "application/json", b'{"error": {"message": "no such path"}}', {}


@pytest.fixture(scope="module")
def server():
    running = LocalServer(_answer)
    yield running
    running.close()


ORDERS = {
    "http-sdk-litellm": (http_patches, openai_sdk, litellm_patches),
    "litellm-sdk-http": (litellm_patches, openai_sdk, http_patches),
}
EXPECTED = [
    ("embeddings", "text-embedding-3-small", (8, None)),
    ("text_completion", "gpt-3.5-turbo-instruct", (5, 7)),
    ("chat", "gpt-4o-mini", (36, 9)),
]
COSTS = [
    price("text-embedding-3-small", input_tokens=8),
    price("gpt-3.5-turbo-instruct", input_tokens=5, output_tokens=7),
    price("gpt-4o-mini", input_tokens=36, output_tokens=9),
]


def _recorded(t) -> list:
    return [(a["gen_ai.operation.name"], a["gen_ai.request.model"], tokens(a)) for a in spans(t)]


@pytest.mark.parametrize("order", sorted(ORDERS))
def test_each_call_is_recorded_once_under_litellms_routing_and_priced(server, order):
    base = {"api_base": server.url + "/v1", "api_key": "k"}
    with handling(*ORDERS[order]) as t:
        vector = litellm.embedding(model="text-embedding-3-small", input=["Hello"], **base)
        text = litellm.text_completion(model="gpt-3.5-turbo-instruct", prompt="Hi", **base)
        answer = litellm.responses(model="openai/gpt-4o-mini", input="Hi", **base)
        litellm.responses(model="anthropic/claude-3-5-haiku-20241022", input="Hi",
                          api_base=server.url, api_key="k")  # fmt: skip
        litellm.embedding(model="cohere/embed-english-v3.0", input=["Hello"],
                          api_base=server.url + "/v1/embed", api_key="k")  # fmt: skip
    assert vector.data[0]["embedding"] == [0.0023, -0.0093]  # passed through
    assert text.choices[0].text == " there" and answer.output[0].content[0].text == "Hello there"
    assert _recorded(t) == EXPECTED + [
        ("chat", "claude-3-5-haiku-20241022", (20, 4)),
        ("embeddings", "embed-english-v3.0", (4, None)),
    ]
    found = spans(t)
    assert [a["gen_ai.provider.name"] for a in found] == ["openai"] * 3 + ["anthropic", "cohere"]
    assert [a["otel_tokens.cost.usd"] for a in found[:4]] == pytest.approx(
        COSTS + [price("claude-3-5-haiku-20241022", "anthropic", input_tokens=20, output_tokens=4)]
    )
    assert t.errors() == {}


def test_async_and_streamed_calls_are_recorded_once(server):
    base = {"api_base": server.url + "/v1", "api_key": "k"}

    async def run_async() -> list:
        vector = await litellm.aembedding(model="text-embedding-3-small", input="Hello", **base)
        stream = await litellm.atext_completion(
            model="gpt-3.5-turbo-instruct", prompt="Hi", stream=True,
            stream_options={"include_usage": True}, **base)  # fmt: skip
        text = "".join([c.choices[0].text or "" async for c in stream if c.choices])
        events = await litellm.aresponses(
            model="openai/gpt-4o-mini", input="Hi", stream=True, **base
        )
        kinds = [e.type async for e in events]
        return [vector.data[0]["embedding"], text, kinds]

    with handling(*ORDERS["http-sdk-litellm"]) as t:
        got = asyncio.run(run_async())
        stream = litellm.responses(model="openai/gpt-4o-mini", input="Hi", stream=True, **base)
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        chunks = litellm.text_completion(
            model="gpt-3.5-turbo-instruct", prompt="Hi", stream=True,
            stream_options={"include_usage": True}, **base)  # fmt: skip
        text = "".join(c.choices[0].text or "" for c in chunks if c.choices)
    assert got[0] == [0.0023, -0.0093] and got[1] == " there"
    assert got[2][0] == "response.created" and got[2][-1] == "response.completed"
    assert deltas == ["Hello", " there"] and text == " there"  # passed through
    assert _recorded(t) == EXPECTED + EXPECTED[2:0:-1]
    assert [a["otel_tokens.cost.usd"] for a in spans(t)] == pytest.approx(COSTS + COSTS[2:0:-1])
    assert {a["gen_ai.provider.name"] for a in spans(t)} == {"openai"}
