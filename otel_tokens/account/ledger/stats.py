"""Distribution statistics: percentiles by linear interpolation, exact rank selection.

A percentile needs one or two ranks of the values, not all of them in order. :class:`RankWindow`
keeps only the sorted values around the ranks asked for, plus how many values lie below and
above them, so a first percentile query over a long history costs two linear passes instead
of a full sort, and later queries only fold in the values added or removed since.
"""

from __future__ import annotations

import bisect
import math
from typing import Iterable, Sequence

from .records import ClassStats

__all__ = ["PERCENTILES", "RankWindow", "check_percentile", "class_stats", "percentile"]

PERCENTILES = (50, 90, 95, 99)

#: Every this-many-th value goes into the sample that places a window (odd and prime, so a
#: history that repeats with a short period does not line up with it).
_SAMPLE_STRIDE = 31
#: Up to this many values a plain sort is about as fast as selecting, so it is used.
_SORT_UP_TO = 4096
#: Sampling error allowed for, in standard deviations of a sample quantile.
_MARGIN_SIGMAS = 4.0
_INF = math.inf


def check_percentile(q: float) -> None:
    """Raise ValueError unless ``q`` is a percentile between 0 and 100."""
    if not 0 <= q <= 100 or q != q:
        raise ValueError(f"percentile must be between 0 and 100, got {q!r}")


def _ranks(n: int, q: float) -> tuple[int, int, float]:
    """The two adjacent ranks (0-based) the ``q``-th percentile of ``n`` values interpolates
    between, and the weight of the upper one."""
    rank = (n - 1) * q / 100.0
    lo = math.floor(rank)
    return lo, min(lo + 1, n - 1), rank - lo


def _interpolate(a: float, b: float, frac: float) -> float:
    return a + (b - a) * frac if frac else a


def percentile(sorted_values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) of ascending values, interpolating between ranks.

    Same definition as NumPy's default (``linear``) and ``statistics.quantiles(...,
    method="inclusive")``; None for no values.
    """
    check_percentile(q)
    n = len(sorted_values)
    if n == 0:
        return None
    lo, hi, frac = _ranks(n, q)
    return _interpolate(sorted_values[lo], sorted_values[hi], frac)


class RankWindow:
    """The ascending values between ``low`` and ``high`` (inclusive) of a multiset, with the
    counts of its values below and above them: enough to answer any rank inside the window.

    A window with infinite bounds holds every value in order. Values are added and removed
    as the history changes; ranks that drift outside the window need a new one (``covers``).
    """

    __slots__ = ("values", "low", "high", "below", "above")

    def __init__(
        self, values: list, low: float = -_INF, high: float = _INF, below: int = 0, above: int = 0
    ) -> None:
        self.values = values  # ascending
        self.low = low
        self.high = high
        self.below = below
        self.above = above

    @classmethod
    def around(cls, values: list, q: float | None) -> RankWindow:
        """A window over ``values`` (any order; not modified) holding the ranks of the
        ``q``-th percentile, or every value when ``q`` is None.

        A sorted sample of every ``_SAMPLE_STRIDE``-th value places bounds a few sampling
        errors either side of the ranks; one or two passes collect the values between them
        and count the rest. Exact whatever the sample says: when the counts show the ranks
        fell outside the bounds (a history shaped against the sample), it sorts everything.
        """
        n = len(values)
        if q is not None and n > _SORT_UP_TO:
            first, last, _ = _ranks(n, q)
            sample = values[::_SAMPLE_STRIDE]
            sample.sort()
            m = len(sample)
            p = first / n
            margin = int(_MARGIN_SIGMAS * math.sqrt(m * p * (1.0 - p))) + 2
            j_lo = first // _SAMPLE_STRIDE - margin
            j_hi = last // _SAMPLE_STRIDE + margin + 1
            low = sample[j_lo] if j_lo > 0 else -_INF
            high = sample[j_hi] if j_hi < m else _INF
            if high == _INF:
                window = [v for v in values if v >= low]
                below, above = n - len(window), 0
            elif low == -_INF:
                window = [v for v in values if v <= high]
                below, above = 0, n - len(window)
            elif 2 * first >= n:  # the first pass keeps the smaller side
                upper = [v for v in values if v >= low]
                window = [v for v in upper if v <= high]
                below, above = n - len(upper), len(upper) - len(window)
            else:
                lower = [v for v in values if v <= high]
                window = [v for v in lower if v >= low]
                below, above = len(lower) - len(window), n - len(lower)
            if below <= first and last < below + len(window):
                window.sort()
                return cls(window, low, high, below, above)
        return cls(sorted(values))

    def __len__(self) -> int:
        """How many values the multiset holds (inside the window or not)."""
        return self.below + len(self.values) + self.above

    @property
    def complete(self) -> bool:
        """Whether the window holds every value."""
        return self.low == -_INF and self.high == _INF

    def covers(self, q: float | None) -> bool:
        """Whether the ranks of the ``q``-th percentile (every rank when None) are inside."""
        if q is None:
            return self.complete
        n = len(self)
        if n == 0:
            return True
        first, last, _ = _ranks(n, q)
        return self.below <= first and last < self.below + len(self.values)

    def percentile(self, q: float) -> float | None:
        """The ``q``-th percentile, which :meth:`covers` must hold; None for no values."""
        n = len(self)
        if n == 0:
            return None
        first, last, frac = _ranks(n, q)
        values, below = self.values, self.below
        return _interpolate(values[first - below], values[last - below], frac)

    def add(self, new: Iterable[float]) -> None:
        """Count new values in (the ones inside the bounds are merged in order)."""
        if self.complete:
            inside = list(new)
        else:
            low, high = self.low, self.high
            inside = []
            for v in new:
                if v < low:
                    self.below += 1
                elif v > high:
                    self.above += 1
                else:
                    inside.append(v)
        if inside:
            self.values += inside
            self.values.sort()  # two sorted runs: Timsort merges them in linear time

    def remove(self, old: Iterable[float]) -> None:
        """Take out values the multiset holds (evicted ones)."""
        values, low, high = self.values, self.low, self.high
        for v in old:
            if v < low:
                self.below -= 1
            elif v > high:
                self.above -= 1
            else:
                del values[bisect.bisect_left(values, v)]


def class_stats(sorted_values: Sequence[float]) -> ClassStats:
    """Count, sum, mean, min, max and p50/p90/p95/p99 of ascending values."""
    n = len(sorted_values)
    if n == 0:
        return ClassStats(0, 0, None, None, None, None, None, None, None)
    total = math.fsum(sorted_values) if isinstance(sorted_values[0], float) else sum(sorted_values)
    p50, p90, p95, p99 = (percentile(sorted_values, q) for q in PERCENTILES)
    return ClassStats(
        count=n,
        sum=total,
        mean=total / n,
        min=sorted_values[0],
        max=sorted_values[-1],
        p50=p50,
        p90=p90,
        p95=p95,
        p99=p99,
    )
