"""UsageLedger: totals, streaming, rollback, checkpoints, eviction, statistics."""

from __future__ import annotations

import statistics as pystats

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_tokens import HistoryEvictedError, LedgerError, Usage, UsageLedger


def u(inp=None, out=None, **kw):
    return Usage(input_tokens=inp, output_tokens=out, **kw)


def test_one_record_per_request_with_every_field():
    led = UsageLedger()
    trace = "0af7651916cd43dd8448eb211c80319c"
    index = led.append(
        u(1000, 50, cache_read_tokens=400, cache_write_tokens=100, reasoning_tokens=20,
          premium_requests=0.33, model="gpt-4o", provider="openai", source="reported"),
        cost_usd=0.0042, request_id="req-1", timestamp=1700000000.5,
        trace_id=trace, span_id="b7ad6b7169203331",
    )  # fmt: skip
    assert index == 0
    (rec,) = led.history()
    assert rec.to_dict() == {
        "index": 0, "request_id": "req-1", "timestamp": 1700000000.5, "model": "gpt-4o",
        "provider": "openai", "source": "reported", "input_tokens": 1000, "output_tokens": 50,
        "cache_read_tokens": 400, "cache_write_tokens": 100, "reasoning_tokens": 20,
        "cost_usd": 0.0042, "premium_requests": 0.33, "trace_id": trace,
        "span_id": "b7ad6b7169203331",
    }  # fmt: skip
    assert rec.total_tokens == 1050


def test_generated_request_ids_are_unique_and_cost_defaults_to_reported():
    led = UsageLedger()
    led.append(u(1, 1, cost_usd=0.5))
    led.append(u(1, 1))
    a, b = led.history()
    assert a.request_id != b.request_id
    assert (a.cost_usd, b.cost_usd) == (0.5, None)
    assert a.trace_id is None and a.span_id is None


def test_bad_arguments_are_clear_errors():
    led = UsageLedger()
    with pytest.raises(TypeError, match="Usage"):
        led.append({"input_tokens": 1})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cost_usd"):
        led.append(u(1), cost_usd=-1.0)
    with pytest.raises(ValueError, match="trace_id"):
        led.append(u(1), trace_id="not-hex")
    with pytest.raises(ValueError, match="timestamp"):
        led.append(u(1), timestamp=float("nan"))
    with pytest.raises(ValueError, match="max_history"):
        UsageLedger(max_history=0)
    assert len(led) == 0


def test_totals_keep_unknown_as_none():
    led = UsageLedger()
    led.append(u(10, None))
    led.append(u(None, None, reasoning_tokens=None))
    t = led.cumulative
    assert (t.requests, t.input_tokens, t.output_tokens, t.cost_usd) == (2, 10, None, None)
    assert t.total_tokens == 10


def test_streaming_replaces_within_a_request_and_finalizes_once():
    """The seed's accumulateStreamUsage overwrote the cumulative total; ours adds."""
    led = UsageLedger()
    led.append(u(1000, 100))
    led.stream_update("r2", u(500, 1))
    led.stream_update("r2", u(500, 40))  # running totals: replaces, never adds
    assert led.cumulative.input_tokens == 1500
    assert led.cumulative.output_tokens == 140
    assert led.lifetime.output_tokens == 140
    led.stream_update("r3", u(200, 5))  # a second request in flight at the same time
    assert led.cumulative.input_tokens == 1700
    led.stream_finalize("r2")
    assert led.in_flight == {"r3": u(200, 5)}
    assert led.cumulative.input_tokens == 1700 and led.cumulative.requests == 3
    led.stream_finalize("r3", u(200, 9), cost_usd=0.01)
    assert led.cumulative.output_tokens == 149 and len(led) == 3
    with pytest.raises(LedgerError, match="r3"):
        led.stream_finalize("r3")
    led.stream_update("r4", u(7, 7))
    assert led.stream_discard("r4") == u(7, 7)
    assert led.cumulative.input_tokens == 1700


def test_rollback_to_index_moves_cumulative_not_lifetime():
    led = UsageLedger()
    for n in range(5):
        led.append(u(100 * (n + 1), 1), cost_usd=0.1)
    removed = led.rollback_to_index(2)
    assert [r.index for r in removed] == [2, 3, 4]
    assert led.cumulative.input_tokens == 300
    assert led.cumulative.cost_usd == pytest.approx(0.2)
    assert led.lifetime.input_tokens == 1500
    assert led.lifetime.cost_usd == pytest.approx(0.5)
    assert led.append(u(1, 1)) == 2
    with pytest.raises(LedgerError, match="outside"):
        led.rollback_to_index(9)


