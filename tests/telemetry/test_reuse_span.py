"""With OTEL_TOKENS_REUSE_GENAI_SPAN on, only another instrumentation's span of the model call
itself is borrowed: an agent's ``invoke_agent`` span (or a tool's) around the call keeps its
own attributes, and the call gets its own span beneath it."""

from __future__ import annotations

from otel_tokens import settings
from otel_tokens.usage import Usage

from .conftest import make_telemetry


def _call_under(monkeypatch, operation: str):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("OTEL_TOKENS_REUSE_GENAI_SPAN", "true")
    settings.reload()
    t = make_telemetry()
    tracer = t.tracer_provider.get_tracer("another.instrumentation")
    with tracer.start_as_current_span("outer", attributes={"gen_ai.operation.name": operation}):
        call = t.handler.start(operation="chat", provider="openai", request_model="gpt-4o")
        with call.activate():
            pass
        call.stop(Usage(input_tokens=10, output_tokens=2))
    return {span.name: dict(span.attributes) for span in t.finished()}


def test_an_agent_span_around_the_call_is_not_borrowed(monkeypatch):
    spans = _call_under(monkeypatch, "invoke_agent")
    assert "gen_ai.usage.input_tokens" not in spans["outer"]
    assert len(spans) == 2 and any(a.get("gen_ai.usage.input_tokens") == 10 for a in spans.values())


def test_a_chat_span_of_another_instrumentation_is_borrowed(monkeypatch):
    spans = _call_under(monkeypatch, "chat")
    assert list(spans) == ["outer"] and spans["outer"]["gen_ai.usage.input_tokens"] == 10
