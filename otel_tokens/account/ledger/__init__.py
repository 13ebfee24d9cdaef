"""`UsageLedger`: per-request usage history with cumulative and lifetime totals (seed 004).

The seed's recommended "history array + totals" design, all four phases:

* one record per finalized request;
* ``cumulative`` totals follow checkpoints and rollbacks, ``lifetime`` totals never go down;
* streaming updates of one request replace each other (providers send running totals), and
  ``cumulative`` reads as the finalized sum plus the in-flight values, so the seed's
  overwrite-the-total bug cannot happen; finalizing adds a request exactly once;
* rollback to a request index, request id or timestamp; checkpoint/restore;
* statistics (count, sum, mean, min, max, p50/p90/p95/p99), cost by model, totals over a
  time range, top-N most expensive requests;
* bounded history (``max_history``): totals stay exact after eviction, and anything that
  would need evicted history raises :class:`HistoryEvictedError` instead of a wrong total;
* optional SQLite persistence.
"""

from __future__ import annotations

import heapq
import itertools
import math
import os
import secrets
import threading
import time
from typing import Any, Hashable, Iterator

from ...errors import HistoryEvictedError, LedgerError, LedgerPersistenceError
from ...usage import TOKEN_CLASSES, USAGE_SOURCES, Usage, check_amount
from .history import History
from .records import (
    COST_SCALE,
    PREMIUM_SCALE,
    Checkpoint,
    ClassStats,
    TotalsAccumulator,
    UsageRecord,
    UsageTotals,
    column_totals,
    scaled_values,
)
from .stats import RankWindow, check_percentile, class_stats

__all__ = [
    "Checkpoint",
    "ClassStats",
    "UsageLedger",
    "UsageRecord",
    "UsageTotals",
]

#: Figures that statistics, percentiles and top-N can be computed over.
FIGURES: tuple[str, ...] = (*TOKEN_CLASSES, "total_tokens", "cost_usd", "premium_requests")

_ledger_ids = itertools.count(1)
#: Past this many evictions since the last query a new window is cheaper than counting them out.
_MAX_INCREMENTAL_REMOVALS = 128
#: A partial window is rebuilt once more than 1/this of the history is new since it was
#: placed: counting that many values in one by one costs more, and its ranks have drifted.
_NEW_FRACTION_REBUILDS = 8
#: Rows kept as tuples before the history and the totals take them in one pass (bounded
#: memory: a few kB); every query, checkpoint, rollback and write takes them first.
_FOLD_AT = 64


_ACTIVE = 14  # the active flag's place in a stored row (sqlite.StoredRow)


_TRACE_ID_LIMIT, _SPAN_ID_LIMIT = 1 << 128, 1 << 64