def test_cost_stays_exact_through_rollback():
    led = UsageLedger()
    costs = [0.1, 0.2, 0.3, 1e-9, 123.456]
    for c in costs:
        led.append(u(1), cost_usd=c)
    before = led.cumulative.cost_usd
    cp = led.checkpoint()
    for _ in range(100):
        led.append(u(1), cost_usd=0.07)
    led.restore(cp)
    assert led.cumulative.cost_usd == before


def test_rollback_to_request_id():
    led = UsageLedger()
    led.append(u(1), request_id="a")
    led.append(u(2), request_id="b")
    generated = led.history()[-1].request_id
    led.append(u(3))
    third = led.history()[-1].request_id
    led.append(u(4), request_id="c")
    removed = led.rollback_to_request_id(third)
    assert [r.input_tokens for r in removed] == [3, 4]
    assert generated == "b"
    led.rollback_to_request_id("b")
    assert [r.input_tokens for r in led.history()] == [1]
    with pytest.raises(LedgerError, match="nope"):
        led.rollback_to_request_id("nope")


def test_rollback_to_timestamp():
    led = UsageLedger()
    for n, ts in enumerate([10.0, 20.0, 30.0, 40.0]):
        led.append(u(n + 1), timestamp=ts)
    assert led.rollback_to_timestamp(45.0) == []
    removed = led.rollback_to_timestamp(25.0)
    assert [r.timestamp for r in removed] == [30.0, 40.0]
    assert led.cumulative.input_tokens == 3


def test_checkpoint_restore_and_stale_checkpoints():
    led = UsageLedger()
    empty = led.checkpoint()
    led.append(u(1))
    cp1 = led.checkpoint()
    led.append(u(2))
    led.append(u(3))
    led.restore(cp1)
    assert [r.input_tokens for r in led.history()] == [1]
    assert led.lifetime.input_tokens == 6
    led.restore(empty)
    assert len(led) == 0 and led.cumulative.requests == 0
    with pytest.raises(LedgerError, match="rollback already removed"):
        led.restore(cp1)
    with pytest.raises(LedgerError, match="same ledger"):
        led.restore(UsageLedger().checkpoint())


def test_bounded_history_keeps_totals_exact():
    led = UsageLedger(max_history=3)
    for n in range(10):
        led.append(u(n, 1, model="m"), cost_usd=0.25)
    assert len(led) == 3 and led.evicted == 7
    assert [r.index for r in led.history()] == [7, 8, 9]
    t = led.cumulative
    assert (t.requests, t.input_tokens, t.output_tokens, t.cost_usd) == (10, 45, 10, 2.5)
    assert led.cost_by_model() == {"m": 2.5}


def test_reaching_past_evicted_history_raises_never_a_wrong_total():
    led = UsageLedger(max_history=3)
    early = led.checkpoint()
    for n in range(5):
        led.append(u(n), timestamp=float(n))
    mid = led.checkpoint()
    with pytest.raises(HistoryEvictedError):
        led.rollback_to_index(1)
    with pytest.raises(HistoryEvictedError):
        led.restore(early)
    with pytest.raises(HistoryEvictedError):
        led.rollback_to_timestamp(0.5)
    with pytest.raises(HistoryEvictedError):
        led.totals_between(0.0, 10.0)
    assert led.cumulative.input_tokens == 10  # untouched by the refused operations
    for n in range(5, 9):
        led.append(u(n), timestamp=float(n))
    with pytest.raises(HistoryEvictedError):
        led.restore(mid)
    led.rollback_to_index(6)
    assert led.cumulative.input_tokens == sum(range(6))
    assert led.totals_between(1000.0).requests == 0


def test_statistics_match_the_standard_library():
    led = UsageLedger()
    values = [5, 1, 9, 3, 7, 100, 42, 8, 8, 13]
    for v in values:
        led.append(u(v, v * 2), cost_usd=v / 100)
    led.append(u(None, 1))  # unknown input: not counted in input statistics
    stats = led.statistics()
    s = stats["input_tokens"]
    assert (s.count, s.sum, s.min, s.max) == (10, sum(values), 1, 100)
    assert s.mean == pytest.approx(pystats.mean(values))
    qs = pystats.quantiles(values, n=100, method="inclusive")
    assert s.p50 == pytest.approx(pystats.median(values))
    assert (s.p90, s.p95, s.p99) == pytest.approx((qs[89], qs[94], qs[98]))
    assert stats["output_tokens"].count == 11
    assert stats["total_tokens"].max == 300
    assert stats["cost_usd"].sum == pytest.approx(sum(values) / 100)
    assert stats["reasoning_tokens"].count == 0 and stats["reasoning_tokens"].p95 is None
    with pytest.raises(ValueError, match="figure"):
        led.percentile("bogus", 50)
    with pytest.raises(ValueError, match="between 0 and 100"):
        led.percentile("input_tokens", 101)


