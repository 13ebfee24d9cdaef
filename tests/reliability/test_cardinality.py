"""The cardinality guard: outside-sourced metric attribute values are bounded; spans keep them."""

from __future__ import annotations

import pytest

import otel_tokens
from otel_tokens import Usage
from otel_tokens.emit.cardinality import OTHER, CardinalityGuard

from ..telemetry.conftest import make_telemetry


def test_models_past_the_bound_become_other(monkeypatch):
    monkeypatch.setenv("OTEL_TOKENS_MAX_ATTRIBUTE_VALUES", "3")
    otel_tokens.settings.reload()
    t = make_telemetry()
    with otel_tokens.agent("a"):
        for i in range(5):
            call = t.handler.start(operation="chat", provider="openai", request_model=f"model-{i}")
            call.stop(Usage(input_tokens=10, output_tokens=1), response_model=f"model-{i}")
    models = sorted({p.attributes["gen_ai.request.model"] for p in t.points("otel_tokens.tokens")})
    assert models == [OTHER, "model-0", "model-1", "model-2"]
    other = [p for p in t.points("otel_tokens.tokens")
             if p.attributes["gen_ai.request.model"] == OTHER and p.attributes["gen_ai.token.type"] == "input"]
    assert [p.value for p in other] == [20]  # both late models' tokens, none lost
    assert sorted(s.attributes["gen_ai.request.model"] for s in t.finished()) == [f"model-{i}" for i in range(5)]
    assert t.errors()["cardinality"] == 4  # request and response model, two calls each
    durations = {p.attributes["gen_ai.request.model"] for p in t.points("gen_ai.client.operation.duration")}
    assert OTHER in durations and len(durations) == 4


def test_agents_are_bounded_on_the_gauge_too(monkeypatch):
    monkeypatch.setenv("OTEL_TOKENS_MAX_ATTRIBUTE_VALUES", "2")
    otel_tokens.settings.reload()
    t = make_telemetry()
    for i in range(4):
        with otel_tokens.agent(f"agent-{i}", max_input_tokens=100):
            t.handler.start(operation="chat", provider="openai", request_model="m").stop(
                Usage(input_tokens=10 + i, output_tokens=1))
    agents = {p.attributes["gen_ai.agent.name"] for p in t.points("otel_tokens.context.utilization")}
    assert agents <= {"agent-0", "agent-1", OTHER} and OTHER in agents


def test_guard_unit():
    overflowed = []
    guard = CardinalityGuard(2, overflowed.append)
    assert guard.value("gen_ai.request.model", "a") == "a"
    assert guard.value("gen_ai.request.model", "b") == "b"
    assert guard.value("gen_ai.request.model", "c") == OTHER
    assert guard.value("gen_ai.request.model", "a") == "a"
    assert guard.value("otel_tokens.usage.source", "x") == "x"  # not an outside-sourced key
    attrs = {"gen_ai.request.model": "a"}
    assert guard.attributes(attrs) is attrs
    assert overflowed == ["gen_ai.request.model"]


def test_bad_limit_is_one_problem_and_the_default(monkeypatch):
    monkeypatch.setenv("OTEL_TOKENS_MAX_ATTRIBUTE_VALUES", "lots")
    found = otel_tokens.settings.reload()
    assert [(p.name, p.value) for p in found.problems] == [("OTEL_TOKENS_MAX_ATTRIBUTE_VALUES", "lots")]
    assert found.max_attribute_values == 200