def _as_id(value: int | str | None, bits: int, name: str) -> int:
    """A trace/span id given as int or hex string, as an int (0 = none)."""
    if value is None:
        return 0
    if isinstance(value, str):
        try:
            value = int(value, 16)
        except ValueError:
            raise ValueError(f"{name} must be a hex string or int, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << bits:
        raise ValueError(f"{name} must be a {bits}-bit id, got {value!r}")
    return value


def _timestamp(value: Any) -> float:
    """A given timestamp, checked: finite seconds since the epoch."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"timestamp must be finite seconds since the epoch, got {value!r}")
    return float(value)


def _checked_record(
    usage: Usage,
    cost_usd: float | None,
    timestamp: float | None,
    request_id: str | None,
    trace_id: int | str | None,
    span_id: int | str | None,
    provider: str | None,
) -> tuple[float | None, float, int, int, str | None]:
    """The arguments of :meth:`UsageLedger.append` checked, in order, before anything is kept:
    (cost, timestamp, trace id, span id, provider), each defaulted as ``append`` says."""
    if type(usage) is not Usage:
        raise TypeError(f"usage must be a Usage, got {type(usage).__name__}")
    if cost_usd is None:
        cost = usage.cost_usd
    elif type(cost_usd) is float and 0.0 <= cost_usd < math.inf:
        cost = cost_usd
    else:
        cost = check_amount("cost_usd", cost_usd)
    timestamp = time.time() if timestamp is None else _timestamp(timestamp)
    if request_id is not None and not isinstance(request_id, str):
        raise ValueError(f"request_id must be a string or None, got {request_id!r}")
    # ids as the recorder gives them (ints in range) need no call of _as_id
    trace = (
        trace_id
        if type(trace_id) is int and 0 <= trace_id < _TRACE_ID_LIMIT
        else (_as_id(trace_id, 128, "trace_id") if trace_id is not None else 0)
    )
    span = (
        span_id
        if type(span_id) is int and 0 <= span_id < _SPAN_ID_LIMIT
        else (_as_id(span_id, 64, "span_id") if span_id is not None else 0)
    )
    if provider is None or usage.provider is not None:
        provider = usage.provider
    elif not isinstance(provider, str):
        raise ValueError(f"provider must be a string or None, got {provider!r}")
    return cost, timestamp, trace, span, provider


class UsageLedger:
    """History and totals of one agent's requests; thread-safe.

    ``max_history`` bounds the in-memory history (None: unbounded). ``path`` persists every
    record to SQLite under ``name`` (many ledgers can share a file). Opening reads nothing, and
    recording only writes, so a ledger of a million rows costs a call no more than an empty
    one: the first query restores the cumulative and lifetime totals by SQL aggregates and
    the ``max_history`` newest records into memory. ``sink`` (a fleet ledger's writer) is
    handed every appended row too; its ``put`` never blocks nor raises.
    """

    def __init__(
        self,
        name: str = "default",
        *,
        max_history: int | None = None,
        path: str | os.PathLike[str] | None = None,
        busy_timeout: float = 5.0,
        sink: Any = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"ledger name must be a non-empty string, got {name!r}")
        if max_history is not None and (
            isinstance(max_history, bool) or not isinstance(max_history, int) or max_history < 1
        ):
            raise ValueError(f"max_history must be a positive integer or None, got {max_history!r}")
        self.name = name
        self.max_history = max_history
        self._id = next(_ledger_ids)
        self._lock = threading.Lock()
        self._history = History()
        self._cumulative = TotalsAccumulator()  # finalized, current timeline (evicted included)
        self._discarded = TotalsAccumulator()  # rolled back: in lifetime, not in cumulative
        self._evicted = 0
        self._evicted_last_ts = -math.inf
        self._evicted_last_lid = 0  # local id of the newest evicted record
        self._next_lid = 1
        self._id_prefix = f"{secrets.token_hex(4)}-"
        self._model_cost: dict[str | None, list[int]] = {}  # model -> [scaled cost, count]
        self._in_flight: dict[Hashable, Usage] = {}
        self._truncations = 0  # rollbacks that removed records (reset percentile caches)
        # figure -> (window, physical lo, physical hi, (compactions, truncations)) it reflects
        self._windows: dict[str, tuple[RankWindow, int, int, tuple[int, int]]] = {}
        self._store: Any = None  # a SqliteStore when persisted
        self._pending: dict[int, list[Any]] = {}  # lid -> row not yet written (item 14: active)
        self._pending_deactivate: list[int] = []
        self._recent: list[tuple[Any, ...]] = []  # rows not yet folded (_fold_locked)
        self._unread = False
        #: also given every appended row, off the lock (the fleet ledger's writer: its ``put``)
        self._sink = sink
        if path is not None:
            from .sqlite import SqliteStore  # sqlite3 only when persistence is asked for

            self._store = SqliteStore(path, name, busy_timeout)
            self._unread = True  # the file's rows are read on the first query, not on open

    # -- recording ------------------------------------------------------------------------
    def append(
        self,
        usage: Usage,
        *,
        cost_usd: float | None = None,
        request_id: str | None = None,
        timestamp: float | None = None,
        trace_id: int | str | None = None,
        span_id: int | str | None = None,
        who: tuple[str | None, str | None, str | None] | None = None,
        provider: str | None = None,
        error_type: str | None = None,
    ) -> int:
        """Record one finalized request; returns its index in the timeline.

        ``who`` (user, tenant, conversation) and ``error_type`` (a failed call's) are written
        with the persisted row (the report groups by them); the in-memory history has neither. ``provider``: the row's
        provider when ``usage`` names none (the call's), without a copy of the record per call.
        ``cost_usd`` is the request's cost (computed by pricing); it defaults to the cost the
        backend reported in ``usage``. With persistence on, a write failure raises
        :class:`LedgerPersistenceError` *after* the record is kept in memory and queued.
        """
        cost, timestamp, trace, span, provider = _checked_record(
            usage, cost_usd, timestamp, request_id, trace_id, span_id, provider
        )
        with self._lock:
            index = self._append_locked(
                usage, cost, timestamp, request_id, trace, span, -1, True, provider
            )  # (rowid, persist, provider)
            lid = self._next_lid - 1
            if self._store is not None:
                if who is not None or error_type is not None:
                    self._pending_extra(lid, who, error_type)
                self._flush_locked()
        if self._sink is not None:  # the record's id as the history shows it (a rollback's key)
            self._sink.put(
                self.name,
                request_id if request_id is not None else f"{self._id_prefix}{lid:x}",
                timestamp,
                usage if provider == usage.provider else usage.replace(provider=provider),
                cost,
                trace,
                span,
                who,
                error_type,
            )
        return index

    def _pending_extra(
        self,
        lid: int,
        who: tuple[str | None, str | None, str | None] | None,
        error_type: str | None,
    ) -> None:
        """The unwritten row ``lid``'s columns after its active flag: who, then the error type."""
        self._pending[lid].extend(who or (None, None, None))
        if error_type is not None:
            self._pending[lid].append(str(error_type))

    def _append_locked(
        self,
        usage: Usage,
        cost: float | None,
        ts: float,
        request_id: str | None,
        trace: int,
        span: int,
        rowid: int = -1,
        persist: bool = True,
        provider: str | None = None,
    ) -> int:
        """Keep one row as a tuple; the history and the totals take the rows in bulk
        (:meth:`_fold_locked`) every :data:`_FOLD_AT` rows and before anything reads them."""
        premium = usage.premium_requests
        # first: if the scaled amounts cannot be computed, nothing changed
        row = (
            self._next_lid,
            ts,
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
            usage.reasoning_tokens,
            cost,
            premium,
            None if cost is None else round(cost * COST_SCALE),
            None if premium is None else round(premium * PREMIUM_SCALE),
            usage.model,
            usage.provider if provider is None else provider,
            usage.source,
            trace,
            span,
            request_id,
            rowid,
        )
        self._next_lid += 1
        recent = self._recent
        recent.append(row)
        if persist and self._store is not None:
            lid = row[0]
            self._pending[lid] = [
                request_id if request_id is not None else f"{self._id_prefix}{lid:x}",
                ts,
                usage.model,
                row[12],
                usage.source,
                *row[2:7],
                cost,
                premium,
                f"{trace:032x}" if trace else None,
                f"{span:016x}" if span else None,
                1,
            ]
        h = self._history
        index = self._evicted + len(h.lid) - h._start + len(recent) - 1  # evictions keep it
        if len(recent) >= _FOLD_AT:
            self._fold_locked()
        return index

    def _fold_locked(self) -> None:
        """Add the rows kept since the last fold to the history and the totals, a column at a
        time, and evict past ``max_history``. A call's row is then a tuple and a list append,
        not a dozen array appends and a totals update of its own."""
        rows = self._recent
        if not rows:
            return
        (
            lid,
            ts,
            i,
            o,
            cr,
            cw,
            r,
            cost,
            premium,
            scaled_cost,
            scaled_premium,
            model,
            provider,
            source,
            trace,
            span,
            request_ids,
            rowid,
        ) = zip(*rows)
        h = self._history
        n = len(rows)
        # each figure's known sum and None count: the history's columns hold None alike (a
        # scaled amount is None exactly when its amount is)
        sums, unknown = column_totals((i, o, cr, cw, r, scaled_cost, scaled_premium), n)
        h.extend(
            lid,
            ts,
            (i, o, cr, cw, r),
            cost,
            premium,
            model,
            provider,
            source,
            trace,
            span,
            request_ids,
            rowid,
            unknown,
        )
        self._recent = []
        self._cumulative.add_columns(n, sums, unknown)
        self._add_model_costs(model, scaled_cost, None if unknown[5] else sums[5])
        excess = len(h) - self.max_history if self.max_history is not None else 0
        if excess > 0:
            first = h.start
            newest = max(h.ts[first : first + excess])
            if newest > self._evicted_last_ts:
                self._evicted_last_ts = newest
            self._evicted_last_lid = h.lid[first + excess - 1]
            h.evict_front(excess)
            self._evicted += excess

    def _add_model_costs(
        self, models: tuple[str | None, ...], scaled: tuple[int | None, ...], total: int | None
    ) -> None:
        """Each model's scaled cost and count of priced rows (:meth:`cost_by_model`); when the
        rows are all priced (``total``: their sum) and of one model, an agent's usual fold, one
        addition."""
        model_cost = self._model_cost
        first = models[0]
        if total is not None and models.count(first) == len(models):
            entry = model_cost.get(first)
            if entry is None:
                model_cost[first] = [total, len(scaled)]
            else:
                entry[0] += total
                entry[1] += len(scaled)
            return
        for m, c in zip(models, scaled):
            if c is not None:
                entry = model_cost.get(m)
                if entry is None:
                    model_cost[m] = [c, 1]
                else:
                    entry[0] += c
                    entry[1] += 1

    # -- streaming ------------------------------------------------------------------------
    def stream_update(self, key: Hashable, usage: Usage) -> None:
        """Set the running usage of in-flight request ``key`` (replaces the previous value)."""
        if type(usage) is not Usage:
            raise TypeError(f"usage must be a Usage, got {type(usage).__name__}")
        with self._lock:
            self._in_flight[key] = usage

    def stream_finalize(self, key: Hashable, usage: Usage | None = None, **record: Any) -> int:
        """Finalize in-flight request ``key`` exactly once, with its last running value
        (or ``usage`` when given); ``record`` takes :meth:`append`'s keyword arguments."""
        with self._lock:
            last = self._in_flight.pop(key, None)
        final = usage if usage is not None else last
        if final is None:
            raise LedgerError(f"no in-flight request {key!r} to finalize and no usage given")
        return self.append(final, **record)

    def stream_discard(self, key: Hashable) -> Usage | None:
        """Forget in-flight request ``key`` without recording it; returns its last value."""
        with self._lock:
            return self._in_flight.pop(key, None)

    @property
    def in_flight(self) -> dict[Hashable, Usage]:
        """A copy of the running usage of every in-flight request."""
        with self._lock:
            return dict(self._in_flight)

    # -- totals ---------------------------------------------------------------------------
    def _with_in_flight(self, acc: TotalsAccumulator) -> UsageTotals:
        if self._in_flight:
            acc = acc.copy()
            for usage in self._in_flight.values():
                acc.add(scaled_values(usage, usage.cost_usd))
        return acc.freeze()

    @property
    def cumulative(self) -> UsageTotals:
        """Totals of the current timeline (follows rollbacks), in-flight requests included."""
        with self._loaded():
            return self._with_in_flight(self._cumulative)

    @property
    def lifetime(self) -> UsageTotals:
        """Everything ever consumed (never reduced by rollbacks), in-flight included."""
        with self._loaded():
            acc = self._cumulative.copy()
            acc.merge(self._discarded)
            return self._with_in_flight(acc)

    # -- history --------------------------------------------------------------------------
    def __len__(self) -> int:
        """Records retained in memory (evicted ones not counted)."""
        with self._loaded():
            return len(self._history)

    @property
    def evicted(self) -> int:
        """How many of the oldest records the bounded history has dropped."""
        with self._loaded():
            return self._evicted

    def history(self) -> list[UsageRecord]:
        """Every retained record, oldest first."""
        with self._loaded():
            return [self._record(p) for p in range(len(self._history))]

    def __iter__(self) -> Iterator[UsageRecord]:
        return iter(self.history())

    def recent(self, n: int) -> list[UsageRecord]:
        """The ``n`` newest records, oldest first."""
        if n < 0:
            raise ValueError(f"n must not be negative, got {n}")
        with self._loaded():
            size = len(self._history)
            return [self._record(p) for p in range(max(0, size - n), size)]

    def _record(self, position: int) -> UsageRecord:
        return self._history.record(position, self._evicted + position, self._id_prefix)

    # -- checkpoints and rollback ---------------------------------------------------------
    def checkpoint(self) -> Checkpoint:
        """An opaque restore point for :meth:`restore`."""
        with self._loaded():
            h = self._history
            last = h.lid[h.physical(len(h) - 1)] if len(h) else self._evicted_last_lid
            return Checkpoint(self._id, last)

    def restore(self, checkpoint: Checkpoint) -> list[UsageRecord]:
        """Return cumulative totals and history to ``checkpoint`` (lifetime is kept, as the
        seed's ``setState``); returns the records removed."""
        if not isinstance(checkpoint, Checkpoint) or checkpoint._ledger_id != self._id:
            raise LedgerError("restore() needs a checkpoint taken from this same ledger")
        last = checkpoint._last_lid
        with self._loaded():
            position = self._history.find_lid(last) if last else None
            if position is not None:
                return self._truncate_locked(position + 1)
            if last == self._evicted_last_lid:  # the timeline ended at the newest evicted record
                return self._truncate_locked(0)
            if last < self._evicted_last_lid:
                raise HistoryEvictedError(
                    "cannot restore: records after the checkpoint were evicted "
                    f"(max_history={self.max_history})"
                )
            raise LedgerError(
                "cannot restore: a rollback already removed the request this checkpoint "
                "was taken after"
            )

    def rollback_to_index(self, index: int) -> list[UsageRecord]:
        """Undo every request from timeline ``index`` on (back to just before it)."""
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"index must be an int, got {type(index).__name__}")
        with self._loaded():
            end = self._evicted + len(self._history)
            if index < 0 or index > end:
                raise LedgerError(f"request index {index} is outside the timeline 0..{end}")
            if index < self._evicted:
                raise HistoryEvictedError(
                    f"cannot roll back to request {index}: requests before {self._evicted} "
                    f"were evicted (max_history={self.max_history})"
                )
            return self._truncate_locked(index - self._evicted)

    def rollback_to_request_id(self, request_id: str) -> list[UsageRecord]:
        """Undo request ``request_id`` and every request after it."""
        with self._loaded():
            h = self._history
            position = None
            if request_id.startswith(self._id_prefix):
                try:
                    position = h.find_lid(int(request_id[len(self._id_prefix) :], 16))
                except ValueError:
                    position = None
                if position is not None and h.request_ids[h.physical(position)] is not None:
                    position = None  # an explicit id that merely looks generated
            if position is None:
                ids = h.request_ids
                for p in range(len(h) - 1, -1, -1):  # newest first: undo the latest match
                    if ids[h.physical(p)] == request_id:
                        position = p
                        break
            if position is None:
                hint = f" ({self._evicted} older requests were evicted)" if self._evicted else ""
                raise LedgerError(f"no request with id {request_id!r} in the history{hint}")
            return self._truncate_locked(position)

    def rollback_to_timestamp(self, timestamp: float) -> list[UsageRecord]:
        """Return to the ledger as it was at ``timestamp``: the first request recorded after
        that moment and every request following it are undone."""
        with self._loaded():
            if self._evicted and self._evicted_last_ts > timestamp:
                raise HistoryEvictedError(
                    f"cannot roll back to {timestamp}: evicted requests are newer than that "
                    f"(max_history={self.max_history})"
                )
            h = self._history
            ts = h.ts
            for p in range(len(h)):
                if ts[h.physical(p)] > timestamp:
                    return self._truncate_locked(p)
            return []

    def _truncate_locked(self, position: int) -> list[UsageRecord]:
        h = self._history
        removed = [self._record(p) for p in range(position, len(h))]
        for p in range(position, len(h)):
            phys = h.physical(p)
            scaled = scaled_values(h.usage(phys), h.amount(h.cost, phys))
            self._cumulative.add(scaled, -1)
            self._discarded.add(scaled)
            if scaled[5] is not None:
                entry = self._model_cost[h.labels[h.model[phys]]]
                entry[0] -= scaled[5]
                entry[1] -= 1
            if self._store is not None:
                pending = self._pending.get(h.lid[phys])
                if pending is not None:
                    pending[_ACTIVE] = 0
                else:
                    self._pending_deactivate.append(h.rowid[phys])
        h.truncate(position)
        if removed:
            self._truncations += 1
            if self._sink is not None:  # the fleet ledger undoes the same rows (queued)
                self._sink.rollback(self.name, [(r.request_id, r.timestamp) for r in removed])
            if self._store is not None:
                self._flush_locked()
        return removed

    # -- statistics -----------------------------------------------------------------------
    def _window(self, figure: str, q: float | None) -> RankWindow:
        """A window of the known values of ``figure`` over the retained history that holds
        the ranks of the ``q``-th percentile (every value when ``q`` is None).

        Cached per figure and brought up to date incrementally: values of new records are
        counted in and those of evicted records (still physically present until the next
        compaction) counted out. Only a first query, a query whose ranks drifted out of the
        window, a compaction, a rollback or a burst of evictions builds a new one, and for a
        percentile that is an exact selection in two passes, not a full sort.
        """
        if figure not in FIGURES:
            raise ValueError(f"unknown figure {figure!r}; choose from {', '.join(FIGURES)}")
        h = self._history
        lo, hi = h.start, len(h.lid)
        version = (h.compactions, self._truncations)
        cached = self._windows.get(figure)
        window = None
        if cached is not None and cached[3] == version:
            window, old_lo, old_hi = cached[0], cached[1], cached[2]
            new_lo = max(lo, old_hi)  # records appended and evicted since were never counted in
            if lo - old_lo > _MAX_INCREMENTAL_REMOVALS or (
                not window.complete and (hi - new_lo) * _NEW_FRACTION_REBUILDS > hi - lo
            ):
                window = None
            else:
                if lo > old_lo:
                    window.remove(h.values(figure, old_lo, min(lo, old_hi)))
                if hi > new_lo:
                    window.add(h.values(figure, new_lo, hi))
        if window is None or not window.covers(q):
            window = RankWindow.around(h.values(figure, lo, hi), q)
        self._windows[figure] = (window, lo, hi, version)
        return window

    def percentile(self, figure: str, q: float) -> float | None:
        """The ``q``-th percentile (0..100) of ``figure`` over the retained history."""
        check_percentile(q)
        with self._loaded():
            return self._window(figure, q).percentile(q)

    def statistics(self) -> dict[str, ClassStats]:
        """Count, sum, mean, min, max and p50/p90/p95/p99 of every figure (retained history)."""
        with self._loaded():
            return {figure: class_stats(self._window(figure, None).values) for figure in FIGURES}

    def cost_by_model(self) -> dict[str | None, float]:
        """USD per model over the whole current timeline (exact, evicted requests included)."""
        with self._loaded():
            return {m: c / COST_SCALE for m, (c, n) in self._model_cost.items() if n > 0}

    def totals_between(self, start: float | None = None, end: float | None = None) -> UsageTotals:
        """Totals of the requests with ``start <= timestamp < end`` (None: unbounded)."""
        lo = -math.inf if start is None else start
        hi = math.inf if end is None else end
        with self._loaded():
            if self._evicted and lo <= self._evicted_last_ts:
                raise HistoryEvictedError(
                    "the range reaches into evicted history; its total would be wrong "
                    f"(max_history={self.max_history})"
                )
            h = self._history
            acc = TotalsAccumulator()
            ts = h.ts
            for phys in h.positions():
                if lo <= ts[phys] < hi:
                    acc.add(scaled_values(h.usage(phys), h.amount(h.cost, phys)))
            return acc.freeze()

    def top(self, n: int = 10, by: str = "cost_usd") -> list[UsageRecord]:
        """The ``n`` retained requests with the largest ``by`` (unknown values excluded)."""
        if by not in FIGURES:
            raise ValueError(f"unknown figure {by!r}; choose from {', '.join(FIGURES)}")
        with self._loaded():
            h = self._history
            keyed = []
            for p in range(len(h)):
                value = h.figure(h.physical(p), by)
                if value is not None:
                    keyed.append((value, p))
            return [self._record(p) for _, p in heapq.nlargest(n, keyed)]

    # -- persistence ----------------------------------------------------------------------
    @property
    def path(self) -> str | None:
        """The SQLite file this ledger persists to, if any."""
        return self._store.path if self._store is not None else None

    def recorded(self, request_id: str) -> bool:
        """A row with this request id is in the ledger's file (any ledger of it); False
        without a file (this process's own rows are the caller's to remember)."""
        if self._store is None:
            return False
        return self._store.has_request(request_id)

    @property
    def pending_writes(self) -> int:
        """Records and rollbacks kept in memory because the file could not be written yet."""
        with self._lock:
            return len(self._pending) + len(self._pending_deactivate)

    def flush(self) -> None:
        """Write whatever a failed write left pending; raises if the file is still unusable."""
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if self._recent:  # the rows' history positions are where their row ids go
            self._fold_locked()
        if self._store is None or not (self._pending or self._pending_deactivate):
            return
        lids = list(self._pending)
        rowids = self._store.write(list(self._pending.values()), self._pending_deactivate)
        h = self._history
        for lid, rowid in zip(lids, rowids):
            position = h.find_lid(lid)
            if position is not None:
                h.rowid[h.physical(position)] = rowid
        self._pending.clear()
        self._pending_deactivate = []

    # -- a dormant agent's ledger (in memory) ----------------------------------------------------
    def dormant_totals(self) -> tuple[Any, ...]:
        """What an in-memory ledger keeps when its agent goes dormant: the totals, cost by
        model and the newest timestamp (the records themselves are dropped)."""
        with self._lock:
            self._fold_locked()
            h = self._history
            newest = max((h.ts[p] for p in h.positions()), default=self._evicted_last_ts)
            return (
                _packed(self._cumulative),
                _packed(self._discarded),
                tuple((m, c, n) for m, (c, n) in self._model_cost.items()),
                newest,
            )

    def restore_totals(self, kept: tuple[Any, ...]) -> None:
        """Start from :meth:`dormant_totals`: its requests count as evicted history."""
        with self._lock:
            self._fold_locked()
            _unpack(self._cumulative, kept[0])
            _unpack(self._discarded, kept[1])
            self._model_cost = {m: [c, n] for m, c, n in kept[2]}
            self._evicted = self._cumulative.requests
            self._evicted_last_ts = kept[3]
            self._evicted_last_lid = self._evicted
            self._next_lid = self._evicted + 1

    def _loaded(self) -> _Loaded:
        """The lock, with the file's rows read first when they have not been yet."""
        return _Loaded(self)

    def _load_locked(self) -> None:
        """Rebuild memory from the file: totals of what is not kept in memory by SQL
        aggregates, the ``max_history`` newest active rows as the history; then what this
        process recorded but could not write yet, on top."""
        store = self._store
        assert store is not None
        unwritten = list(self._pending.values())
        self._reset_memory()
        newest = list(store.load(self.max_history))
        first = newest[0][0] if newest else None
        evicted = store.totals(True, first)
        if first is not None or evicted is None or evicted[0]:
            self._add_evicted(store, first, evicted)
        discarded = store.totals(False)
        if discarded is None:
            for row in store.rows(False):
                self._discarded.add(scaled_values(self._usage_of(row, "?"), row[10]))
        else:
            _add_sums(self._discarded, discarded)
        self._next_lid = self._evicted + 1
        self._evicted_last_lid = self._evicted
        for rowid, row in newest:
            self._restore_row(rowid, row)
        for row in unwritten:
            self._restore_row(-1, row[:15], persist=row)
        self._fold_locked()
        self._unread = False

    def _reset_memory(self) -> None:
        self._history = History()
        self._recent = []
        self._cumulative, self._discarded = TotalsAccumulator(), TotalsAccumulator()
        self._evicted, self._evicted_last_ts, self._evicted_last_lid = 0, -math.inf, 0
        self._model_cost = {}
        self._pending = {}
        self._windows = {}
        self._truncations += 1

    def _add_evicted(self, store: Any, first: int | None, sums: list[Any] | None) -> None:
        """Active rows older than the history kept in memory: in the totals only."""
        if sums is None:  # past 64-bit sums: row by row
            for row in store.rows(True, first):
                self._cumulative.add(scaled_values(self._usage_of(row, "?"), row[10]))
                self._evicted += 1
        else:
            _add_sums(self._cumulative, sums)
            self._evicted = sums[0]
        for model, cost, priced in store.cost_by_model(first):
            if priced:
                self._model_cost[model] = [cost, priced]
        if self._evicted and first is not None:
            self._evicted_last_ts = store.newest_ts(first)

    def _usage_of(self, row: Any, rowid: Any) -> Usage:
        source = row[4]
        if source not in USAGE_SOURCES:
            raise LedgerPersistenceError(
                f"usage ledger {self.path!r}: row {rowid} has unknown source {source!r}"
            )
        try:
            return Usage(
                input_tokens=row[5],
                output_tokens=row[6],
                cache_read_tokens=row[7],
                cache_write_tokens=row[8],
                reasoning_tokens=row[9],
                premium_requests=row[11],
                model=row[2],
                provider=row[3],
                source=source,
            )
        except ValueError as exc:
            raise LedgerPersistenceError(
                f"usage ledger {self.path!r}: row {rowid} is invalid: {exc}"
            ) from None

    def _restore_row(self, rowid: int, row: Any, persist: list[Any] | None = None) -> None:
        usage = self._usage_of(row, rowid)
        try:
            cost = check_amount("cost_usd", row[10])
        except ValueError as exc:
            raise LedgerPersistenceError(
                f"usage ledger {self.path!r}: row {rowid} is invalid: {exc}"
            ) from None
        self._append_locked(
            usage,
            cost,
            row[1],
            row[0],
            _as_id(row[12], 128, "trace_id"),
            _as_id(row[13], 64, "span_id"),
            rowid=rowid,
            persist=False,
        )
        if persist is not None:  # recorded by this process, not written yet: still pending
            self._pending[self._next_lid - 1] = persist

    def close(self) -> None:
        """Write anything pending and close the file (idempotent); a no-op in memory."""
        with self._lock:
            if self._store is not None:
                try:
                    self._flush_locked()
                finally:
                    self._store.close()
                    self._store = None

    def __enter__(self) -> UsageLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = f", path={self.path!r}" if self._store is not None else ""
        return f"<UsageLedger {self.name!r}: {len(self)} records, {self._evicted} evicted{where}>"


def _packed(acc: TotalsAccumulator) -> tuple[int, ...]:
    return (acc.requests, *acc.sums, *acc.known)


def _unpack(acc: TotalsAccumulator, packed: tuple[int, ...]) -> None:
    acc.requests, acc.sums, acc.known = packed[0], list(packed[1:8]), list(packed[8:15])


def _add_sums(acc: TotalsAccumulator, sums: list[Any]) -> None:
    """Add an SQL aggregate row (:meth:`SqliteStore.totals`) to ``acc``."""
    acc.requests += sums[0]
    for i in range(7):
        acc.sums[i] += sums[1 + 2 * i] or 0
        acc.known[i] += sums[2 + 2 * i]


class _Loaded:
    """``with ledger._loaded():`` the ledger's lock, the file's rows read and the kept rows
    folded in first if needed."""

    __slots__ = ("_ledger",)

    def __init__(self, ledger: UsageLedger) -> None:
        self._ledger = ledger

    def __enter__(self) -> None:
        ledger = self._ledger
        ledger._lock.acquire()
        try:
            if ledger._unread and ledger._store is not None:
                ledger._load_locked()
            if ledger._recent:
                ledger._fold_locked()
        except BaseException:
            ledger._lock.release()
            raise

    def __exit__(self, *exc: object) -> None:
        self._ledger._lock.release()