def test_percentile_cache_follows_appends_and_removals():
    led = UsageLedger(max_history=50)
    seen = []
    for n in range(120):
        v = (n * 37) % 101
        led.append(u(v))
        seen.append(v)
        if n % 7 == 1:
            window = sorted(seen[-50:])
            expected = pystats.quantiles(window, n=100, method="inclusive")[94]
            assert led.percentile("input_tokens", 95) == pytest.approx(expected)
    led.rollback_to_index(100)
    window = sorted(seen[70:100])
    assert led.percentile("input_tokens", 50) == pytest.approx(pystats.median(window))


def test_cost_by_model_range_and_top():
    led = UsageLedger()
    led.append(u(10, model="a"), cost_usd=1.0, timestamp=100.0, request_id="x")
    led.append(u(20, model="b"), cost_usd=3.0, timestamp=200.0, request_id="y")
    led.append(u(30, model="a"), cost_usd=0.5, timestamp=300.0, request_id="z")
    led.append(u(40, model="c"), timestamp=400.0, request_id="w")  # unpriced
    assert led.cost_by_model() == {"a": 1.5, "b": 3.0}
    mid = led.totals_between(150.0, 350.0)
    assert (mid.requests, mid.input_tokens, mid.cost_usd) == (2, 50, 3.5)
    assert [r.request_id for r in led.top(2)] == ["y", "x"]
    assert [r.request_id for r in led.top(1, by="input_tokens")] == ["w"]
    led.rollback_to_request_id("y")
    assert led.cost_by_model() == {"a": 1.0}
    with pytest.raises(ValueError, match="figure"):
        led.top(by="price")


def test_recent():
    led = UsageLedger()
    for n in range(5):
        led.append(u(n))
    assert [r.input_tokens for r in led.recent(2)] == [3, 4]
    assert led.recent(0) == []


def test_percentile_cache_survives_compaction_and_many_evictions():
    led = UsageLedger(max_history=100)
    seen = []
    for n in range(9000):  # several compactions of the physical arrays
        v = (n * 7919) % 1009
        led.append(u(v, n % 13))
        seen.append(v)
        if n % 37 == 0 or 4090 <= n <= 4100:
            window = seen[-100:]
            if len(window) >= 2:
                expected = pystats.quantiles(window, n=100, method="inclusive")
                assert led.percentile("input_tokens", 95) == pytest.approx(expected[94])
                assert led.percentile("input_tokens", 50) == pytest.approx(expected[49])
        if n == 5000:  # a burst of evictions larger than the incremental path takes
            for m in range(300):
                led.append(u(m))
                seen.append(m)
    assert led.statistics()["input_tokens"].count == 100


def test_restore_to_a_checkpoint_whose_last_record_was_just_evicted():
    """Found by the state machine: the timeline then ended exactly at the eviction line."""
    led = UsageLedger(max_history=4)
    led.append(u(1))
    cp = led.checkpoint()
    for n in range(4):
        led.append(u(10))
    assert led.evicted == 1
    led.restore(cp)
    assert len(led) == 0 and led.cumulative.input_tokens == 1
    led.append(u(5))
    assert led.cumulative.input_tokens == 6
    led.append(u(1))
    led.rollback_to_index(1)  # down to the eviction line, and a checkpoint there
    cp2 = led.checkpoint()
    led.append(u(7))
    led.restore(cp2)
    assert led.cumulative.input_tokens == 1


# -- rows kept as tuples and folded in bulk (issue 35): every reader sees every row ----------

_ROW = st.tuples(
    st.one_of(st.none(), st.integers(0, 10**6)), st.one_of(st.none(), st.integers(0, 10**6)),
    st.one_of(st.none(), st.integers(0, 10**4)), st.one_of(st.none(), st.sampled_from([0.0, 0.25, 1e-9, 3.5])),
    st.one_of(st.none(), st.sampled_from([0.0, 0.33, 1.0])), st.sampled_from([None, "m1", "m2"]),
)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(_ROW, max_size=300), bound=st.one_of(st.none(), st.integers(1, 130)),
       reads=st.sets(st.integers(0, 300), max_size=8))  # fmt: skip
