"""Hypothesis: arbitrary usage blocks through every instrumentor's extraction.

Missing fields, nulls, negatives, huge ints, floats (fractional, NaN, infinite), booleans,
strings where numbers belong and nested garbage are served, as JSON, to the real ``openai``
and ``anthropic`` clients (chat, chat streamed, Responses, Responses streamed, embeddings;
messages, messages streamed), and written into the shared agent-CLI samples' usage fields
(Copilot, Claude Code, Codex, Gemini) handed to ``instrument_backend``. Whatever arrives:

* nothing raises out of the instrumentation, and the host gets the SDK's own result;
* every call still ends (one span each);
* no negative, non-integer or out-of-range (beyond int64, which no exporter can encode)
  token count is recorded: span attributes, metric points, the agent's state and ledger.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import otel_tokens
from otel_tokens.capture.sdk import anthropic as anthropic_sdk
from otel_tokens.capture.sdk import openai as openai_sdk
from otel_tokens.capture.methods.backend import instrument_backend, uninstrument_backend
from otel_tokens.handler import set_handler
from otel_tokens.usage import TOKEN_CLASSES

from .. import cassettes
from ..sdk.replay import http_module
from ..telemetry.conftest import make_telemetry
from . import hosts

INT64 = 2**63
SETTINGS = settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])

# -- garbage ----------------------------------------------------------------------------------
numbers = st.one_of(
    st.integers(min_value=0, max_value=10**6),
    st.integers(min_value=-(10**6), max_value=-1),
    st.integers(min_value=2**62, max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.5, 12.0, -3.0, 1e30]),
)
scalars = st.one_of(numbers, st.none(), st.booleans(), st.text(max_size=8),
                    st.sampled_from(["12", "-1", "NaN", ""]))  # fmt: skip
garbage = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)), max_leaves=6)


def block(fields: dict[str, Any]) -> st.SearchStrategy[Any]:
    """A usage block: each known field absent, or any garbage (nested blocks recursively)."""
    parts = {}
    for name, sub in fields.items():
        value = block(sub) if isinstance(sub, dict) else st.one_of(numbers, garbage)
        parts[name] = st.one_of(value, garbage) if isinstance(sub, dict) else value
    fixed = st.fixed_dictionaries({}, optional=parts)
    return st.one_of(fixed, fixed, fixed, garbage)  # mostly block-shaped, sometimes not at all


CHAT_USAGE = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0,
              "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
              "completion_tokens_details": {"reasoning_tokens": 0}}  # fmt: skip
RESPONSES_USAGE = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0,
                   "input_tokens_details": {"cached_tokens": 0},
                   "output_tokens_details": {"reasoning_tokens": 0}}  # fmt: skip
EMBEDDINGS_USAGE = {"prompt_tokens": 0, "total_tokens": 0}
ANTHROPIC_USAGE = {"input_tokens": 0, "output_tokens": 0, "cache_read_input_tokens": 0,
                   "cache_creation_input_tokens": 0,
                   "output_tokens_details": {"thinking_tokens": 0}}  # fmt: skip


# -- checking what was recorded ---------------------------------------------------------------
def _count_ok(value: Any) -> bool:
    return type(value) is int and 0 <= value < INT64


def check(t: Any, calls: int, entry: Any) -> None:
    spans = t.finished()
    assert len(spans) == calls, "every call ends, once"
    for span in spans:
        for key, value in (span.attributes or {}).items():
            if key.startswith("gen_ai.usage.") or key.startswith("otel_tokens.account.state.") and "tokens" in key:
                assert _count_ok(value), (key, value)
    for point in t.points("otel_tokens.tokens"):
        assert _count_ok(point.value), point
    for point in t.points("gen_ai.client.token.usage"):
        assert point.sum is not None and point.sum >= 0 and float(point.sum).is_integer(), point
        assert point.sum < INT64, point
    state = entry.state
    for value in (state.turn_count, state.total_output_tokens):
        assert _count_ok(value), value
    assert state.max_observed_input_tokens is None or _count_ok(state.max_observed_input_tokens)
    totals = entry.ledger.cumulative
    for name in TOKEN_CLASSES:
        value = getattr(totals, name)
        assert value is None or (type(value) is int and value >= 0), (name, value)
    records = entry.ledger.history()
    assert len(records) == totals.requests
    for record in records:
        for name in TOKEN_CLASSES:
            value = getattr(record, name, None)
            assert value is None or _count_ok(value), (name, value)
        assert math.isfinite(record.cost_usd) if record.cost_usd is not None else True


def _json(value: Any) -> bytes:
    return json.dumps(value, allow_nan=True).encode()


class Served:
    """A mock transport serving whatever body the example set."""

    def __init__(self, sdk: str) -> None:
        self.http = http_module(sdk)
        self.body = b"{}"
        self.stream = False

    def handler(self, request: Any) -> Any:
        kind = "text/event-stream" if self.stream else "application/json"
        return self.http.Response(200, headers={"content-type": kind}, content=self.body)

    def client(self) -> Any:
        return self.http.Client(transport=self.http.MockTransport(self.handler))


@pytest.fixture(scope="module")
def sdks():
    cassettes.require()
    import anthropic
    import openai

    oa, an = Served("openai"), Served("anthropic")
    clients = {
        "openai": (openai.OpenAI(api_key="test", max_retries=0, http_client=oa.client()), oa),
        "anthropic": (anthropic.Anthropic(api_key="test", max_retries=0, http_client=an.client()), an),
    }
    openai_sdk.install()
    anthropic_sdk.install()
    yield clients
    openai_sdk.uninstall()
    anthropic_sdk.uninstall()


def run(host: Any) -> None:
    """One example: a fresh handler, the host call under an agent, the checks."""
    t = make_telemetry()
    previous = set_handler(t.handler)
    try:
        with otel_tokens.agent("fuzz") as entry:
            host()
        check(t, 1, entry)
    finally:
        set_handler(previous)
        otel_tokens.clear_agents()


MESSAGES = [{"role": "user", "content": "hi"}]


def sse(events: list[Any], named: bool = False) -> bytes:
    out = []
    for event in events:
        if named and isinstance(event, dict) and isinstance(event.get("type"), str):
            out.append(f"event: {event['type']}\n")
        out.append(f"data: {json.dumps(event, allow_nan=True)}\n\n")
    return "".join(out).encode()


# -- OpenAI -----------------------------------------------------------------------------------
@SETTINGS
@given(usage=block(CHAT_USAGE))
def test_openai_chat(sdks, usage):
    client, served = sdks["openai"]
    served.stream = False
    served.body = _json({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                                      "finish_reason": "stop"}], "usage": usage})  # fmt: skip

    def host() -> None:
        result = client.chat.completions.create(model="gpt-4o", messages=MESSAGES)
        assert result.choices[0].message.content == "ok"

    run(host)


@SETTINGS
@given(usage=block(CHAT_USAGE), running=st.lists(block(CHAT_USAGE), max_size=2))
def test_openai_chat_stream(sdks, usage, running):
    client, served = sdks["openai"]
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o"}
    chunks = [{**base, "choices": [{"index": 0, "delta": {"content": "He"}, "finish_reason": None}],
               "usage": u} for u in running]  # fmt: skip
    chunks.append({**base, "choices": [{"index": 0, "delta": {"content": "llo"}, "finish_reason": "stop"}]})
    chunks.append({**base, "choices": [], "usage": usage})
    served.stream, served.body = True, sse(chunks) + b"data: [DONE]\n\n"

    def host() -> None:
        got = [c for c in client.chat.completions.create(model="gpt-4o", messages=MESSAGES, stream=True)]
        assert len(got) == len(chunks)

    run(host)


def _response(usage: Any) -> dict[str, Any]:
    return {"id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-4o", "status": "completed",
            "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": "ok", "annotations": []}]}],
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "usage": usage}  # fmt: skip


@SETTINGS
@given(usage=block(RESPONSES_USAGE))
def test_openai_responses(sdks, usage):
    client, served = sdks["openai"]
    served.stream, served.body = False, _json(_response(usage))
    run(lambda: client.responses.create(model="gpt-4o", input="hi"))


@SETTINGS
@given(usage=block(RESPONSES_USAGE))
def test_openai_responses_stream(sdks, usage):
    client, served = sdks["openai"]
    events = [
        {"type": "response.created", "sequence_number": 0, "response": {**_response(None), "status": "in_progress"}},
        {"type": "response.output_text.delta", "sequence_number": 1, "item_id": "msg_1", "output_index": 0,
         "content_index": 0, "delta": "ok", "logprobs": []},
        {"type": "response.completed", "sequence_number": 2, "response": _response(usage)},
    ]  # fmt: skip
    served.stream, served.body = True, sse(events, named=True)

    def host() -> None:
        assert len(list(client.responses.create(model="gpt-4o", input="hi", stream=True))) == 3

    run(host)


@SETTINGS
@given(usage=block(EMBEDDINGS_USAGE))
def test_openai_embeddings(sdks, usage):
    client, served = sdks["openai"]
    served.stream = False
    served.body = _json({"object": "list", "model": "text-embedding-3-small", "usage": usage,
                         "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2]}]})  # fmt: skip
    run(lambda: client.embeddings.create(model="text-embedding-3-small", input="hi"))


# -- Anthropic --------------------------------------------------------------------------------
def _message(usage: Any) -> dict[str, Any]:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-3-5-sonnet-20241022",
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
            "stop_sequence": None, "usage": usage}  # fmt: skip


@SETTINGS
@given(usage=block(ANTHROPIC_USAGE))
def test_anthropic_messages(sdks, usage):
    client, served = sdks["anthropic"]
    served.stream, served.body = False, _json(_message(usage))
    run(lambda: client.messages.create(model="claude-3-5-sonnet-20241022", max_tokens=10, messages=MESSAGES))


@SETTINGS
@given(start=block(ANTHROPIC_USAGE), deltas=st.lists(block(ANTHROPIC_USAGE), min_size=1, max_size=3))
def test_anthropic_messages_stream(sdks, start, deltas):
    client, served = sdks["anthropic"]
    events = [{"type": "message_start", "message": {**_message(start), "content": [], "stop_reason": None}},
              {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
              {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
              {"type": "content_block_stop", "index": 0}]  # fmt: skip
    events += [{"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": u} for u in deltas]  # fmt: skip
    events.append({"type": "message_stop"})
    served.stream, served.body = True, sse(events, named=True)

    def host() -> None:
        stream = client.messages.create(model="claude-3-5-sonnet-20241022", max_tokens=10,
                                        messages=MESSAGES, stream=True)  # fmt: skip
        assert len(list(stream)) == len(events)

    run(host)


# -- agent CLIs through instrument_backend ----------------------------------------------------
CLI_SAMPLES = {
    "copilot": "copilot/success.jsonl",
    "claude": "claude/success_stream.jsonl",
    "codex": "codex/success.jsonl",
    "gemini": "gemini/success_stream.jsonl",
}
_USAGE_KEY = ("token", "usage", "cost", "premium", "stats", "metrics", "models")


def _lines(cli: str) -> list[Any]:
    path = hosts.ROOT.parent / "shared" / "fixtures" / "cli" / CLI_SAMPLES[cli]
    if not path.is_file():
        pytest.skip(f"shared CLI samples not found at {path}")
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            out.append(line)
    return out


def _corrupt(value: Any, data: Any, under_usage: bool = False) -> Any:
    """Every number under a usage-like key replaced by a drawn value (garbage included)."""
    if isinstance(value, dict):
        return {k: _corrupt(v, data, under_usage or any(s in k.lower() for s in _USAGE_KEY))
                for k, v in value.items()}  # fmt: skip
    if isinstance(value, list):
        return [_corrupt(v, data, under_usage) for v in value]
    if under_usage and isinstance(value, (int, float)) and not isinstance(value, bool):
        return data.draw(st.one_of(st.just(value), numbers, garbage))
    return value


class Backend:
    output = ""

    def invoke(self, prompt: str) -> hosts.AgentResult:
        return hosts.AgentResult(stdout=self.output)


TARGET = "tests.reliability.test_usage_fuzz:Backend.invoke"


@pytest.mark.parametrize("cli", sorted(CLI_SAMPLES))
@SETTINGS
@given(data=st.data())
def test_cli_parsers(cli, data):
    lines = _lines(cli)
    text = "\n".join(json.dumps(_corrupt(x, data), allow_nan=True) if not isinstance(x, str) else x
                     for x in lines) + "\n"  # fmt: skip
    Backend.output = text
    instrument_backend(TARGET, parser=cli)
    try:
        run(lambda: Backend().invoke("x").stdout == text or pytest.fail("result changed"))
    finally:
        uninstrument_backend(TARGET)


@SETTINGS
@given(returned=garbage)
def test_backend_callable_parser_returning_garbage(returned):
    def parser(result: Any) -> Any:
        return returned

    instrument_backend(TARGET, parser=parser)
    Backend.output = "whatever"
    try:
        run(lambda: Backend().invoke("x"))
    finally:
        uninstrument_backend(TARGET)


@SETTINGS
@given(fields=st.dictionaries(st.sampled_from([*TOKEN_CLASSES, "premium_requests", "cost_usd"]),
                              st.one_of(numbers, garbage), max_size=5))  # fmt: skip
def test_backend_callable_parser_building_a_usage(fields):
    """A user parser building a Usage from a backend's numbers: a bad value raises in the
    parser (ValueError from Usage), which is caught and counted, never the host's problem."""
    from otel_tokens import Usage

    instrument_backend(TARGET, parser=lambda result: Usage(**fields))
    Backend.output = "whatever"
    try:
        run(lambda: Backend().invoke("x"))
    finally:
        uninstrument_backend(TARGET)


def test_fuzz_examples_reach_the_instrumentation(sdks):
    """The harness is live: a valid block is recorded (so the checks above check something)."""
    client, served = sdks["openai"]
    served.stream = False
    served.body = _json({"id": "c", "object": "chat.completion", "created": 1, "model": "gpt-4o",
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                                      "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}})  # fmt: skip
    t = make_telemetry()
    previous = set_handler(t.handler)
    try:
        with otel_tokens.agent("fuzz") as entry:
            client.chat.completions.create(model="gpt-4o", messages=MESSAGES)
        assert t.span().attributes["gen_ai.usage.input_tokens"] == 5
        assert entry.ledger.cumulative.output_tokens == 2
    finally:
        set_handler(previous)


