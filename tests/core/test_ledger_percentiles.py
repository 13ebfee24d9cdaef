"""Ledger percentiles are exact: every figure against a naive sorted() reference.

The ledger answers a percentile from a :class:`RankWindow` (sorted values around the ranks,
counts of the rest) placed by a strided sample; these tests compare it with sorting all the
values, on random, adversarial and tied data, with unknown values, after appends, eviction,
compaction, rollback, restore and a reload from SQLite. Hypothesis runs with a small sort
threshold and sample stride so that a few dozen values already take the selection path.
"""

from __future__ import annotations

import contextlib
import math
import random
from contextlib import contextmanager
from typing import Iterator
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_tokens import LedgerError, Usage, UsageLedger
from otel_tokens.account.ledger import FIGURES
from otel_tokens.account.ledger import stats as ledger_stats
from otel_tokens.account.ledger.stats import PERCENTILES, RankWindow, percentile

QS = (0, 1, *PERCENTILES, 100, 33.3)
HYPOTHESIS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@contextmanager
def small_selection(stride: int = 3, sort_up_to: int = 8) -> Iterator[None]:
    """Select (rather than sort) from a handful of values, so small examples reach it."""
    with (
        patch.object(ledger_stats, "_SAMPLE_STRIDE", stride),
        patch.object(ledger_stats, "_SORT_UP_TO", sort_up_to),
    ):
        yield


def reference(ledger: UsageLedger, figure: str) -> list:
    """Known values of ``figure``, from the materialized records (an independent path)."""
    values = [getattr(r, figure) for r in ledger.history()]
    return sorted(v for v in values if v is not None)


def check_ledger(ledger: UsageLedger) -> None:
    """Every percentile, min and max of every figure equals the sorted reference's."""
    stats = ledger.statistics()
    for figure in FIGURES:
        ref = reference(ledger, figure)
        for q in QS:
            assert ledger.percentile(figure, q) == percentile(ref, q), (figure, q)
        s = stats[figure]
        assert s.count == len(ref)
        assert (s.min, s.max) == ((ref[0], ref[-1]) if ref else (None, None)), figure
        assert (s.p50, s.p90, s.p95, s.p99) == tuple(percentile(ref, q) for q in PERCENTILES)


# -- RankWindow on its own ---------------------------------------------------------------------


def patterned(kind: str, n: int, rnd: random.Random) -> list:
    """Data shapes a sample can be fooled by, or that stress ties."""
    if kind == "random":
        return [rnd.randint(0, 10**6) for _ in range(n)]
    if kind == "ascending":
        return list(range(n))
    if kind == "descending":
        return list(range(n, 0, -1))
    if kind == "constant":
        return [7] * n
    if kind == "few":
        return [rnd.choice((0, 1, 5, 5, 1000)) for _ in range(n)]
    if kind == "stride-aligned":  # every sampled position holds the largest values
        return [10**9 + i if i % ledger_stats._SAMPLE_STRIDE == 0 else i for i in range(n)]
    if kind == "floats":
        return [rnd.random() * 3 for _ in range(n)]
    raise AssertionError(kind)


KINDS = ("random", "ascending", "descending", "constant", "few", "stride-aligned", "floats")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [1, 2, 4096, 4097, 20_011])
def test_window_percentiles_are_exact(kind, n):
    rnd = random.Random(n)
    values = patterned(kind, n, rnd)
    before = list(values)
    ref = sorted(values)
    for q in QS:
        window = RankWindow.around(values, q)
        assert values == before  # the input is not reordered
        assert window.covers(q) and len(window) == n
        assert window.percentile(q) == percentile(ref, q), (kind, n, q)


def test_large_random_data_takes_the_selection_path_not_a_full_sort():
    values = patterned("random", 100_000, random.Random(3))
    for q in (50, 95, 99):
        window = RankWindow.around(values, q)
        assert not window.complete and len(window.values) < 15_000, q


def test_a_sample_fooled_by_the_data_falls_back_to_an_exact_sort():
    values = patterned("stride-aligned", 50_000, random.Random(4))
    window = RankWindow.around(values, 50)
    assert window.complete  # the counts disagreed with the sample: everything was sorted
    assert window.percentile(50) == percentile(sorted(values), 50)


