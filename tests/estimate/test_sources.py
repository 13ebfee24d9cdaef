"""Estimate sources (exact, delta, full), calibration, output estimates, handler wiring."""

from __future__ import annotations

import pytest

import otel_tokens
from otel_tokens import Usage
from otel_tokens.account.estimate import Estimator, Request

from ..telemetry.conftest import make_telemetry
from .corpus import PROSE

CLAUDE = "claude-sonnet-4-5"


def convo(n_turns: int) -> list[dict]:
    messages = []
    for i in range(n_turns):
        messages.append({"role": "user", "content": f"Question {i}: {PROSE[: 200 + 10 * i]}"})
        messages.append({"role": "assistant", "content": f"Answer {i}: " + "ok. " * (20 + i)})
    return messages


def test_exact_for_openai_models_with_a_loaded_encoding(encoding):
    req = Request("openai_chat", "gpt-4o-2024-08-06", [{"role": "user", "content": PROSE}])
    est = Estimator().estimate(req, provider="openai").estimate
    assert est.source == "exact"
    assert est.input_tokens == 3 + 1 + len(encoding.encode(PROSE)) + 3  # framing + role + text
    assert Estimator().estimate(Request("openai_chat", "meta-llama/Llama-3", [
        {"role": "user", "content": PROSE}]), provider="openai").estimate.source == "full"  # fmt: skip


def test_delta_from_the_last_reported_input():
    estimator = Estimator()
    first = Request("anthropic_messages", CLAUDE, convo(2)[:-1], system="Be brief.")
    e1 = estimator.estimate(first, provider="anthropic", agent="a")
    assert e1.estimate.source == "full"
    reported = e1.estimate.input_tokens + 30
    estimator.observe(e1, reported)  # what the API said (this also trains the calibration)
    ratio = estimator.calibration(CLAUDE)
    assert ratio == pytest.approx((reported - e1.fixed) / e1.heuristic_raw)
    grown = Request("anthropic_messages", CLAUDE, convo(3)[:-1], system="Be brief.")
    e2 = estimator.estimate(grown, provider="anthropic", agent="a")
    assert e2.estimate.source == "delta"
    # only the two appended messages are estimated, on top of the reported number
    appended = Estimator(use_tokenizer=False).estimate(
        Request("anthropic_messages", CLAUDE, convo(3)[3:-1]), provider="anthropic")
    expected = reported + round(appended.heuristic_raw * ratio) + appended.fixed - 4
    assert e2.estimate.input_tokens == pytest.approx(expected, abs=2)
    # another agent, another system prompt or an edited history: no delta
    assert estimator.estimate(grown, provider="anthropic", agent="b").estimate.source == "full"
    changed = Request("anthropic_messages", CLAUDE, convo(3)[:-1], system="Be verbose.")
    assert estimator.estimate(changed, provider="anthropic", agent="a").estimate.source == "full"
    edited = convo(3)[:-1]
    edited[2] = {"role": "user", "content": "something else entirely"}
    assert estimator.estimate(Request("anthropic_messages", CLAUDE, edited, system="Be brief."),
                              provider="anthropic", agent="a").estimate.source == "full"  # fmt: skip


def test_delta_wins_over_exact_and_counts_the_appended_part_exactly(encoding):
    estimator = Estimator()
    history = [{"role": "user", "content": PROSE}]
    first = estimator.estimate(Request("openai_chat", "gpt-4o", history), provider="openai")
    assert first.estimate.source == "exact"
    estimator.observe(first, first.estimate.input_tokens + 7)
    reply = {"role": "assistant", "content": "Here is the plan."}
    follow = {"role": "user", "content": "Go on."}
    second = estimator.estimate(Request("openai_chat", "gpt-4o", history + [reply, follow]),
                                provider="openai")  # fmt: skip
    assert second.estimate.source == "delta" and second.calibration is None
    appended = (3 + 1 + len(encoding.encode("Here is the plan."))) + (3 + 1 + len(encoding.encode("Go on.")))
    # texts are tokenized joined, so a boundary can merge: within two tokens
    assert second.estimate.input_tokens == pytest.approx(first.estimate.input_tokens + 7 + appended, abs=2)


