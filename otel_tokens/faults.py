"""The one fault sink: every layer reports here; nothing is ever raised into the host.

A fault is logged once per kind (the first occurrence, with its reason) and counted on
``otel_tokens.instrumentation.errors{otel_tokens.error.kind}`` by the recorder bound to the
sink. Kinds used across the project: ``config`` (a bad setting), ``usage_invalid`` (usage
values that are not token counts), ``usage_missing``, ``pricing``, ``estimate``, ``state``,
``ledger``, ``ledger_persistence``, ``span``, ``metrics``, ``callback``, ``parse``,
``exporter``, ``cardinality``, ``internal``.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from .redact import redact

__all__ = ["Faults", "report", "sink"]

_log = logging.getLogger("otel_tokens")


class Faults:
    """Counts faults per kind, logs the first of each kind, feeds the bound counter."""

    def __init__(self) -> None:
        self._counter: Any = None
        self._pending: list[str] = []  # reported while no counter was bound
        self._logged: set[Any] = set()  # kinds (or (kind, detail)) already logged
        self._lock = threading.Lock()
        #: faults per kind since the current counter was bound (what it has counted)
        self.counts: dict[str, int] = {}

    def bind(self, counter: Any) -> None:
        """Feed ``counter`` (the recorder's error sums: ``add(amount, key)``) from now on;
        ``counts`` (and the once-per-kind log) start again with it. The faults reported while
        no counter was bound (bad settings at start) go to it first."""
        with self._lock:
            pending, self._pending = self._pending, []
            self._counter = counter
            self.counts = {}
            self._logged = set(pending)
            for kind in pending:
                self.counts[kind] = self.counts.get(kind, 0) + 1
        for kind in pending:
            counter.add(1, (("otel_tokens.error.kind", kind),))

    def report(
        self,
        kind: str,
        exc: BaseException | None = None,
        detail: str = "",
        *,
        log: bool = True,
        each: bool = False,
    ) -> None:
        """Record one fault of ``kind``; safe to call from anywhere, never raises.

        ``log=False``: counted only (the caller has already printed its own line);
        ``each=True``: logged once per distinct ``detail`` rather than once per kind (a wrong
        argument at each of several call sites deserves its own line)."""
        try:
            with self._lock:
                self.counts[kind] = self.counts.get(kind, 0) + 1
                key = (kind, detail) if each and len(self._logged) < 1000 else kind
                first = key not in self._logged
                self._logged.add(key)
                counter = self._counter
                if counter is None and len(self._pending) < 10_000:
                    self._pending.append(kind)
            if first and log:
                what = redact(
                    detail or (f"{type(exc).__name__}: {exc}" if exc is not None else kind)
                )
                _log.warning(
                    "otel_tokens: %s fault (%s); the host call is unaffected. Further %s faults "
                    "are only counted in otel_tokens.instrumentation.errors.",
                    kind,
                    what,
                    kind,
                    exc_info=exc if kind == "internal" else None,
                )
            if counter is not None:
                counter.add(1, (("otel_tokens.error.kind", kind),))
        except Exception:  # the error counter itself failing must not escape either
            pass


_SINK = Faults()


def sink() -> Faults:
    """The process-wide sink."""
    return _SINK


def report(
    kind: str,
    exc: BaseException | None = None,
    detail: str = "",
    *,
    log: bool = True,
    each: bool = False,
) -> None:
    """Report one fault to the process-wide sink (see :meth:`Faults.report`)."""
    _SINK.report(kind, exc, detail, log=log, each=each)
