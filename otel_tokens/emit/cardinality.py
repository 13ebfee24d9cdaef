"""Cardinality guard: metric attribute values that come from outside are bounded.

Models, agent names, providers and server addresses come from applications and backends; an
unbounded stream of them (a model name per request, an agent per user) would blow up every
metrics backend. Each such attribute keeps at most ``limit`` distinct values per process
(``OTEL_TOKENS_MAX_ATTRIBUTE_VALUES``, default 200); past that, new values are recorded as
``_OTHER`` on metrics, and ``otel_tokens.instrumentation.errors{kind=cardinality}`` counts
each occurrence. Spans keep the real value (bounded by the SDK's span attribute limits,
``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``). Every instrument gets the same guarded attribute
set, so each is bounded alike.

Their length is bounded too: a value longer than 256 characters (a model name a backend made
up, say) is cut to 255 and marked with a final ``…`` on metric points, so one such value cannot
bloat every series nor make a Prometheus with ``label_value_length_limit`` reject a scrape.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

__all__ = ["BOUNDED", "OTHER", "CardinalityGuard"]

OTHER = "_OTHER"
MAX_VALUE_LENGTH = 256
TRUNCATED = "…"  # the mark on a value cut to MAX_VALUE_LENGTH characters


def bounded_length(value: str) -> str:
    """``value``, or its first 255 characters and the mark when it is longer than 256."""
    return value if len(value) <= MAX_VALUE_LENGTH else value[: MAX_VALUE_LENGTH - 1] + TRUNCATED


def _bounded() -> frozenset[str]:
    """The attributes whose values come from outside otel_tokens."""
    from . import instruments as names

    return frozenset({
        names.REQUEST_MODEL, names.RESPONSE_MODEL, names.AGENT_NAME, names.PROVIDER,
        names.SERVER_ADDRESS, names.OPERATION, names.ERROR_TYPE,
    })  # fmt: skip


def __getattr__(name: str) -> object:
    """``BOUNDED``: the attributes whose values come from outside otel_tokens."""
    if name == "BOUNDED":
        return _bounded()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class CardinalityGuard:
    """Per attribute, the first ``limit`` distinct values pass; later ones become ``_OTHER``."""

    def __init__(self, limit: int = 200, on_overflow: Callable[[str], None] | None = None) -> None:
        self.limit = limit
        self._seen: dict[str, set[Any]] = {key: set() for key in _bounded()}
        self._lock = threading.Lock()
        self._on_overflow = on_overflow

    def value(self, key: str, value: Any) -> Any:
        """``value`` (cut to 256 characters), or ``_OTHER`` when ``key`` already has ``limit``
        other values."""
        seen = self._seen.get(key)
        if seen is None or value in seen:
            return value
        if type(value) is str and len(value) > MAX_VALUE_LENGTH:
            value = bounded_length(value)
            if value in seen:
                return value
        with self._lock:
            if value in seen:
                return value
            if len(seen) < self.limit:
                seen.add(value)
                return value
        if self._on_overflow is not None:
            self._on_overflow(key)
        return OTHER

    def attributes(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """A copy of ``attrs`` with bounded values (the same dict when nothing changed)."""
        out = attrs
        for key, value in attrs.items():
            if key in self._seen:
                guarded = self.value(key, value)
                if guarded is not value:
                    if out is attrs:
                        out = dict(attrs)
                    out[key] = guarded
        return out
