"""Values the ledger hands out: one request's record, totals, checkpoints, statistics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...usage import Usage, UsageSource

__all__ = ["Checkpoint", "ClassStats", "TotalsAccumulator", "UsageRecord", "UsageTotals"]

#: Cost and premium requests are summed as integers in these units, so that adding and then
#: removing (rollback, eviction) records gives back exactly the total it started from.
COST_SCALE = 10**12  # picodollars
PREMIUM_SCALE = 10**9


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """One finalized request in a ledger's history."""

    index: int  # position in the ledger's timeline, counting evicted records
    request_id: str
    timestamp: float  # seconds since the epoch
    model: str | None
    provider: str | None
    source: UsageSource
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    reasoning_tokens: int | None
    cost_usd: float | None
    premium_requests: float | None
    trace_id: str | None  # 32 hex digits, as OpenTelemetry prints it
    span_id: str | None  # 16 hex digits

    @property
    def total_tokens(self) -> int | None:
        """Input plus output (None when both are unknown)."""
        return self.usage.total_tokens

    @property
    def usage(self) -> Usage:
        """The record's figures as a :class:`Usage` (cost here may be a computed one)."""
        return Usage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cache_read_tokens=self.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens,
            premium_requests=self.premium_requests,
            cost_usd=self.cost_usd,
            model=self.model,
            provider=self.provider,
            source=self.source,
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of every field (JSON-ready)."""
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class UsageTotals:
    """Sums over a set of requests; a class no request reported stays None, never 0."""

    requests: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost_usd: float | None = None
    premium_requests: float | None = None

    @property
    def total_tokens(self) -> int | None:
        """Input plus output (None when neither was ever reported)."""
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of every field (JSON-ready)."""
        return {name: getattr(self, name) for name in self.__slots__}


class TotalsAccumulator:
    """Exact running sums with known-counts, so None-ness and rollbacks stay right.

    Token sums are ints; cost and premium requests are kept as scaled ints
    (:data:`COST_SCALE`, :data:`PREMIUM_SCALE`) so subtraction is exact.
    """

    __slots__ = ("requests", "sums", "known")

    def __init__(self) -> None:
        self.requests = 0
        # five token classes, then cost (scaled), then premium requests (scaled)
        self.sums = [0, 0, 0, 0, 0, 0, 0]
        self.known = [0, 0, 0, 0, 0, 0, 0]

    def add(self, values: tuple[int | None, ...], sign: int = 1) -> None:
        """Add (sign=1) or remove (sign=-1) one request given as 7 scaled values (None=unknown)."""
        self.requests += sign
        sums, known = self.sums, self.known
        i, o, cr, cw, r, c, p = values
        if i is not None:
            sums[0] += sign * i
            known[0] += sign
        if o is not None:
            sums[1] += sign * o
            known[1] += sign
        if cr is not None:
            sums[2] += sign * cr
            known[2] += sign
        if cw is not None:
            sums[3] += sign * cw
            known[3] += sign
        if r is not None:
            sums[4] += sign * r
            known[4] += sign
        if c is not None:
            sums[5] += sign * c
            known[5] += sign
        if p is not None:
            sums[6] += sign * p
            known[6] += sign

    def add_columns(self, n: int, sums: list[int], unknown: list[int]) -> None:
        """Add ``n`` requests given as :func:`column_totals` of their 7 scaled values."""
        self.requests += n
        total, known = self.sums, self.known
        for k in range(7):
            if unknown[k] < n:
                total[k] += sums[k]
                known[k] += n - unknown[k]

    def merge(self, other: TotalsAccumulator, sign: int = 1) -> None:
        """Add or remove everything ``other`` holds."""
        self.requests += sign * other.requests
        for i in range(7):
            self.sums[i] += sign * other.sums[i]
            self.known[i] += sign * other.known[i]

    def copy(self) -> TotalsAccumulator:
        """An independent copy."""
        new = TotalsAccumulator()
        new.merge(self)
        return new

    def freeze(self) -> UsageTotals:
        """The public, immutable view."""
        s, k = self.sums, self.known
        return UsageTotals(
            requests=self.requests,
            input_tokens=s[0] if k[0] else None,
            output_tokens=s[1] if k[1] else None,
            cache_read_tokens=s[2] if k[2] else None,
            cache_write_tokens=s[3] if k[3] else None,
            reasoning_tokens=s[4] if k[4] else None,
            cost_usd=s[5] / COST_SCALE if k[5] else None,
            premium_requests=s[6] / PREMIUM_SCALE if k[6] else None,
        )


def column_totals(
    columns: tuple[tuple[int | None, ...], ...], n: int
) -> tuple[list[int], list[int]]:
    """(the sum of each column's known values, how many it holds unknown) of ``n`` requests'
    scaled values (:meth:`TotalsAccumulator.add_columns`): a column usually has no None, and
    then one sum counts it, no compare per value."""
    sums, unknown = [], []
    for column in columns:
        if column[0] is not None:
            try:
                sums.append(sum(column))
                unknown.append(0)
                continue
            except TypeError:  # a None among them
                pass
        missing = column.count(None)
        sums.append(sum(filter(None, column)) if missing < n else 0)  # None, zeros skipped
        unknown.append(missing)
    return sums, unknown


def scaled_values(usage: Usage, cost_usd: float | None) -> tuple[int | None, ...]:
    """The 7 values a :class:`TotalsAccumulator` adds for one request."""
    premium = usage.premium_requests
    return (
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        usage.reasoning_tokens,
        None if cost_usd is None else round(cost_usd * COST_SCALE),
        None if premium is None else round(premium * PREMIUM_SCALE),
    )


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Opaque restore point returned by :meth:`UsageLedger.checkpoint`."""

    _ledger_id: int
    _last_lid: int  # local id of the newest record of the timeline then, 0 if it was empty


@dataclass(frozen=True, slots=True)
class ClassStats:
    """Distribution of one figure (a token class, total tokens or cost) over requests."""

    count: int
    sum: float
    mean: float | None
    min: float | None
    max: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of every field (JSON-ready)."""
        return {name: getattr(self, name) for name in self.__slots__}
