"""What a backend or a caller controls never breaks or poisons the telemetry: absurd token
counts, unbounded names, wrong arguments. Through the real SDK clients with a fake transport."""

from __future__ import annotations

import logging

import openai
import pytest
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics

import otel_tokens
from otel_tokens import Usage
from otel_tokens.capture import anthropic_sdk, openai_sdk
from otel_tokens.emit.cardinality import MAX_VALUE_LENGTH, TRUNCATED
from otel_tokens.handler import set_handler

from ..sdk.replay import http_module
from ..telemetry.conftest import make_telemetry

http = http_module("openai")


def chat_body(prompt_tokens, completion_tokens=3, model="gpt-4o-2024-08-06"):
    return {"id": "chatcmpl-h", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "ok"}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}}  # fmt: skip


@pytest.fixture
def world():
    t = make_telemetry()
    previous = set_handler(t.handler)
    openai_sdk.install()
    anthropic_sdk.install()
    yield t
    openai_sdk.uninstall()
    anthropic_sdk.uninstall()
    set_handler(previous)


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
