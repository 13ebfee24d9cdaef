"""Columnar, bounded request history: the ledger's memory-lean storage.

One ``array`` per field instead of one object per request keeps a record near 150 bytes
(the seed's design stores full objects, several times that). Labels (model, provider,
source) are interned to small integer codes. Unknown token counts are stored as -1 and
unknown amounts as NaN; both read back as None.

The ledger owns the lock: nothing here is thread-safe on its own.
"""

from __future__ import annotations

import math
import sys
from array import array
from itertools import repeat
from struct import pack
from typing import Any, Iterable, Iterator

from ...usage import TOKEN_CLASSES, USAGE_SOURCES, Usage
from .records import UsageRecord

__all__ = ["History"]

_NAN = math.nan
_SOURCE_CODES = {name: code for code, name in enumerate(USAGE_SOURCES)}
_COMPACT_AFTER = 4096  # physical slots freed at the front before the arrays are compacted
#: trace ids are split into (low, high) 64-bit halves by one conversion each: their 16 bytes,
#: little-endian, read as two native 64-bit words (swapped back on a big-endian machine)
_SWAP = sys.byteorder != "little"


def _column(typecode: str, values: tuple[Any, ...], missing: Any, unknown: int) -> array:
    """``values`` as an array, None (``unknown`` of them) stored as ``missing``; at C speed
    when none or all of them are None (a column usually is one or the other: a token class a
    model reports, or premium requests of a provider that bills none)."""
    n = len(values)
    if not unknown:
        return _array(typecode, values, n)
    if unknown == n:
        return array(typecode, (missing,)) * n
    return _array(typecode, [missing if v is None else v for v in values], n)


def _same(values: tuple[Any, ...]) -> bool:
    """Whether every value is the first (a fold's usual model, provider, source and row id):
    its column is then one value repeated, one compare a value and no conversion each."""
    return values.count(values[0]) == len(values)


def _array(typecode: str, values: Iterable[Any], n: int) -> array:
    """An array of ``n`` values, packed by :mod:`struct` in one call (``array(typecode,
    values)`` parses every item on its own, at twice the cost); native sizes, as array's."""
    return array(typecode, pack(f"{n}{typecode}", *values))


