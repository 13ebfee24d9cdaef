"""What a backend or a caller controls never breaks or poisons the telemetry: absurd token
counts, unbounded names, wrong arguments. Through the real SDK clients with a fake transport."""

from __future__ import annotations

import logging

import openai
import pytest
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics

import otel_tokens
from otel_tokens import Usage
from otel_tokens.capture.sdk import anthropic as anthropic_sdk
from otel_tokens.capture.sdk import openai as openai_sdk
from otel_tokens.emit.cardinality import MAX_VALUE_LENGTH, TRUNCATED
from otel_tokens.handler import set_handler

from ..sdk.replay import http_module
from ..telemetry.conftest import handling, make_telemetry

http = http_module("openai")


def chat_body(prompt_tokens, completion_tokens=3, model="gpt-4o-2024-08-06"):
    return {"id": "chatcmpl-h", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "ok"}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}}  # fmt: skip


@pytest.fixture
def world():
    with handling(openai_sdk, anthropic_sdk) as t:
        yield t


def openai_client(*bodies):
    answers = iter(bodies)
    transport = http.MockTransport(lambda request: http.Response(200, json=next(answers)))
    return openai.OpenAI(api_key="k", max_retries=0, http_client=http.Client(transport=transport))


def test_absurd_usage_is_rejected_counted_and_never_billed_and_export_keeps_working(world):
    client = openai_client(chat_body(2**63 - 1), *[chat_body(10**18)] * 10, chat_body(2_000_000))
    with otel_tokens.agent("a") as entry:
        for _ in range(12):
            assert client.chat.completions.create(model="gpt-4o", messages=[]).id == "chatcmpl-h"
    assert world.errors() == {"usage_invalid": 11}
    spans = world.finished()
    assert all("gen_ai.usage.input_tokens" not in s.attributes for s in spans[:11])
    assert all("otel_tokens.cost.usd" not in s.attributes for s in spans[:11])
    assert spans[11].attributes["gen_ai.usage.input_tokens"] == 2_000_000  # real long context: counted
    assert entry.ledger.cumulative.input_tokens == 2_000_000
    assert entry.state.max_observed_input_tokens == 2_000_000
    tokens = world.point("otel_tokens.tokens", gen_ai__token__type="input")
    assert tokens.value == 2_000_000
    encode_metrics(world.reader.get_metrics_data())  # OTLP still encodes: nothing past int64


def test_the_bound_is_a_setting(world, monkeypatch):
    monkeypatch.setenv("OTEL_TOKENS_MAX_TOKENS_PER_REQUEST", "1000")
    otel_tokens.settings.reload()
    t = make_telemetry()
    set_handler(t.handler)
    client = openai_client(chat_body(999), chat_body(1001))
    with otel_tokens.agent("a") as entry:
        client.chat.completions.create(model="gpt-4o", messages=[])
        client.chat.completions.create(model="gpt-4o", messages=[])
    assert entry.ledger.cumulative.input_tokens == 999
    assert t.errors() == {"usage_invalid": 1}


def test_absurd_usage_through_the_anthropic_client_is_rejected_too(world):
    import anthropic

    ahttp = http_module("anthropic")
    body = {"id": "msg_h", "type": "message", "role": "assistant", "model": "claude-test",
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 10**18, "output_tokens": 2}}  # fmt: skip
    client = anthropic.Anthropic(api_key="k", max_retries=0, http_client=ahttp.Client(
        transport=ahttp.MockTransport(lambda request: ahttp.Response(200, json=body))))  # fmt: skip
    with otel_tokens.agent("a") as entry:
        client.messages.create(model="claude-test", max_tokens=5, messages=[])
    assert world.errors() == {"usage_invalid": 1}
    assert entry.ledger.cumulative.input_tokens is None and entry.state.turn_count == 1


def test_a_ten_thousand_character_model_name_is_cut_on_metrics_and_kept_on_the_span(world):
    name = "m" * 10_000
    client = openai_client(chat_body(10, model=name))
    with otel_tokens.agent("x" * 5_000):
        client.chat.completions.create(model="gpt-4o", messages=[])
    labels = {}
    for point in world.points():
        for key, value in point.attributes.items():
            if isinstance(value, str):
                assert len(value) <= MAX_VALUE_LENGTH, (point.name, key)
                labels[key] = value
    assert labels["gen_ai.response.model"] == "m" * 255 + TRUNCATED
    assert labels["gen_ai.agent.name"] == "x" * 255 + TRUNCATED
    assert world.span().attributes["gen_ai.response.model"] == name  # spans: the SDK's own limits


