"""The account step alone: a finished call record in, an outcome out; no provider, no
OpenTelemetry (the records are built by hand, the way an instrumentor fills them)."""

from __future__ import annotations

import pytest

import otel_tokens
from otel_tokens import AnomalyGuard, Budget, BudgetExceeded, Estimate, Pricer, Request, Usage
from otel_tokens.account.estimate import Estimator
from otel_tokens.usage import Billing
from otel_tokens.account.agents import current_attribution
from otel_tokens.account.settle import Accountant
from otel_tokens.call import Call
from otel_tokens.faults import sink
from otel_tokens.tracking import Tracking


def accountant(guard: AnomalyGuard | None = None) -> Accountant:
    return Accountant(Pricer(), guard or AnomalyGuard(), Estimator())


def record(model: str | None = "gpt-4o", *, stream: bool = False, provider: str = "openai",
           **facts) -> Call:  # fmt: skip
    """A call record as capture leaves it, with its tracking (no handler: the test plays the
    handler; a fact of the tracking, such as ``estimate`` or ``trace_id``, goes there)."""
    tracking = Tracking()
    call = Call(tracking, "chat", provider, model, stream, started=10.0)  # type: ignore[arg-type]
    for key, value in facts.items():
        setattr(tracking if key in Tracking.__slots__ else call, key, value)
    return call


def tracked(call: Call) -> Tracking:
    """The tracking :func:`record` gave ``call``."""
    return call._owner  # type: ignore[return-value]


def opened(acc: Accountant, call: Call) -> Call:
    """``acc.open(call)`` after the handler's part: who the call is for (the binding's agent)."""
    if tracked(call).agent is None:
        tracked(call).agent = current_attribution()[0]
    acc.open(call, tracked(call))
    return call


def settled(acc: Accountant, call: Call, ended: float = 10.5):
    opened(acc, call)
    call.ended_at = ended
    return acc.settle(call, tracked(call))


def test_a_reported_call_becomes_tokens_cost_state_and_one_ledger_row():
    acc = accountant()
    usage = Usage(input_tokens=1000, output_tokens=200, cache_read_tokens=400, reasoning_tokens=50)
    with otel_tokens.agent("planner", max_input_tokens=10_000) as entry:
        call = record(estimate=Estimate(1100, "full"), usage=usage, response_model="gpt-4o-2024-08-06",
                      response_id="chatcmpl-1", finish_reasons=["stop"], trace_id=7, span_id=9)
        outcome = settled(acc, call)
    expected_cost = Pricer().price(usage, "openai", "gpt-4o-2024-08-06").cost_usd
    assert outcome.failed is False and outcome.error_type is None
    assert outcome.usage is usage
    assert outcome.price.cost_usd == pytest.approx(expected_cost) and outcome.price.source == "computed"
    (line,) = outcome.lines
    assert (line.model, line.usage, line.cost_usd, line.unpriced) == ("gpt-4o-2024-08-06", usage,
                                                                       outcome.price.cost_usd, False)
    assert outcome.response_model == "gpt-4o-2024-08-06" and outcome.response_id == "chatcmpl-1"
    assert outcome.finish_reasons == ("stop",)
    assert outcome.estimate_error == pytest.approx(0.1)
    assert outcome.duration == pytest.approx(0.5) and outcome.time_to_first_chunk is None
    assert outcome.state.turn_count == 1 and outcome.state.context_utilization == pytest.approx(0.1)
    (row,) = entry.ledger.history()
    assert (row.input_tokens, row.output_tokens, row.request_id) == (1000, 200, "chatcmpl-1")
    assert row.cost_usd == pytest.approx(expected_cost)
    assert (row.trace_id, row.span_id) == (f"{7:032x}", f"{9:016x}")


def test_a_failed_call_counts_no_turn_and_writes_a_row_its_tokens_unknown():
    acc = accountant()
    with otel_tokens.agent("a") as entry:
        outcome = settled(acc, record(error=TimeoutError("slow")))
    assert outcome.failed and outcome.error_type == "TimeoutError"
    assert outcome.error_message == "slow"
    assert outcome.usage.is_empty and outcome.lines[0].cost_usd is None
    assert entry.state.turn_count == 0
    (row,) = entry.ledger.history()  # the request was made: a row, never 0 tokens
    assert (row.input_tokens, row.output_tokens, row.cost_usd) == (None, None, None)


