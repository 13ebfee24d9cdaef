"""Running sums behind the contract's counters: asynchronous counters over in-process sums.

Why not plain synchronous counters: with the OpenTelemetry SDK (1.45), each ``Counter.add``
validates and hashes its attribute set, and a call adds up to seven amounts (five token
classes, cost, premium requests). Measured with ``benchmarks/instructions.py`` (2026-11-28),
plain counters took a call to 2.18x the official instrumentation's added cost, these sums
1.44x over two hash seeds (budget: 1.45x); figures in ``docs/benchmarks.md``. A call adds
each amount to a sum under one lock, keyed by an attribute tuple the recorder keeps per label
set; the SDK turns the sums into cumulative points at each collection (names, units,
attributes and values are a synchronous counter's). A forked child starts from zero
(:func:`reset_all`, from ``process.py``); tests: ``tests/telemetry/test_counters.py``.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from opentelemetry.metrics import Observation

from .. import faults

__all__ = ["CounterSums", "reset_all"]

AttributeKey = tuple  # ((name, value), ...): a hashable attribute set
INT64_MAX = 2**63 - 1  # the most OTLP and Prometheus can carry


class CounterSums:
    """One counter's running sums, per attribute set; ``observe`` is its SDK callback."""

    __slots__ = ("__weakref__", "_held", "_lock", "_sums")

    def __init__(self) -> None:
        self._sums: dict[AttributeKey, float] = {}
        self._lock = threading.Lock()
        self._held: set[AttributeKey] = set()  # sums held at the int64 limit (reported once)
        _every.add(self)

    def add(self, amount: float, key: AttributeKey) -> None:
        """Add ``amount`` (>= 0; 0 makes a point) to the sum of attribute set ``key``."""
        with self._lock:
            self._sums[key] = self._sums.get(key, 0) + amount

    def reset(self) -> None:
        """Back to no sums, under a new lock (a forked child: the parent's lock may have been
        held by a thread the child does not have)."""
        self._lock = threading.Lock()
        self._sums = {}
        self._held = set()

    def observe(self, options: Any = None) -> list[Observation]:
        """One cumulative point per attribute set. A sum past int64 would fail every later
        export of the process: it is held at the limit and reported once."""
        with self._lock:
            items = list(self._sums.items())
        points = []
        for key, value in items:
            if value > INT64_MAX:
                if key not in self._held:
                    self._held.add(key)
                    detail = "a cumulative sum reached the int64 limit: held there"
                    faults.report("metrics", detail=detail)
                value = INT64_MAX
            points.append(Observation(value, dict(key)))
        return points


_every: weakref.WeakSet[CounterSums] = weakref.WeakSet()


def reset_all() -> None:
    """Every counter's sums back to zero (a forked child's counts are its own)."""
    for sums in list(_every):
        sums.reset()