def test_spans_say_what_happened(world):
    answers = iter([http.Response(200, json={**chat_body(1), "usage": None}),
                    http.Response(500, json={"error": {"message": "boom"}})])  # fmt: skip
    client = openai.OpenAI(api_key="k", max_retries=0, http_client=http.Client(
        transport=http.MockTransport(lambda request: next(answers))))  # fmt: skip
    client.chat.completions.create(model="gpt-4o", messages=[])
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="gpt-4o", messages=[])
    no_usage, failed = world.finished()
    assert "otel_tokens.usage.source" not in no_usage.attributes
    assert "otel_tokens.usage.source" not in failed.attributes
    assert failed.attributes["error.type"] == "openai.InternalServerError"


@pytest.mark.parametrize("misuse, words", [
    (lambda: otel_tokens.agent(""), "agent name"),
    (lambda: otel_tokens.agent(None), "agent name"),  # type: ignore[arg-type]
    (lambda: otel_tokens.agent(42), "agent name"),  # type: ignore[arg-type]
    (lambda: otel_tokens.agent("ok", max_input_tokens=-1), "max_input_tokens"),
    (lambda: otel_tokens.set_budget("", usd=1), "set_budget"),
    (lambda: otel_tokens.set_budget("a", usd=-5), "set_budget"),
    (lambda: otel_tokens.set_budget("a", tokens="lots"), "set_budget"),  # type: ignore[arg-type]
    (lambda: otel_tokens.on_anomaly("not callable"), "on_anomaly"),  # type: ignore[arg-type]
    (lambda: otel_tokens.start_call(operation=None, provider="p", request_model="m").stop(Usage()),
     "start_call(operation"),
    (lambda: otel_tokens.start_call(provider=3, request_model=7, typo=1).stop(Usage()),
     "start_call("),
    (lambda: otel_tokens.instrument_backend("nope"), "instrument_backend"),
    (lambda: otel_tokens.instrument(tracer_provider="not a provider"), "tracer_provider"),
])  # fmt: skip
def test_public_entry_points_never_raise_for_wrong_arguments(world, misuse, words, caplog):
    """OpenTelemetry's rule: the API never throws when used incorrectly; a safe default."""
    caplog.set_level(logging.WARNING, logger="otel_tokens")
    try:
        misuse()
    finally:
        otel_tokens.uninstrument()
    assert world.errors().get("argument", 0) >= 1
    assert any(words in r.getMessage() for r in caplog.records)


# -- one rule for every reader path: booleans and numeric strings are not token counts ----------
def _sse(*events: dict, named: bool = False) -> bytes:
    import json

    out = []
    for event in events:
        if named:
            out.append(f"event: {event['type']}\n")
        out.append(f"data: {json.dumps(event)}\n\n")
    return "".join(out).encode()


def _openai_answers(value, stream: bool):
    if not stream:
        return http.Response(200, json=chat_body(value))
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4o",
             "choices": [{"index": 0, "delta": {"content": "hello"}, "finish_reason": "stop"}]}  # fmt: skip
    usage = {**chunk, "choices": [], "usage": {"prompt_tokens": value, "completion_tokens": 3}}
    return http.Response(200, headers={"content-type": "text/event-stream"},
                         content=_sse(chunk, usage) + b"data: [DONE]\n\n")  # fmt: skip