@HYPOTHESIS
@given(
    start=st.lists(st.integers(-5, 60), max_size=80),
    steps=st.lists(st.tuples(st.booleans(), st.integers(-5, 60)), max_size=60),
    q=st.sampled_from(QS) | st.floats(0, 100),
)
def test_window_follows_additions_and_removals(start, steps, q):
    with small_selection():
        window = RankWindow.around(start, q)
        bag = list(start)
        for add, v in steps:
            if add or v not in bag:
                window.add([v])
                bag.append(v)
            else:
                window.remove([v])
                bag.remove(v)
            assert len(window) == len(bag)
            if window.covers(q):
                assert window.percentile(q) == percentile(sorted(bag), q)
        full = RankWindow.around(bag, None)
        assert full.values == sorted(bag) and full.covers(q)


@HYPOTHESIS
@given(
    values=st.lists(st.floats(0, 1e6) | st.integers(0, 10**12), max_size=200),
    q=st.floats(0, 100),
)
def test_window_selection_matches_sorting(values, q):
    with small_selection():
        window = RankWindow.around(values, q)
        assert window.covers(q)
        assert window.percentile(q) == percentile(sorted(values), q)


# -- through the ledger ------------------------------------------------------------------------

maybe_tokens = st.none() | st.integers(0, 400)


@st.composite
def usages(draw: st.DrawFn) -> Usage:
    """Valid usage (input includes the cache parts, output the reasoning) with unknowns."""
    cache_read = draw(maybe_tokens)
    cache_write = draw(st.none() | st.just(3))
    reasoning = draw(maybe_tokens)
    parts = (cache_read or 0) + (cache_write or 0)
    more_input, more_output = draw(maybe_tokens), draw(maybe_tokens)
    if more_input is None and parts:
        more_input = 0  # input cannot be unknown when a part of it is known
    if more_output is None and reasoning is not None:
        more_output = 0
    return Usage(
        input_tokens=None if more_input is None else parts + more_input,
        output_tokens=None if more_output is None else (reasoning or 0) + more_output,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        reasoning_tokens=reasoning,
        premium_requests=draw(st.none() | st.sampled_from([0.0, 0.33, 1.0])),
    )


costs = st.none() | st.floats(0, 2.0)
ops = st.one_of(
    st.tuples(st.just("append"), usages(), costs),
    st.tuples(st.just("query"), st.sampled_from(FIGURES), st.sampled_from(QS)),
    st.tuples(st.just("rollback"), st.integers(0, 40)),
    st.tuples(st.just("checkpoint")),
    st.tuples(st.just("restore")),
)


@HYPOTHESIS
@given(
    max_history=st.none() | st.integers(1, 30),
    program=st.lists(ops, max_size=120),
)
def test_ledger_percentiles_follow_every_change(max_history, program):
    with small_selection():
        ledger = UsageLedger(max_history=max_history)
        checkpoints = []
        for op in program:
            if op[0] == "append":
                ledger.append(op[1], cost_usd=op[2])
            elif op[0] == "query":  # leaves a cached window behind for the next changes
                expected = percentile(reference(ledger, op[1]), op[2])
                assert ledger.percentile(op[1], op[2]) == expected
            elif op[0] == "rollback":
                index = ledger.evicted + min(op[1], len(ledger))
                ledger.rollback_to_index(index)
            elif op[0] == "checkpoint":
                checkpoints.append(ledger.checkpoint())
            elif checkpoints:
                with contextlib.suppress(LedgerError):  # evicted or rolled back: no change
                    ledger.restore(checkpoints.pop())
        check_ledger(ledger)


def append_varied(ledger: UsageLedger, rnd: random.Random, n: int) -> None:
    """Append a realistic spread, with unknown values in every figure now and then."""

    def maybe(v: int) -> int | None:
        return None if rnd.random() < 0.05 else v

    cache_read = maybe(rnd.randint(0, 60_000))
    cache_write = None if n % 3 else rnd.randint(0, 500)
    reasoning = maybe(rnd.choice((0, 0, 128, rnd.randint(0, 9000))))
    parts = (cache_read or 0) + (cache_write or 0)
    usage = Usage(
        input_tokens=parts + rnd.randint(0, 120_000) if parts or rnd.random() > 0.05 else None,
        output_tokens=maybe(7) if reasoning is None else reasoning + rnd.randint(0, 4000),
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        reasoning_tokens=reasoning,
        premium_requests=None if n % 2 else rnd.choice((0.0, 1.0, 0.33)),
    )
    ledger.append(usage, cost_usd=None if rnd.random() < 0.05 else rnd.random() / 10)


