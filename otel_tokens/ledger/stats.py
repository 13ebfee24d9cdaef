"""Distribution statistics over sorted values (percentiles by linear interpolation)."""

from __future__ import annotations

import math
from typing import Sequence

from .records import ClassStats

__all__ = ["PERCENTILES", "class_stats", "percentile"]

PERCENTILES = (50, 90, 95, 99)


def percentile(sorted_values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) of ascending values, interpolating between ranks.

    Same definition as NumPy's default (``linear``) and ``statistics.quantiles(...,
    method="inclusive")``; None for no values.
    """
    if not 0 <= q <= 100 or q != q:
        raise ValueError(f"percentile must be between 0 and 100, got {q!r}")
    n = len(sorted_values)
    if n == 0:
        return None
    rank = (n - 1) * q / 100.0
    lo = math.floor(rank)
    hi = min(lo + 1, n - 1)
    frac = rank - lo
    a, b = sorted_values[lo], sorted_values[hi]
    return a + (b - a) * frac if frac else a


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
