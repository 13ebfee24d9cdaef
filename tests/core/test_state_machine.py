"""Random sequences of estimate / complete / fail / checkpoint / restore / rollback / evict.

After every step: the RFC 00040 invariants, the Display Invariant, cumulative == the sum of
the current timeline (what survives checkpoints and rollbacks, evicted records included) plus
what is in flight, lifetime >= cumulative and never decreasing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from otel_tokens import (
    Estimate,
    HistoryEvictedError,
    LedgerError,
    TokenState,
    Usage,
    UsageLedger,
)
from otel_tokens.account.ledger.records import COST_SCALE

MAX_HISTORY = 4
WINDOW = 1000

counts = st.one_of(st.none(), st.integers(min_value=0, max_value=500))
usages = st.builds(
    lambda i, o, src, cost: Usage(input_tokens=i, output_tokens=o, source=src, cost_usd=cost),
    counts,
    counts,
    st.sampled_from(["reported", "estimated", "parsed_text"]),
    st.one_of(st.none(), st.floats(min_value=0, max_value=5, allow_nan=False)),
)
estimates = st.builds(Estimate, st.integers(min_value=0, max_value=2000),
                      st.sampled_from(["exact", "delta", "full"]))  # fmt: skip


@dataclass
class Stream:
    handle: object
    key: str
    estimate: Estimate | None
    running: Usage | None = None


@dataclass
class Model:
    timeline: list[tuple[int, Usage]] = field(default_factory=list)  # (uid, usage), oldest first
    evicted: int = 0
    lifetime: list[Usage] = field(default_factory=list)
    turns: int = 0
    total_output: int = 0
    last_input: int | None = None
    max_observed: int | None = None


def _sums(usages_: list[Usage]) -> tuple:
    """Expected totals: (requests, per-class sums or None, cost or None) like UsageTotals."""
    out: list = [len(usages_)]
    for name in ("input_tokens", "output_tokens"):
        known = [getattr(x, name) for x in usages_ if getattr(x, name) is not None]
        out.append(sum(known) if known else None)
    costs = [round(x.cost_usd * COST_SCALE) for x in usages_ if x.cost_usd is not None]
    out.append(sum(costs) / COST_SCALE if costs else None)
    return tuple(out)


def _totals(t) -> tuple:
    return (t.requests, t.input_tokens, t.output_tokens, t.cost_usd)


class AccountingMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.state = TokenState(max_input_tokens=WINDOW)
        self.ledger = UsageLedger(max_history=MAX_HISTORY)
        self.model = Model()
        self.streams: list[Stream] = []  # open, in the order their estimate was last set
        self.checkpoints: list[tuple[object, list[int], int]] = []
        self.next_uid = 0
        self.previous_lifetime = _totals(self.ledger.lifetime)

    # -- calls --------------------------------------------------------------------------
    @rule(estimate=st.one_of(st.none(), estimates))
    def start_stream(self, estimate):
        handle = self.state.start_streaming(estimate)
        self.streams.append(Stream(handle, f"k{len(self.streams)}-{self.next_uid}", estimate))
        self.next_uid += 1

    @precondition(lambda self: self.streams)
    @rule(data=st.data(), estimate=estimates)
    def update_estimate(self, data, estimate):
        s = self.streams.pop(data.draw(st.integers(0, len(self.streams) - 1)))
        self.state.set_estimate(s.handle, estimate)
        s.estimate = estimate
        self.streams.append(s)

    @precondition(lambda self: self.streams)
    @rule(data=st.data(), usage=usages)
    def stream_running_usage(self, data, usage):
        s = self.streams[data.draw(st.integers(0, len(self.streams) - 1))]
        self.ledger.stream_update(s.key, usage)
        s.running = usage

    def _finalized(self, usage: Usage) -> None:
        m = self.model
        uid = self.next_uid
        self.next_uid += 1
        m.timeline.append((uid, usage))
        m.lifetime.append(usage)
        if len(m.timeline) - m.evicted > MAX_HISTORY:
            m.evicted += 1
        m.turns += 1
        m.total_output += usage.output_tokens or 0
        reported = usage.input_tokens if usage.source != "estimated" else None
        if reported is not None:
            m.last_input = reported
            m.max_observed = reported if m.max_observed is None else max(m.max_observed, reported)
        return uid

    @rule(usage=usages)
    def complete_unstreamed(self, usage):
        uid = self.next_uid
        self.state.complete(usage)
        self.ledger.append(usage, request_id=f"r{uid}", timestamp=float(uid))
        self._finalized(usage)

    @precondition(lambda self: self.streams)
    @rule(data=st.data(), usage=st.one_of(st.none(), usages))
    def complete_stream(self, data, usage):
        s = self.streams.pop(data.draw(st.integers(0, len(self.streams) - 1)))
        final = usage if usage is not None else (s.running or Usage())
        uid = self.next_uid
        self.state.complete(final, s.handle)
        self.ledger.stream_finalize(s.key, usage if usage is not None or s.running else final,
                                    request_id=f"r{uid}", timestamp=float(uid))  # fmt: skip
        self._finalized(final)

    @precondition(lambda self: self.streams)
    @rule(data=st.data())
    def fail_stream(self, data):
        s = self.streams.pop(data.draw(st.integers(0, len(self.streams) - 1)))
        self.state.fail(s.handle)
        self.ledger.stream_discard(s.key)

    # -- checkpoints and rollback -------------------------------------------------------
    @rule()
    def checkpoint(self):
        uids = [uid for uid, _ in self.model.timeline]
        self.checkpoints.append((self.ledger.checkpoint(), uids, self.model.evicted))

    def _truncate(self, n: int) -> None:
        self.model.timeline = self.model.timeline[:n]

    @precondition(lambda self: self.checkpoints)
    @rule(data=st.data())
    def restore(self, data):
        cp, uids, _ = data.draw(st.sampled_from(self.checkpoints))
        current = [uid for uid, _ in self.model.timeline]
        try:
            self.ledger.restore(cp)
        except HistoryEvictedError:
            assert current[: len(uids)] != uids or self.model.evicted > len(uids)
            return
        except LedgerError:
            assert current[: len(uids)] != uids
            return
        assert current[: len(uids)] == uids and self.model.evicted <= len(uids)
        self._truncate(len(uids))

    @rule(data=st.data())
    def rollback_to_index(self, data):
        index = data.draw(st.integers(0, len(self.model.timeline) + 1))
        try:
            self.ledger.rollback_to_index(index)
        except HistoryEvictedError:
            assert index < self.model.evicted
            return
        except LedgerError:
            assert index > len(self.model.timeline)
            return
        assert self.model.evicted <= index <= len(self.model.timeline)
        self._truncate(index)

    @precondition(lambda self: self.model.timeline)
    @rule(data=st.data())
    def rollback_to_request_id(self, data):
        position = data.draw(st.integers(0, len(self.model.timeline) - 1))
        uid = self.model.timeline[position][0]
        try:
            self.ledger.rollback_to_request_id(f"r{uid}")
        except LedgerError:
            assert position < self.model.evicted
            return
        assert position >= self.model.evicted
        self._truncate(position)

    @rule(data=st.data())
    def rollback_to_timestamp(self, data):
        t = data.draw(st.integers(-1, self.next_uid)) + 0.5
        timeline = self.model.timeline
        position = next((i for i, (uid, _) in enumerate(timeline) if uid > t), len(timeline))
        try:
            self.ledger.rollback_to_timestamp(t)
        except HistoryEvictedError:
            assert position < self.model.evicted
            return
        assert position >= self.model.evicted
        self._truncate(position)

    # -- invariants ---------------------------------------------------------------------
    @invariant()
    def rfc_invariants(self):
        s, m = self.state, self.model
        expected_estimate = next(
            (x.estimate for x in reversed(self.streams) if x.estimate is not None), None
        )
        assert s.current_estimate == expected_estimate  # (1) only while streaming
        assert s.status == ("streaming" if self.streams else "idle")
        if s.current_estimate is not None:
            assert s.status == "streaming"
        assert s.input_tokens == m.last_input  # (2) only reported input (the last one)
        assert s.total_output_tokens == m.total_output  # (3)
        assert s.turn_count == m.turns  # (4)
        assert s.max_observed_input_tokens == m.max_observed  # (5)

    @invariant()
    def display_invariant(self):
        d = self.state.display()
        est = self.state.current_estimate
        shown = est.input_tokens if est is not None else self.state.input_tokens
        assert d.tokens == shown
        assert d.is_estimate == (est is not None)
        assert d.percent == (None if shown is None else shown * 100.0 / WINDOW)

    @invariant()
    def ledger_totals(self):
        m = self.model
        in_flight = [s.running for s in self.streams if s.running is not None]
        timeline = [u for _, u in m.timeline]
        cumulative = _totals(self.ledger.cumulative)
        assert cumulative == _sums(timeline + in_flight)
        lifetime = _totals(self.ledger.lifetime)
        assert lifetime == _sums(m.lifetime + in_flight)
        retained = self.ledger.history()
        assert [r.request_id for r in retained] == [f"r{uid}" for uid, _ in m.timeline[m.evicted:]]
        assert self.ledger.evicted == m.evicted
        for now, before in zip(lifetime, self.previous_lifetime):
            if before is not None and now is not None:
                assert now >= before
        for life, cum in zip(lifetime, cumulative):
            if cum is not None:
                assert life is not None and life >= cum
        # in-flight values are not finalized: the monotonic check runs on finalized totals
        self.previous_lifetime = _sums(m.lifetime)


AccountingMachine.TestCase.settings = settings(
    max_examples=300, stateful_step_count=40, deadline=None
)
TestAccounting = pytest.mark.slow(AccountingMachine.TestCase)