def test_no_usage_is_unknown_and_counted_never_zero():
    acc = accountant()
    before = sink().counts.get("usage_missing", 0)
    with otel_tokens.agent("a"):
        outcome = settled(acc, record())
    assert outcome.usage.input_tokens is None and outcome.usage.output_tokens is None
    assert outcome.price.cost_usd is None and not outcome.lines[0].unpriced
    assert sink().counts["usage_missing"] == before + 1


def test_units_counted_from_the_request_are_billed_where_the_model_is_priced_by_them_alone():
    """A speech request's characters (Billing's ``counted``) are tts-1's whole bill, at
    genai-prices' rate (its tokens unknown, never 0); gpt-4o-mini-tts is priced per token:
    dropped, its usage missing and cost unknown; a failed call is billed nothing."""
    import genai_prices

    acc, counted = accountant(), Billing.of(counted={"input_characters": 1200})
    before = sink().counts.get("usage_missing", 0)
    with otel_tokens.agent("voice") as entry:
        tts = settled(acc, record("tts-1", billing=counted))
        tokens = settled(acc, record("gpt-4o-mini-tts", billing=counted))
        failed = settled(acc, record("tts-1", billing=counted, error="500"))
    try:
        expected = float(genai_prices.calc_price(genai_prices.Usage(input_characters=1200),
                                                 "tts-1", provider_id="openai").total_price)  # fmt: skip
    except LookupError:  # a genai-prices release without tts-1 (the minimum versions' 0.1.11)
        expected = None
    assert (tts.usage.input_tokens, tts.usage.output_tokens) == (None, None)
    assert tokens.price.cost_usd is None and tokens.usage_missing
    assert failed.price.cost_usd is None
    if expected is None:  # tts-1 unpriced there: unknown like any unpriced call, never 0
        assert tts.price.cost_usd is None and tts.usage_missing
        assert sink().counts["usage_missing"] == before + 2
        return
    assert expected > 0 and tts.price.cost_usd == pytest.approx(expected)
    assert tts.price.components == ("input_characters",) and not tts.usage_missing
    assert sink().counts["usage_missing"] == before + 1  # gpt-4o-mini-tts's alone
    assert [row.cost_usd for row in entry.ledger.history()] == [pytest.approx(expected), None, None]


def test_a_stream_without_reported_output_is_estimated_from_its_text_and_marked():
    acc = accountant()
    with otel_tokens.agent("a") as entry:
        call = record(stream=True, usage=Usage(input_tokens=12), output_text="one two three four",
                      first_chunk_at=10.2)  # fmt: skip
        opened(acc, call)
        assert entry.state.status == "streaming"
        call.ended_at = 11.0
        outcome = acc.settle(call, tracked(call))
    assert outcome.usage.source == "estimated" and outcome.usage.input_tokens == 12
    assert 3 <= outcome.usage.output_tokens <= 6
    assert outcome.time_to_first_chunk == pytest.approx(0.2) and outcome.stream
    assert entry.state.status == "idle"


def test_a_run_on_several_models_prices_each_and_carries_the_backends_total_once():
    acc = accountant()
    opus = Usage(input_tokens=1000, output_tokens=100, model="claude-opus-4-1")
    haiku = Usage(input_tokens=500, output_tokens=50, model="claude-3-5-haiku-latest")
    with otel_tokens.agent("cli") as entry:
        outcome = settled(acc, record(None, provider="anthropic", parts=[opus, haiku],
                                      usage=(opus + haiku).replace(cost_usd=0.25),
                                      response_id="run-1"))  # fmt: skip
    assert outcome.price.cost_usd == 0.25 and outcome.price.source == "provider"
    assert [(line.model, line.usage, line.cost_usd) for line in outcome.lines] == [
        ("claude-opus-4-1", opus, None), ("claude-3-5-haiku-latest", haiku, None), (None, None, 0.25)]
    rows = entry.ledger.history()
    assert [r.model for r in rows] == ["claude-opus-4-1", "claude-3-5-haiku-latest"]
    assert sum(r.cost_usd for r in rows) == pytest.approx(0.25)  # the total, shared out
    assert [r.request_id for r in rows] == ["run-1/claude-opus-4-1", "run-1/claude-3-5-haiku-latest"]
    assert entry.state.turn_count == 1