def _anthropic_answers(value, stream: bool):
    ahttp = http_module("anthropic")
    message = {"id": "msg_h", "type": "message", "role": "assistant", "model": "claude-test",
               "content": [], "stop_reason": None, "usage": {"input_tokens": value, "output_tokens": 1}}  # fmt: skip
    if not stream:
        body = {**message, "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn"}
        return ahttp.Response(200, json=body)
    events = [{"type": "message_start", "message": message},
              {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
              {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hello"}},
              {"type": "content_block_stop", "index": 0},
              {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}},
              {"type": "message_stop"}]  # fmt: skip
    return ahttp.Response(200, headers={"content-type": "text/event-stream"}, content=_sse(*events, named=True))


def _call(sdk: str, value, stream: bool) -> None:
    if sdk == "openai":
        client = openai.OpenAI(api_key="k", max_retries=0, http_client=http.Client(
            transport=http.MockTransport(lambda request: _openai_answers(value, stream))))  # fmt: skip
        result = client.chat.completions.create(model="gpt-4o", messages=[], stream=stream)
    else:
        import anthropic

        ahttp = http_module("anthropic")
        client = anthropic.Anthropic(api_key="k", max_retries=0, http_client=ahttp.Client(
            transport=ahttp.MockTransport(lambda request: _anthropic_answers(value, stream))))  # fmt: skip
        result = client.messages.create(model="claude-test", max_tokens=5, messages=[], stream=stream)
    if stream:
        list(result)


@pytest.mark.parametrize("value", [True, "10"], ids=["boolean", "numeric-string"])
@pytest.mark.parametrize("sdk, stream", [("openai", False), ("openai", True), ("anthropic", False),
                                         ("anthropic", True)],
                         ids=["openai-create", "openai-stream", "anthropic-create", "anthropic-stream"])  # fmt: skip
def test_booleans_and_numeric_strings_are_rejected_the_same_on_every_path(world, sdk, stream, value):
    """A boolean or a string where a token count belongs is not a token count, on every path:
    the response's usage is counted as ``usage_invalid`` and recorded as unknown (no token
    attributes, no source, no cost), never as 1 or 10 and never replaced by an estimate."""
    with otel_tokens.agent("a") as entry:
        _call(sdk, value, stream)
    attributes = world.span().attributes
    assert "gen_ai.usage.input_tokens" not in attributes and "otel_tokens.cost.usd" not in attributes
    assert "otel_tokens.usage.source" not in attributes
    assert world.errors() == {"usage_invalid": 1}
    assert entry.ledger.cumulative.input_tokens is None


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_a_200_stream_that_is_an_html_page_is_an_error_not_a_zero_token_answer(world, sdk):
    page = b"<html><body><h1>Gateway</h1>Please sign in</body></html>"
    if sdk == "openai":
        client = openai.OpenAI(api_key="k", max_retries=0, http_client=http.Client(transport=http.MockTransport(
            lambda request: http.Response(200, headers={"content-type": "text/html"}, content=page))))  # fmt: skip
        chunks = list(client.chat.completions.create(model="gpt-4o", messages=[], stream=True))
    else:
        import anthropic

        ahttp = http_module("anthropic")
        client = anthropic.Anthropic(api_key="k", max_retries=0, http_client=ahttp.Client(transport=ahttp.MockTransport(
            lambda request: ahttp.Response(200, headers={"content-type": "text/html"}, content=page))))  # fmt: skip
        chunks = list(client.messages.create(model="claude-test", max_tokens=5, messages=[], stream=True))
    assert chunks == []  # the caller gets what the SDK gives: nothing
    span = world.span()
    assert span.attributes["error.type"] == "not_an_event_stream"
    assert span.status.status_code.name == "ERROR"
    assert "gen_ai.usage.input_tokens" not in span.attributes
    assert world.errors() == {"parse": 1}
    duration = world.point("gen_ai.client.operation.duration")
    assert duration.attributes["error.type"] == "not_an_event_stream"


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_a_200_event_stream_without_an_event_is_an_error_not_a_zero_token_answer(world, sdk):
    """A proxy that opens an event stream and closes it at once (issue 44): no answer came, so
    the call failed; it is never a successful call of 0 tokens."""
    headers = {"content-type": "text/event-stream"}
    if sdk == "openai":
        client = openai.OpenAI(api_key="k", max_retries=0, http_client=http.Client(transport=http.MockTransport(
            lambda request: http.Response(200, headers=headers, content=b""))))  # fmt: skip
        chunks = list(client.chat.completions.create(model="gpt-4o", messages=[], stream=True))
    else:
        import anthropic

        ahttp = http_module("anthropic")
        client = anthropic.Anthropic(api_key="k", max_retries=0, http_client=ahttp.Client(transport=ahttp.MockTransport(
            lambda request: ahttp.Response(200, headers=headers, content=b": keep-alive\n\n"))))  # fmt: skip
        chunks = list(client.messages.create(model="claude-test", max_tokens=5, messages=[], stream=True))
    assert chunks == []
    span = world.span()
    assert span.attributes["error.type"] == "empty_event_stream"
    assert span.status.status_code.name == "ERROR"
    assert "gen_ai.usage.input_tokens" not in span.attributes
    assert world.errors() == {"parse": 1}


def test_a_cumulative_sum_never_leaves_int64_and_export_keeps_working(world):
    """The bound per call keeps sums far from int64; past it anyway (2**63 tokens in sums of
    at most 10**8 each), a sum is held at the limit and counted, and OTLP still encodes."""
    sums = world.handler.recorder.instruments.tokens
    key = (("gen_ai.token.type", "input"),)
    sums.add(2**63 - 10, key)
    sums.add(100, key)
    encode_metrics(world.reader.get_metrics_data())
    assert world.point("otel_tokens.tokens", gen_ai__token__type="input").value == 2**63 - 1
    assert world.errors() == {"metrics": 1}