def test_rows_folded_in_bulk_read_as_appended_one_by_one(rows, bound, reads):
    """Appends across fold boundaries (64 rows), with reads at random points and a bounded
    history: indexes, history, totals, cost by model and evictions as a row-by-row model says."""
    # cached input is part of the input (a Usage rule)
    rows = [(i, o, None if i is None or cr is None else min(cr, i), *rest)
            for i, o, cr, *rest in rows]  # fmt: skip
    led = UsageLedger(max_history=bound)
    for n, (i, o, cr, cost, premium, model) in enumerate(rows):
        usage = Usage(input_tokens=i, output_tokens=o, cache_read_tokens=cr,
                      premium_requests=premium, model=model)  # fmt: skip
        assert led.append(usage, cost_usd=cost, timestamp=float(n)) == n
        if n in reads:
            kept = rows[: n + 1] if bound is None else rows[max(0, n + 1 - bound): n + 1]
            assert len(led) == len(kept) and led.evicted == n + 1 - len(kept)
            assert [r.input_tokens for r in led.history()] == [r[0] for r in kept]
    kept_from = 0 if bound is None else max(0, len(rows) - bound)
    assert [r.index for r in led.history()] == list(range(kept_from, len(rows)))
    assert [(r.input_tokens, r.output_tokens, r.cache_read_tokens, r.cost_usd, r.premium_requests,
             r.model, r.timestamp) for r in led.history()] == [
        (*row, float(n)) for n, row in enumerate(rows)][kept_from:]  # fmt: skip
    totals = led.cumulative

    def total(k):
        known = [row[k] for row in rows if row[k] is not None]
        return sum(known) if known else None

    assert totals.requests == len(rows)
    assert (totals.input_tokens, totals.output_tokens, totals.cache_read_tokens) == (
        total(0), total(1), total(2))
    assert totals.cost_usd == pytest.approx(total(3)) if total(3) is not None else totals.cost_usd is None
    by_model: dict = {}
    for row in rows:
        if row[3] is not None:
            by_model[row[5]] = by_model.get(row[5], 0.0) + row[3]
    assert led.cost_by_model() == pytest.approx(by_model)
    if kept_from:  # the newest evicted row's time bounds what can be asked of the history
        with pytest.raises(HistoryEvictedError):
            led.totals_between(float(kept_from - 1))
        assert led.totals_between(float(kept_from)).requests == len(rows) - kept_from


def test_a_checkpoint_and_rollback_between_folds():
    led = UsageLedger()
    for n in range(100):
        led.append(u(n, 1), timestamp=float(n))
    mark = led.checkpoint()  # 36 rows past the first fold, not folded yet
    for n in range(100, 170):
        led.append(u(n, 1), timestamp=float(n))
    assert led.restore(mark)[0].index == 100 and len(led) == 100
    assert led.cumulative.input_tokens == sum(range(100))
    assert led.append(u(5)) == 100  # the timeline goes on from the checkpoint
    assert [r.index for r in led.rollback_to_index(99)] == [99, 100]
    assert led.lifetime.requests == 171 and led.cumulative.requests == 99


def test_an_amount_that_cannot_be_scaled_changes_nothing():
    led = UsageLedger()
    led.append(u(1), cost_usd=1.0)
    with pytest.raises(OverflowError):
        led.append(u(2), cost_usd=1e300)  # finite, but not as an integer of picodollars
    assert led.append(u(3)) == 1
    assert [r.input_tokens for r in led.history()] == [1, 3]
    assert led.cumulative.cost_usd == 1.0


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(st.tuples(
    st.sampled_from([0, 1, (1 << 64) - 1, 1 << 64, (1 << 128) - 1, 0x0AF7651916CD43DD8448EB211C80319C]),
    st.sampled_from([0, 1, (1 << 63) + 5, (1 << 64) - 1]),
    st.sampled_from([None, "openai", "anthropic"]), st.sampled_from(["reported", "estimated"]),
    st.sampled_from([None, "m1", "m2"]),
), min_size=1, max_size=200))  # fmt: skip
def test_folded_rows_keep_ids_labels_and_sources(rows):
    """A fold's columns taken at C speed (trace ids split by their bytes, one repeated label
    or source for the whole fold, mixed ones coded one by one) read back as appended."""
    led = UsageLedger()
    for trace, span, provider, source, model in rows:
        led.append(Usage(input_tokens=3, model=model, source=source), trace_id=trace,
                   span_id=span, provider=provider)  # fmt: skip
    assert [(r.trace_id, r.span_id, r.provider, r.source, r.model) for r in led.history()] == [
        (f"{t:032x}" if t else None, f"{s:016x}" if s else None, p, src, m)
        for t, s, p, src, m in rows]  # fmt: skip
