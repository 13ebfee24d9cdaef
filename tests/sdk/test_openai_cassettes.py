"""Every recorded OpenAI request the instrumented methods can produce, replayed through the
real ``openai`` client: span attributes and metric points equal the recorded usage for every
token class, plus response id, response model, finish reasons, and ``error.type`` for the
recorded 4xx responses.

The table printed by ``test_cassette_table`` lists each cassette and what it asserts; a
cassette or interaction left out is listed with the reason.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

import otel_tokens
from otel_tokens.capture.sdk import openai as openai_sdk

from .. import cassettes
from ..telemetry.conftest import handling
from .replay import call_kwargs, openai_client

ENDPOINTS = {"chat/completions": "chat", "responses": "responses", "embeddings": "embeddings"}
LEFT_OUT = {
    "images/generations": "image generation is not a token-metered call the instrumentors cover",
    "upload.wikimedia.org": "a plain image download recorded beside the API call",
}


@dataclass
class Expected:
    """What the recorded response says."""

    status: int
    input: int | None = None
    output: int | None = None
    cache_read: int | None = None
    reasoning: int | None = None
    response_id: str | None = None
    model: str | None = None
    finish: tuple[str, ...] = ()
    streamed_usage: bool = True
    error_type: str | None = None
    notes: list[str] = field(default_factory=list)


def _endpoint(uri: str) -> tuple[str | None, str]:
    for suffix, kind in ENDPOINTS.items():
        if uri.split("?")[0].rstrip("/").endswith("/" + suffix):
            return kind, uri.split("?")[0][: -len(suffix) - 1]
    return None, ""


def expected(it: cassettes.Interaction, kind: str) -> Expected:
    if it.status >= 400:
        return Expected(it.status)
    events = it.sse_events() if it.is_stream else [it.response_json()]
    exp = Expected(it.status, streamed_usage=False)
    for event in events:
        body = event.get("response") if kind == "responses" and it.is_stream else event
        if not isinstance(body, dict):
            continue
        exp.response_id = body.get("id") or exp.response_id
        exp.model = body.get("model") or exp.model
        usage = body.get("usage")
        if usage:
            exp.streamed_usage = True
            if kind == "responses":
                exp.input, exp.output = usage.get("input_tokens"), usage.get("output_tokens")
                exp.cache_read = (usage.get("input_tokens_details") or {}).get("cached_tokens")
                exp.reasoning = (usage.get("output_tokens_details") or {}).get("reasoning_tokens")
            else:
                exp.input, exp.output = usage.get("prompt_tokens"), usage.get("completion_tokens")
                exp.cache_read = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
                exp.reasoning = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens")
        if kind == "chat":
            reasons = [c.get("finish_reason") for c in body.get("choices") or () if c.get("finish_reason")]
            exp.finish = exp.finish + tuple(reasons)
        elif kind == "responses" and body.get("status") in ("completed", "incomplete"):
            reason = (body.get("incomplete_details") or {}).get("reason")
            exp.finish = (reason or body["status"],)
    return exp


def replay(it: cassettes.Interaction, kind: str, is_async: bool) -> tuple[Any, BaseException | None]:
    client, _ = openai_client([it], is_async=is_async)
    _, base = _endpoint(it.uri)
    client = client.with_options(base_url=base)
    method = {"chat": client.chat.completions.create, "responses": client.responses.create,
              "embeddings": client.embeddings.create}[kind]  # fmt: skip
    kwargs = call_kwargs(method, it.request_body)

    async def run_async() -> Any:
        result = await method(**kwargs)
        if kwargs.get("stream"):
            return [item async for item in result]
        return result

    try:
        if is_async:
            return asyncio.run(run_async()), None
        result = method(**kwargs)
        return (list(result) if kwargs.get("stream") else result), None
    except Exception as exc:  # a recorded 4xx: the SDK's own exception
        return None, exc


def cases() -> list[tuple[str, int]]:
    out = []
    for path in cassettes.all_files("openai-v2") + cassettes.all_files("openai-openllmetry"):
        for it in cassettes.load(path):
            kind, _ = _endpoint(it.uri)
            if kind is not None and isinstance(it.request_body, dict):
                out.append((f"{path.parent.name}/{path.name}", it.index))
    return out


@pytest.fixture
def telemetry():
    with handling(openai_sdk) as t:
        yield t


def _interaction(name: str, index: int) -> cassettes.Interaction:
    return cassettes.load(cassettes.CASSETTES / name)[index]


CASES = cases()


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("name, index", CASES or [pytest.param("", 0, marks=pytest.mark.skip(
    reason="shared cassettes not found beside the repository"))])  # fmt: skip
def test_replayed_call_matches_recorded_usage(telemetry, name, index, is_async):
    it = _interaction(name, index)
    kind, _ = _endpoint(it.uri)
    exp = expected(it, kind)
    with otel_tokens.agent("replay") as entry:
        result, error = replay(it, kind, is_async)
    (span,) = telemetry.finished()
    attrs = span.attributes
    operation = "embeddings" if kind == "embeddings" else "chat"
    assert span.name == f"{operation} {it.request_body.get('model')}"
    if exp.status >= 400:
        assert error is not None and result is None
        assert attrs["error.type"] == f"{type(error).__module__}.{type(error).__qualname__}"
        assert span.status.status_code.name == "ERROR"
        assert entry.state.turn_count == 0
        return
    assert error is None
    if kind == "chat" and it.is_stream and not exp.streamed_usage:
        # no usage in the stream (the SDK default): input from the pre-call estimate, output
        # counted from the streamed text, both marked estimated, priced as estimated, and the
        # stream counted on otel_tokens.usage.missing (a normal case, not a fault)
        assert attrs["otel_tokens.usage.source"] == "estimated"
        assert attrs["gen_ai.usage.input_tokens"] == attrs["otel_tokens.estimate.input_tokens"]
        assert attrs["gen_ai.usage.output_tokens"] > 0
        assert attrs["otel_tokens.cost.source"] == "estimated" and attrs["otel_tokens.cost.usd"] > 0
        assert telemetry.point("otel_tokens.usage.missing").value == 1
        assert telemetry.errors() == {}
        return
    assert attrs["otel_tokens.usage.source"] == "reported"
    for key, value in [("gen_ai.usage.input_tokens", exp.input),
                       ("gen_ai.usage.output_tokens", exp.output),
                       ("gen_ai.usage.cache_read.input_tokens", exp.cache_read),
                       ("gen_ai.usage.reasoning.output_tokens", exp.reasoning)]:  # fmt: skip
        assert attrs.get(key) == value, key
    if exp.response_id and kind != "embeddings":
        assert attrs["gen_ai.response.id"] == exp.response_id
    if exp.model:
        assert attrs["gen_ai.response.model"] == exp.model
    if exp.finish:
        assert tuple(attrs["gen_ai.response.finish_reasons"]) == exp.finish
    tokens = {p.attributes["gen_ai.token.type"]: p.value for p in telemetry.points("otel_tokens.tokens")}
    assert tokens.get("input") == exp.input and tokens.get("output") == exp.output
    assert tokens.get("cache_read") == exp.cache_read
    assert entry.ledger.cumulative.input_tokens == exp.input
    assert telemetry.errors() == {}


def test_cassette_table():
    """What each recorded interaction asserts, and why any is left out."""
    cassettes.require()
    rows = []
    for path in cassettes.all_files("openai-v2") + cassettes.all_files("openai-openllmetry"):
        for it in cassettes.load(path):
            kind, _ = _endpoint(it.uri)
            name = f"{path.parent.name}/{path.name}#{it.index}"
            if kind is None:
                reason = next((r for k, r in LEFT_OUT.items() if k in it.uri), None)
                assert reason is not None, f"no reason recorded for leaving out {name} ({it.uri})"
                rows.append((name, "left out: " + reason))
                continue
            exp = expected(it, kind)
            if exp.status >= 400:
                what = f"{it.status}: error.type, ERROR status, no turn"
            elif kind == "chat" and it.is_stream and not exp.streamed_usage:
                what = "stream without usage: output estimated, input absent"
            else:
                classes = [n for n, v in [("input", exp.input), ("output", exp.output),
                                          ("cache_read", exp.cache_read),
                                          ("reasoning", exp.reasoning)] if v is not None]  # fmt: skip
                what = f"{kind}{' stream' if it.is_stream else ''}: {', '.join(classes)}; id, model, finish"
            rows.append((name, what))
    width = max(len(r[0]) for r in rows)
    print("\n" + "\n".join(f"{n:<{width}}  {w}" for n, w in rows))
    assert len(rows) > 150
