"""The cardinality guard: outside-sourced metric attribute values are bounded; spans keep them."""

from __future__ import annotations

import pytest

import otel_tokens
from otel_tokens import Usage
from otel_tokens.emit.cardinality import OTHER, CardinalityGuard

from ..telemetry.conftest import handling, make_telemetry


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


# -- label sets: who the calls are for, bounded on metrics; a late agent keeps its name ----------

@pytest.fixture
def who_on_metrics(monkeypatch):
    """A fresh telemetry, with user and tenant on metric points, as the process's handler and
    the real openai client patched."""
    from otel_tokens.capture.sdk import openai as openai_sdk

    monkeypatch.setenv("OTEL_TOKENS_METRIC_ATTRIBUTES", "user,tenant")
    otel_tokens.settings.reload()
    with handling(openai_sdk) as t:
        yield t


def _as_user(user: str, call) -> None:
    from opentelemetry import baggage, context

    token = context.attach(baggage.set_baggage("user.id", user))  # what a web service passes on
    try:
        call()
    finally:
        context.detach(token)


def test_3000_long_user_ids_then_a_late_agent_is_counted_under_its_name(who_on_metrics):
    from ..sdk.replay import openai_client
    from ..sdk.test_full_bill import chat, served

    t = who_on_metrics
    users = [f"user-{i:04d}-" + "x" * 1013 for i in range(3000)]  # 3,000 distinct 1 kB ids
    client, _ = openai_client(served(*[chat("gpt-4o-mini", "default", 100, 10)] * 3000,
                                     chat("gpt-4o-mini", "default", 777, 10)))  # fmt: skip

    def ask() -> None:
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])

    with otel_tokens.agent("support-caps"):
        for user in users:
            _as_user(user, ask)
    with otel_tokens.agent("late-agent"):
        _as_user("user-late", ask)

    late = t.point("otel_tokens.tokens", gen_ai__agent__name="late-agent", gen_ai__token__type="input")
    assert late.value == 777 and late.attributes["user.id"] == OTHER
    points = t.points()
    assert not [p for p in points if "otel.metric.overflow" in p.attributes]  # the SDK's limit never hit
    per_metric: dict[str, int] = {}
    for p in points:
        per_metric[p.name] = per_metric.get(p.name, 0) + 1
    assert max(per_metric.values()) < 2000
    user_values = {p.attributes["user.id"] for p in points if "user.id" in p.attributes}
    assert max(len(v) for v in user_values) == 256 and OTHER in user_values
    assert len(user_values) <= 96  # three quarters of the 128 label sets, the rest folded
    inputs = [p.value for p in t.points("otel_tokens.tokens") if p.attributes["gen_ai.token.type"] == "input"]
    assert sum(inputs) == 3000 * 100 + 777  # folded, never lost
    spans = t.finished()
    assert spans[0].attributes["user.id"] == users[0]  # spans keep the real values (SDK-bounded)
    assert t.errors()["cardinality"] > 0


def test_label_set_budget_unit():
    folded = []
    guard = CardinalityGuard(1000, folded.append, max_sets=12)  # 9 places shared, 3 kept back
    base = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai"}
    admitted = [guard.label_set({**base, "gen_ai.agent.name": "a", "user.id": f"u{i}"}) for i in range(10)]
    assert [a["user.id"] for a in admitted] == [f"u{i}" for i in range(8)] + [OTHER] * 2
    late = guard.label_set({**base, "gen_ai.agent.name": "late"})
    assert late["gen_ai.agent.name"] == "late"  # the user-less set of "a" and this one: 11
    failed = guard.label_set({**late, "error.type": "TimeoutError"})
    assert failed == {**late, "error.type": OTHER}  # error types give way too: 12, all taken
    assert guard.label_set({**base, "gen_ai.agent.name": "later"}) == {
        "gen_ai.operation.name": OTHER, "gen_ai.provider.name": OTHER, "gen_ai.agent.name": OTHER}
    plain = {**base, "gen_ai.agent.name": "a", "user.id": OTHER}
    assert guard.label_set(plain) is plain  # an admitted set: the same dict, nothing counted
    assert folded.count("label sets: user, tenant, conversation") == 2


def test_the_sdk_limit_is_raised_when_more_label_sets_are_asked_for(monkeypatch):
    monkeypatch.setenv("OTEL_TOKENS_MAX_LABEL_SETS", "400")
    otel_tokens.settings.reload()
    from otel_tokens.emit.instruments import views

    limits = {v._instrument_name: v._aggregation_cardinality_limit for v in views()}
    assert set(limits.values()) == {400 * 15 + 1} and "otel_tokens.tokens" in limits
    monkeypatch.delenv("OTEL_TOKENS_MAX_LABEL_SETS")
    assert {v._aggregation_cardinality_limit for v in views(128)} == {2000}