def test_calibration_learns_a_bounded_ratio():
    estimator = Estimator(window=5)
    assert estimator.calibration(CLAUDE) is None
    for n in range(8):
        req = Request("anthropic_messages", CLAUDE, [{"role": "user", "content": PROSE * (n + 1)}])
        est = estimator.estimate(req, provider="anthropic", agent=f"a{n}")
        estimator.observe(est, round((est.heuristic_raw * 1.3) + est.fixed))
    assert estimator.calibration(CLAUDE) == pytest.approx(1.3, rel=0.02)
    req = Request("anthropic_messages", CLAUDE, [{"role": "user", "content": PROSE * 3}])
    raw = Estimator().estimate(req, provider="anthropic")
    calibrated = estimator.estimate(req, provider="anthropic", agent="new")
    assert calibrated.calibration == pytest.approx(1.3, rel=0.02)
    assert calibrated.estimate.input_tokens == pytest.approx(
        raw.heuristic_raw * 1.3 + raw.fixed, abs=2)  # fmt: skip
    for _ in range(10):  # absurd actuals are clamped, and the window forgets old ratios
        est = estimator.estimate(req, provider="anthropic", agent="x")
        estimator.observe(est, est.estimate.input_tokens * 100)
    assert estimator.calibration(CLAUDE) == 2.0


def test_state_per_model_and_agent_stays_bounded_newest_kept():
    from otel_tokens.account.estimate import _MAX_KEYS

    estimator = Estimator(window=3)
    names = [f"gateway-model-{i}" for i in range(_MAX_KEYS + 300)]
    req = None
    for name in names:
        req = Request("anthropic_messages", name, [{"role": "user", "content": PROSE}])
        est = estimator.estimate(req, provider="anthropic", agent="a")
        estimator.observe(est, round(est.heuristic_raw * 1.2 + est.fixed))
    assert len(estimator._ratios) == _MAX_KEYS and len(estimator._cursors) == _MAX_KEYS
    assert estimator.calibration(names[0]) is None  # the oldest names were dropped
    assert estimator.calibration(names[-1]) == pytest.approx(1.2, rel=0.02)
    grown = Request("anthropic_messages", names[-1], [
        {"role": "user", "content": PROSE}, {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "more"}])  # fmt: skip
    assert estimator.estimate(grown, provider="anthropic", agent="a").estimate.source == "delta"


def test_output_estimates(encoding):
    text = "The migration is safe to re-run once the guard is in place. " * 20
    assert Estimator().output_tokens(text, "gpt-4o") == len(encoding.encode(text))
    h = Estimator().output_tokens(text, CLAUDE)
    assert abs(h - len(encoding.encode(text))) / len(encoding.encode(text)) < 0.15


def test_pipeline_estimates_at_start_and_measures_at_completion():
    t = make_telemetry()
    messages = convo(2)[:-1]
    with otel_tokens.agent("coder", max_input_tokens=200_000) as entry:
        call = t.handler.start(operation="chat", provider="anthropic", request_model=CLAUDE,
                                     stream=True, request=Request("anthropic_messages", CLAUDE, messages))  # fmt: skip
        estimate = entry.state.current_estimate
        assert estimate is not None and estimate.source == "full"
        assert entry.state.display().is_estimate
        call.stop(Usage(input_tokens=estimate.input_tokens + 40, output_tokens=30))
        assert entry.state.current_estimate is None
        second = t.handler.start(operation="chat", provider="anthropic", request_model=CLAUDE,
                                       request=Request("anthropic_messages", CLAUDE, convo(3)[:-1]))  # fmt: skip
        second.stop(Usage(input_tokens=estimate.input_tokens + 400, output_tokens=30))
    first_span, second_span = t.finished()
    assert first_span.attributes["otel_tokens.estimate.source"] == "full"
    assert first_span.attributes["otel_tokens.estimate.error"] == pytest.approx(
        -40 / (estimate.input_tokens + 40))  # fmt: skip
    assert second_span.attributes["otel_tokens.estimate.source"] == "delta"
    assert second_span.attributes["otel_tokens.estimate.calibration"] > 1.0
    points = t.points("otel_tokens.estimate.error")
    assert {p.attributes["otel_tokens.estimate.source"] for p in points} == {"full", "delta"}
    assert t.errors() == {}


def test_an_estimator_fault_is_counted_and_the_call_goes_on():
    class Exploding(list):
        def __iter__(self):
            raise RuntimeError("bad messages object")

        def __len__(self):
            raise RuntimeError("bad messages object")

    t = make_telemetry()
    call = t.handler.start(operation="chat", provider="openai", request_model="gpt-4o",
                                 request=Request("openai_chat", "gpt-4o", Exploding()))  # fmt: skip
    call.stop(Usage(input_tokens=5, output_tokens=1))
    assert t.errors() == {"estimate": 1}
    assert "otel_tokens.estimate.source" not in t.span().attributes
