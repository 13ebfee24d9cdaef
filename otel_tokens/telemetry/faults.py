"""Faults inside otel_tokens: caught, logged once per kind, counted, never raised to the host.

Kinds used across the project (``otel_tokens.error.kind``): ``usage_invalid`` (a backend sent
usage values that are not token counts), ``usage_missing``, ``pricing``, ``estimate``,
``state``, ``ledger``, ``ledger_persistence``, ``span``, ``metrics``, ``callback``,
``parse``, ``internal``.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

_log = logging.getLogger("otel_tokens")

__all__ = ["Faults"]


class Faults:
    """Counts faults on ``otel_tokens.instrumentation.errors`` and logs the first of each kind."""

    def __init__(self) -> None:
        self._counter: Any = None
        self._logged: set[str] = set()
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {}

    def bind(self, counter: Any) -> None:
        """Attach the ``otel_tokens.instrumentation.errors`` sums (a ``CounterSums``)."""
        self._counter = counter

    def report(self, kind: str, exc: BaseException | None = None, detail: str = "") -> None:
        """Record one fault of ``kind``; safe to call from anywhere, never raises."""
        try:
            with self._lock:
                self.counts[kind] = self.counts.get(kind, 0) + 1
                first = kind not in self._logged
                self._logged.add(kind)
            if first:
                what = detail or (f"{type(exc).__name__}: {exc}" if exc is not None else kind)
                _log.warning(
                    "otel_tokens: %s fault (%s); the host call is unaffected. Further %s faults "
                    "are only counted in otel_tokens.instrumentation.errors.",
                    kind, what, kind, exc_info=exc if kind == "internal" else None,
                )  # fmt: skip
            if self._counter is not None:
                self._counter.add(1, (("otel_tokens.error.kind", kind),))
        except Exception:  # the error counter itself failing must not escape either
            pass
