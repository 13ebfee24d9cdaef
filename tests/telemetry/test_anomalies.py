"""Budgets and spike detection: each kind, callbacks, span events, the opt-in raise."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import otel_tokens
from otel_tokens import AnomalyGuard, Budget, BudgetExceeded, Estimate, SpikeRule, Usage
from otel_tokens.settings import read

from .conftest import make_telemetry

UNPRICED = "no-such-model"  # keeps cost out of token-only tests


def call(t, usage, model=UNPRICED, estimate=None):
    c = t.handler.start(operation="chat", provider="openai", request_model=model,
                              estimate=estimate)  # fmt: skip
    c.stop(usage)
    return c


def anomaly_events(t):
    return [
        (e.attributes["otel_tokens.anomaly.kind"], e.attributes["otel_tokens.anomaly.observed"],
         e.attributes["otel_tokens.anomaly.threshold"])
        for s in t.finished() for e in s.events if e.name == "otel_tokens.anomaly"
    ]  # fmt: skip


def anomaly_counts(t):
    return {p.attributes["otel_tokens.anomaly.kind"]: p.value for p in t.points("otel_tokens.anomalies")}


def test_token_spike_after_warmup():
    t = make_telemetry(guard=AnomalyGuard(spike=SpikeRule(factor=3, warmup=5, window=50)))
    seen = []
    t.handler.guard.add_callback(seen.append)
    with otel_tokens.agent("a"):
        call(t, Usage(input_tokens=10_000, output_tokens=0))  # huge, but still warming up
        for _ in range(4):
            call(t, Usage(input_tokens=100, output_tokens=0))
        call(t, Usage(input_tokens=250, output_tokens=50))  # 300 <= 3 x p95: normal
        assert seen == []
        window = [10_000, 100, 100, 100, 100, 300]
        call(t, Usage(input_tokens=40_000, output_tokens=0))
    (anomaly,) = seen
    assert anomaly.kind == "token_spike" and anomaly.agent == "a" and anomaly.observed == 40_000
    import statistics

    p95 = statistics.quantiles(window, n=100, method="inclusive")[94]
    assert anomaly.threshold == pytest.approx(3 * p95)
    assert anomaly_events(t) == [("token_spike", 40_000.0, pytest.approx(3 * p95))]
    assert anomaly_counts(t) == {"token_spike": 1}
    point = t.points("otel_tokens.anomalies")[0]
    assert point.unit == "{event}" and point.attributes["gen_ai.agent.name"] == "a"


def test_cost_spike():
    t = make_telemetry(guard=AnomalyGuard(spike=SpikeRule(factor=2, warmup=3, window=10)))
    with otel_tokens.agent("a"):
        for _ in range(3):
            call(t, Usage(input_tokens=100, output_tokens=10, cost_usd=0.01))
        call(t, Usage(input_tokens=100, output_tokens=10, cost_usd=0.05))
    assert anomaly_counts(t) == {"cost_spike": 1}


def test_spikes_are_per_agent():
    t = make_telemetry(guard=AnomalyGuard(spike=SpikeRule(factor=2, warmup=3, window=10)))
    with otel_tokens.agent("small"):
        for _ in range(3):
            call(t, Usage(input_tokens=10))
    with otel_tokens.agent("big"):
        for _ in range(3):
            call(t, Usage(input_tokens=10_000))
    with otel_tokens.agent("small"):
        call(t, Usage(input_tokens=15))
    with otel_tokens.agent("big"):
        call(t, Usage(input_tokens=12_000))
    assert anomaly_counts(t) == {}


def test_token_budget_crossing_is_reported_once_per_crossing():
    guard = AnomalyGuard()
    guard.set_budget("a", Budget(tokens=1000, window_seconds=3600))
    t = make_telemetry(guard=guard)
    with otel_tokens.agent("a"):
        call(t, Usage(input_tokens=600))
        call(t, Usage(input_tokens=600))  # 1200 > 1000: crossing
        call(t, Usage(input_tokens=10))  # still over: no second event
    assert anomaly_events(t) == [("budget_exceeded", 1200.0, 1000.0)]
    assert anomaly_counts(t) == {"budget_exceeded": 1}


def test_usd_budget_and_window_expiry(monkeypatch):
    import otel_tokens.account.anomalies as anomalies

    now = [1000.0]
    monkeypatch.setattr(anomalies.time, "monotonic", lambda: now[0])
    guard = AnomalyGuard()
    guard.set_budget("a", Budget(usd=1.0, window_seconds=60))
    t = make_telemetry(guard=guard)
    with otel_tokens.agent("a"):
        call(t, Usage(input_tokens=1, cost_usd=0.6))
        now[0] += 61  # the first spend leaves the window
        call(t, Usage(input_tokens=1, cost_usd=0.6))
        assert anomaly_counts(t) == {}
        call(t, Usage(input_tokens=1, cost_usd=0.6))
    assert anomaly_events(t) == [("budget_exceeded", pytest.approx(1.2), 1.0)]


def test_enforced_budget_raises_before_the_next_call():
    guard = AnomalyGuard()
    t = make_telemetry(guard=guard)
    guard.set_budget("runaway", Budget(tokens=1000, enforce=True))
    with otel_tokens.agent("runaway") as entry:
        call(t, Usage(input_tokens=500))
        with pytest.raises(BudgetExceeded) as info:  # 500 used + 600 estimated > 1000
            t.handler.start(operation="chat", provider="openai", request_model=UNPRICED,
                                  estimate=Estimate(600, "full"))  # fmt: skip
        assert info.value.anomaly.observed == 1100
        assert "runaway" in str(info.value)
        call(t, Usage(input_tokens=400), estimate=Estimate(400, "full"))  # fits: allowed
        call(t, Usage(input_tokens=100))  # 1000 of 1000: spent exactly
        with pytest.raises(BudgetExceeded):
            t.handler.start(operation="chat", provider="openai", request_model=UNPRICED)
    assert entry.state.turn_count == 3
    assert len(t.finished()) == 3  # refused calls never started a span
    assert anomaly_counts(t) == {"budget_exceeded": 2}


def test_unenforced_budget_never_raises():
    guard = AnomalyGuard(default_budget=Budget(tokens=10))
    t = make_telemetry(guard=guard)
    with otel_tokens.agent("a"):
        for _ in range(3):
            call(t, Usage(input_tokens=100), estimate=Estimate(100, "full"))
    assert len(t.finished()) == 3


def test_public_helpers_use_the_process_guard(monkeypatch):
    from otel_tokens import handler as pipeline_module

    monkeypatch.setattr(pipeline_module, "_guard", AnomalyGuard())
    seen = []
    otel_tokens.on_anomaly(seen.append)
    otel_tokens.set_budget("x", tokens=5, enforce=True)
    t = make_telemetry(guard=pipeline_module.get_guard())
    with otel_tokens.agent("x"):
        call(t, Usage(input_tokens=6))
        with pytest.raises(BudgetExceeded):
            t.handler.start(operation="chat", provider="openai", request_model="m")
    assert [a.kind for a in seen] == ["budget_exceeded", "budget_exceeded"]
    otel_tokens.set_budget("x")  # removed
    assert pipeline_module.get_guard().budget_of("x") is None


def test_environment_configuration():
    guard = AnomalyGuard.from_settings(read({
        "OTEL_TOKENS_BUDGET_TOKENS": "5000", "OTEL_TOKENS_BUDGET_WINDOW": "600",
        "OTEL_TOKENS_BUDGET_ENFORCE": "TRUE",
        "OTEL_TOKENS_AGENT_BUDGETS": "planner:usd=2.5,tokens=100; coder:usd=1",
        "OTEL_TOKENS_SPIKE_FACTOR": "4", "OTEL_TOKENS_SPIKE_WARMUP": "10",
    }))  # fmt: skip
    assert guard.budget_of("anyone") == Budget(tokens=5000, window_seconds=600, enforce=True)
    assert guard.budget_of("planner") == Budget(tokens=100, usd=2.5, window_seconds=600, enforce=True)
    assert guard.budget_of("coder") == Budget(usd=1.0, window_seconds=600, enforce=True)
    assert guard.spike == SpikeRule(factor=4.0, warmup=10, window=200)


@pytest.mark.parametrize("name, value, accepted", [
    ("OTEL_TOKENS_BUDGET_TOKENS", "lots", "a positive integer"),
    ("OTEL_TOKENS_BUDGET_ENFORCE", "maybe", "true/false"),
    ("OTEL_TOKENS_AGENT_BUDGETS", "planner", "agent:usd="),
    ("OTEL_TOKENS_AGENT_BUDGETS", "planner:dollars=3", "unknown item"),
    ("OTEL_TOKENS_SPIKE_FACTOR", "0.5", "above 1"),
    ("OTEL_TOKENS_BUDGET_USD", "-1", "above 0"),
])  # fmt: skip
def test_bad_environment_is_one_problem_and_the_default(name, value, accepted):
    found = read({name: value})
    (problem,) = found.problems
    assert (problem.name, problem.value) == (name, value) and accepted in problem.accepted
    default = read({})
    guard = AnomalyGuard.from_settings(found)
    assert guard.budget_of("planner") == default.default_budget
    assert guard.spike == default.spike


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(st.one_of(st.integers(0, 10**7), st.floats(0, 1e3)), min_size=1, max_size=80),
    factor=st.floats(1.01, 5), warmup=st.integers(1, 10), extra=st.integers(0, 20),
)
def test_spike_rule_matches_its_definition(values, factor, warmup, extra):
    """Every value is flagged exactly when it exceeds factor x the interpolated p95 of the
    previous ``window`` values (after ``warmup`` of them): the guard's cheap pre-check never
    hides a spike nor invents one."""
    import statistics

    window = warmup + extra
    guard = AnomalyGuard(spike=SpikeRule(factor=factor, warmup=warmup, window=window))
    history: list[float] = []
    for value in values:
        found = [a for a in guard.check_after("a", None, value) if a.kind == "cost_spike"]
        recent = history[-window:]
        expected = False
        if len(recent) >= warmup:
            p95 = statistics.quantiles(recent, n=100, method="inclusive")[94] if len(recent) > 1 else recent[0]
            expected = p95 > 0 and value > factor * p95
        assert bool(found) == expected, (value, recent)
        history.append(value)