def test_open_estimates_the_request_and_an_enforced_budget_refuses_the_call():
    guard = AnomalyGuard(budgets={"capped": Budget(tokens=50, enforce=True)})
    acc = accountant(guard)
    request = Request("openai_chat", "gpt-4o", [{"role": "user", "content": "word " * 200}])
    with otel_tokens.agent("capped"):
        with pytest.raises(BudgetExceeded) as info:
            opened(acc, record(request=request))
    assert info.value.anomaly.kind == "budget_exceeded" and info.value.anomaly.observed > 50
    with otel_tokens.agent("free"):
        call = record(request=request)
        opened(acc, call)
    estimate = tracked(call).estimate
    assert estimate is not None and estimate.input_tokens > 150
    assert tracked(call).request_estimate is not None


def test_anomalies_come_out_in_the_outcome():
    guard = AnomalyGuard(budgets={"a": Budget(tokens=100)})
    acc = accountant(guard)
    with otel_tokens.agent("a"):
        first = settled(acc, record(usage=Usage(input_tokens=60, output_tokens=1)))
        second = settled(acc, record(usage=Usage(input_tokens=60, output_tokens=1)))
    assert first.anomalies == ()
    (anomaly,) = second.anomalies
    assert (anomaly.agent, anomaly.kind, anomaly.observed, anomaly.threshold) == ("a", "budget_exceeded",
                                                                                 122.0, 100.0)


def test_running_usage_is_in_flight_until_the_end():
    acc = accountant()
    with otel_tokens.agent("a") as entry:
        call = record(stream=True)
        opened(acc, call)
        acc.in_flight(tracked(call), Usage(input_tokens=40, output_tokens=3))
        assert entry.ledger.cumulative.input_tokens == 40 and len(entry.ledger) == 0
        call.usage, call.ended_at = Usage(input_tokens=40, output_tokens=9), 11.0
        acc.settle(call, tracked(call))
    assert entry.ledger.in_flight == {} and entry.ledger.cumulative.output_tokens == 9
    assert len(entry.ledger) == 1


def test_the_outcome_and_its_line_have_every_field_in_its_own_slot():
    """``settle`` builds the Outcome and its Line from all their fields at once, by position
    (kept: see docs/benchmarks.md): each field, read by name, holds its own value (a field
    reordered in ``outcome.py`` without ``settle.py`` fails here)."""
    from otel_tokens.account.outcome import Line, Outcome

    acc = accountant()
    usage = Usage(input_tokens=1000, output_tokens=200, premium_requests=2.0)
    with otel_tokens.agent("slots", max_input_tokens=10_000):
        call = record(stream=True, estimate=Estimate(1100, "full"), usage=usage,
                      response_model="gpt-4o-2024-08-06", response_id="chatcmpl-slots",
                      finish_reasons=["stop"], first_chunk_at=10.25,
                      end_attributes={"custom": 1})  # fmt: skip
        outcome = settled(acc, call, ended=10.5)
    assert type(outcome) is Outcome and len(outcome) == len(Outcome._fields)
    assert (outcome.failed, outcome.error_type, outcome.error_message) == (False, None, None)
    assert outcome.usage is usage and outcome.price.source == "computed"
    assert outcome.response_model == "gpt-4o-2024-08-06"
    assert outcome.response_id == "chatcmpl-slots" and outcome.finish_reasons == ("stop",)
    assert outcome.estimate == Estimate(1100, "full")
    assert outcome.estimate_error == pytest.approx(0.1)
    assert outcome.duration == pytest.approx(0.5)
    assert outcome.time_to_first_chunk == pytest.approx(0.25)
    assert outcome.stream is True and outcome.state.turn_count == 1
    assert outcome.anomalies == () and outcome.attributes == {"custom": 1}
    assert outcome.usage_missing is False
    (line,) = outcome.lines
    assert line == Line(model="gpt-4o-2024-08-06", usage=usage, cost_usd=outcome.price.cost_usd,
                        cost_source="computed", unpriced=False, premium_requests=2.0,
                        unpriced_components=(), price_match=outcome.price.match)  # fmt: skip
    assert line.price_match is not None

    failed = settled(acc, record(error=ValueError("boom")))
    assert (failed.failed, failed.error_type, failed.error_message) == (True, "ValueError", "boom")
    assert failed.usage_missing is False and failed.stream is False
    assert failed.time_to_first_chunk is None
