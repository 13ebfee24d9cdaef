"""Running sums behind the contract's counters: asynchronous counters over in-process sums.

Why not plain synchronous counters: with the OpenTelemetry SDK (1.45), each ``Counter.add``
validates and hashes its attribute set, and a call adds up to seven amounts (five token
classes, cost, premium requests). Measured with ``benchmarks/instructions.py`` (2026-11-28),
plain counters took a call to 2.18x the official instrumentation's added cost, these sums
1.44x over two hash seeds (budget: 1.45x); figures in ``docs/benchmarks.md``. A call adds
each amount to its attribute set's :class:`Sum` under the counter's lock; the recorder keeps
the ``Sum`` objects with the label sets it keeps, so a call does not look its attribute tuples
up again (measured in ``docs/benchmarks.md``, "What stays fast"). The SDK turns the
sums into cumulative points at each collection (names, units, attributes and values are a
synchronous counter's). A forked child starts from zero (:func:`reset_all`, from
``process.py``); tests: ``tests/telemetry/test_counters.py``.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from opentelemetry.metrics import Observation

from .. import faults

__all__ = ["CounterSums", "Sum", "reset_all"]

AttributeKey = tuple  # ((name, value), ...): a hashable attribute set
INT64_MAX = 2**63 - 1  # the most OTLP and Prometheus can carry


class Sum:
    """One attribute set's running sum of a counter (None: nothing added since the process
    started, or since the fork it is in: no point)."""

    __slots__ = ("_owner", "value")

    def __init__(self, owner: CounterSums) -> None:
        self._owner = owner
        self.value: float | None = None

    def add(self, amount: float) -> None:
        """Add ``amount`` (>= 0; 0 makes a point)."""
        with self._owner._lock:
            value = self.value
            self.value = amount if value is None else value + amount


class CounterSums:
    """One counter's running sums, per attribute set; ``observe`` is its SDK callback."""

    __slots__ = ("__weakref__", "_held", "_lock", "_sums")

    def __init__(self) -> None:
        self._sums: dict[AttributeKey, Sum] = {}
        self._lock = threading.Lock()
        self._held: set[AttributeKey] = set()  # sums held at the int64 limit (reported once)
        _every.add(self)

    def sum(self, key: AttributeKey) -> Sum:
        """The running sum of attribute set ``key`` (made on the first ask; the same after)."""
        found = self._sums.get(key)
        if found is None:
            with self._lock:
                found = self._sums.setdefault(key, Sum(self))
        return found

    def add(self, amount: float, key: AttributeKey) -> None:
        """Add ``amount`` (>= 0; 0 makes a point) to the sum of attribute set ``key``."""
        self.sum(key).add(amount)

    def reset(self) -> None:
        """Every sum back to none, under a new lock (a forked child: the parent's lock may have
        been held by a thread the child does not have). The :class:`Sum` objects stay (a
        recorder keeps them): each counts the child's own amounts from here."""
        self._lock = threading.Lock()
        for found in self._sums.values():
            found.value = None
        self._held = set()

    def observe(self, options: Any = None) -> list[Observation]:
        """One cumulative point per attribute set added to. A sum past int64 would fail every
        later export of the process: it is held at the limit and reported once."""
        with self._lock:
            items = [(key, found.value) for key, found in self._sums.items()]
        points = []
        for key, value in items:
            if value is None:
                continue
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