@pytest.mark.slow
def test_large_ledger_is_exact_after_appends_rollback_and_restore():
    rnd = random.Random(11)
    ledger = UsageLedger()
    for n in range(9000):
        append_varied(ledger, rnd, n)
    check_ledger(ledger)
    checkpoint = ledger.checkpoint()
    for n in range(300):
        append_varied(ledger, rnd, n)
        if n % 97 == 0:
            check_ledger(ledger)  # the cached windows take the new values in
    for q in (50, 95):
        ledger.percentile("total_tokens", q)  # partial windows, then a burst of appends
    for n in range(4000):
        append_varied(ledger, rnd, n)
    check_ledger(ledger)
    ledger.restore(checkpoint)
    check_ledger(ledger)
    ledger.rollback_to_index(6000)
    check_ledger(ledger)


@pytest.mark.slow
def test_large_bounded_ledger_is_exact_through_eviction_and_compaction():
    rnd = random.Random(12)
    ledger = UsageLedger(max_history=5000)
    for n in range(5000):
        append_varied(ledger, rnd, n)
    for q in QS:
        ledger.percentile("input_tokens", q)
    for n in range(6000):  # thousands of evictions: the arrays are compacted on the way
        append_varied(ledger, rnd, n)
        if n % 1000 == 0 or n in (5999, 4095, 4096):
            for q in QS:
                ref = reference(ledger, "input_tokens")
                assert ledger.percentile("input_tokens", q) == percentile(ref, q), (n, q)
    assert ledger.evicted == 6000
    check_ledger(ledger)


def test_one_append_updates_the_cached_window_instead_of_rebuilding_it():
    rnd = random.Random(13)
    ledger = UsageLedger(max_history=10_000)
    for n in range(10_000):
        append_varied(ledger, rnd, n)
    ledger.percentile("input_tokens", 95)
    window = ledger._windows["input_tokens"][0]
    assert not window.complete  # a selection, not a full sort
    append_varied(ledger, rnd, 0)  # one new value, one evicted
    ref = reference(ledger, "input_tokens")
    assert ledger.percentile("input_tokens", 95) == percentile(ref, 95)
    assert ledger._windows["input_tokens"][0] is window


def test_records_appended_and_evicted_between_two_queries():
    """Found by hypothesis (and present before windows): such a record was counted out of
    the cache without ever having been counted in."""
    ledger = UsageLedger(max_history=3)
    for v in (10, 20, 30):
        ledger.append(Usage(input_tokens=v))
    assert ledger.percentile("input_tokens", 50) == 20
    for v in (5, 1, 2, 60, 70):  # 5, 1 and 2 come and go before the next query
        ledger.append(Usage(input_tokens=v))
    assert ledger.percentile("input_tokens", 50) == 60
    assert ledger.percentile("input_tokens", 0) == 2


@pytest.mark.slow
def test_percentiles_survive_a_reload_from_sqlite(tmp_path):
    db = tmp_path / "ledger.sqlite3"
    rnd = random.Random(14)
    with UsageLedger("p", path=db) as ledger:
        for n in range(5000):
            append_varied(ledger, rnd, n)
        ledger.rollback_to_index(4500)
        expected = {f: [ledger.percentile(f, q) for q in QS] for f in FIGURES}
        check_ledger(ledger)
    with UsageLedger("p", path=db) as again:
        assert len(again) == 4500
        assert {f: [again.percentile(f, q) for q in QS] for f in FIGURES} == expected
        check_ledger(again)
    with UsageLedger("p", path=db, max_history=4200) as bounded:
        check_ledger(bounded)


def test_unknown_everywhere_gives_none():
    ledger = UsageLedger()
    for _ in range(5000):
        ledger.append(Usage(output_tokens=1))
    assert ledger.percentile("input_tokens", 95) is None
    assert ledger.percentile("cost_usd", 50) is None
    assert ledger.percentile("total_tokens", 95) == 1
    assert math.isclose(ledger.statistics()["output_tokens"].mean, 1.0)