class History:
    """Append-at-end, evict-at-front, truncate-at-end storage of finalized requests."""

    def __init__(self) -> None:
        self.lid = array("q")  # local id, strictly increasing with position
        self.ts = array("d")
        self.tokens = tuple(array("q") for _ in range(5))
        self.cost = array("d")
        self.premium = array("d")
        self.model = array("i")
        self.provider = array("i")
        self.source = array("b")
        self.trace_hi = array("Q")
        self.trace_lo = array("Q")
        self.span = array("Q")
        self.rowid = array("q")  # SQLite row id once persisted, else -1
        self.request_ids: list[str | None] = []  # None: derived from the ledger prefix and lid
        self._start = 0  # physical index of the oldest retained record
        self.compactions = 0  # bumps when physical indexes shift (caches keyed on them reset)
        self.labels: list[str | None] = [None]
        self._label_codes: dict[str | None, int] = {None: 0}
        self._columns = (
            self.lid,
            self.ts,
            *self.tokens,
            self.cost,
            self.premium,
            self.model,
            self.provider,
            self.source,
            self.trace_hi,
            self.trace_lo,
            self.span,
            self.rowid,
        )

    def __len__(self) -> int:
        return len(self.lid) - self._start

    def code(self, label: str | None) -> int:
        """Interned code of a model/provider label."""
        code = self._label_codes.get(label)
        if code is None:
            code = self._label_codes[label] = len(self.labels)
            self.labels.append(label)
        return code

    def extend(
        self,
        lid: tuple[int, ...],
        ts: tuple[float, ...],
        tokens: tuple[tuple[int | None, ...], ...],
        cost: tuple[float | None, ...],
        premium: tuple[float | None, ...],
        model: tuple[str | None, ...],
        provider: tuple[str | None, ...],
        source: tuple[str, ...],
        trace_id: tuple[int, ...],
        span_id: tuple[int, ...],
        request_id: tuple[str | None, ...],
        rowid: tuple[int, ...],
        unknown: tuple[int, ...],
    ) -> None:
        """Store records at the end, given as one tuple per field. Every column is converted
        before any is extended, so a value that does not fit leaves the history as it was.
        ``unknown``: how many of each token class, cost and premium are None."""
        n = len(lid)
        traces = array("Q", b"".join(map(int.to_bytes, trace_id, repeat(16), repeat("little"))))
        if _SWAP:
            traces.byteswap()
        new = (
            _array("q", lid, n),
            _array("d", ts, n),
            *(_column("q", c, -1, k) for c, k in zip(tokens, unknown)),
            _column("d", cost, _NAN, unknown[5]),
            _column("d", premium, _NAN, unknown[6]),
            self._codes(model),
            self._codes(provider),
            array("b", (_SOURCE_CODES[source[0]],)) * n
            if _same(source)
            else _array("b", map(_SOURCE_CODES.__getitem__, source), n),
            traces[1::2],
            traces[::2],
            _array("Q", span_id, n),
            array("q", rowid[:1]) * n if _same(rowid) else _array("q", rowid, n),
        )
        for column, values in zip(self._columns, new):
            column.extend(values)
        self.request_ids.extend(request_id)

    def _codes(self, labels: tuple[str | None, ...]) -> array:
        """The labels' interned codes; new labels (rarely any) coded in order of first use.
        Usually one label (one model, one provider): its code repeated."""
        codes = self._label_codes
        first = labels[0]
        if first in codes and _same(labels):
            return array("i", (codes[first],)) * len(labels)
        try:
            return _array("i", map(codes.__getitem__, labels), len(labels))
        except KeyError:
            for label in labels:
                if label not in codes:
                    self.code(label)
            return _array("i", map(codes.__getitem__, labels), len(labels))

    def physical(self, position: int) -> int:
        """Array index of the record at ``position`` (0 = oldest retained)."""
        return self._start + position

    def token(self, column: int, phys: int) -> int | None:
        """Token count of one class at a physical index (None when unknown)."""
        v = self.tokens[column][phys]
        return None if v < 0 else v

    def amount(self, arr: array, phys: int) -> float | None:
        """Cost or premium requests at a physical index (None when unknown)."""
        v = arr[phys]
        return None if v != v else v

    def usage(self, phys: int) -> Usage:
        """The figures stored at a physical index, as a Usage (to re-add them to totals)."""
        return Usage(
            input_tokens=self.token(0, phys),
            output_tokens=self.token(1, phys),
            cache_read_tokens=self.token(2, phys),
            cache_write_tokens=self.token(3, phys),
            reasoning_tokens=self.token(4, phys),
            premium_requests=self.amount(self.premium, phys),
        )

    def record(self, position: int, index: int, id_prefix: str) -> UsageRecord:
        """Materialize the record at ``position`` as an immutable :class:`UsageRecord`."""
        p = self._start + position
        rid = self.request_ids[p]
        hi, lo, span = self.trace_hi[p], self.trace_lo[p], self.span[p]
        trace = (hi << 64) | lo
        return UsageRecord(
            index=index,
            request_id=rid if rid is not None else f"{id_prefix}{self.lid[p]:x}",
            timestamp=self.ts[p],
            model=self.labels[self.model[p]],
            provider=self.labels[self.provider[p]],
            source=USAGE_SOURCES[self.source[p]],  # type: ignore[arg-type]
            input_tokens=self.token(0, p),
            output_tokens=self.token(1, p),
            cache_read_tokens=self.token(2, p),
            cache_write_tokens=self.token(3, p),
            reasoning_tokens=self.token(4, p),
            cost_usd=self.amount(self.cost, p),
            premium_requests=self.amount(self.premium, p),
            trace_id=f"{trace:032x}" if trace else None,
            span_id=f"{span:016x}" if span else None,
        )

    @property
    def start(self) -> int:
        """Physical index of the oldest retained record (evicted ones stay below it until the
        next compaction)."""
        return self._start

    def positions(self, start: int = 0) -> range:
        """Physical indexes of the retained records from logical ``start`` on."""
        return range(self._start + start, len(self.lid))

    def values(self, figure: str, lo: int, hi: int) -> list:
        """Known values of ``figure`` at physical indexes ``lo..hi`` (unknown ones skipped)."""
        if figure in TOKEN_CLASSES:
            return [v for v in self.tokens[TOKEN_CLASSES.index(figure)][lo:hi] if v >= 0]
        if figure == "total_tokens":
            ins, outs = self.tokens[0][lo:hi], self.tokens[1][lo:hi]
            return [
                (i if i > 0 else 0) + (o if o > 0 else 0)
                for i, o in zip(ins, outs)
                if i >= 0 or o >= 0
            ]
        if figure == "cost_usd":
            return [v for v in self.cost[lo:hi] if v == v]
        if figure == "premium_requests":
            return [v for v in self.premium[lo:hi] if v == v]
        raise ValueError(f"unknown figure {figure!r}")

    def find_lid(self, lid: int) -> int | None:
        """Logical position of the record with local id ``lid`` (binary search), or None."""
        lo, hi = self._start, len(self.lid)
        arr = self.lid
        while lo < hi:
            mid = (lo + hi) // 2
            if arr[mid] < lid:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(arr) and arr[lo] == lid:
            return lo - self._start
        return None

    def truncate(self, position: int) -> None:
        """Drop every record from logical ``position`` to the end."""
        p = self._start + position
        for col in self._columns:
            del col[p:]
        del self.request_ids[p:]

    def evict_front(self, n: int = 1) -> None:
        """Forget the ``n`` oldest records (their totals are the ledger's business)."""
        self._start += n
        if self._start >= _COMPACT_AFTER and self._start * 2 >= len(self.lid):
            s = self._start
            for col in self._columns:
                del col[:s]
            del self.request_ids[:s]
            self._start = 0
            self.compactions += 1

    def figure(self, phys: int, figure: str) -> float | None:
        """One figure (a token class, ``total_tokens``, ``cost_usd``, ``premium_requests``)."""
        if figure == "cost_usd":
            return self.amount(self.cost, phys)
        if figure == "premium_requests":
            return self.amount(self.premium, phys)
        if figure == "total_tokens":
            i, o = self.token(0, phys), self.token(1, phys)
            return None if i is None and o is None else (i or 0) + (o or 0)
        return self.token(TOKEN_CLASSES.index(figure), phys)
