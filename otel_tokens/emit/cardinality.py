"""Cardinality guard: the one place where metric attribute values from outside are bounded.

Models, agent names, providers, server addresses, operations, error types and unpriced
components come from applications and backends; user, tenant and conversation (opted in by
``OTEL_TOKENS_METRIC_ATTRIBUTES``) come from OpenTelemetry baggage, i.e. from whoever calls
the service. On metric points (spans keep the real values) each such value is bounded three
ways; whatever is folded is recorded as ``_OTHER`` and counted as
``otel_tokens.instrumentation.errors{kind=cardinality}``:

* length: a value longer than 256 characters is cut to 255 and marked with a final ``…``;
* values per attribute: at most ``limit`` distinct values each per process
  (``OTEL_TOKENS_MAX_ATTRIBUTE_VALUES``, default 200);
* label sets: at most ``max_sets`` distinct attribute sets per process
  (``OTEL_TOKENS_MAX_LABEL_SETS``, default 128). Sets carrying a user, tenant, conversation,
  error type or unpriced component may fill three quarters of them; past that those become
  ``_OTHER`` while agents and models keep their names in the last quarter, so an agent or
  model that comes late is still counted under its own name. When even that is full, the
  set's outside values all become ``_OTHER`` (operation, provider and agent ``_OTHER`` at
  the very last).

Why label sets: the OpenTelemetry SDK aggregates at most 2,000 attribute sets per instrument
(its cardinality limit); past it every *new* set, a late agent's included, lands in one
``otel.metric.overflow`` point under no name. One label set becomes at most :data:`FANOUT`
attribute sets on one instrument (``otel_tokens.tokens``: 5 token types x 3 usage sources),
so ``max_sets * FANOUT`` stays below the SDK's limit; when a larger ``max_sets`` is asked for,
:func:`~otel_tokens.emit.instruments.sdk_cardinality_limit` is the limit the views of
``configure()`` give our instruments.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

__all__ = ["BOUNDED", "OTHER", "CardinalityGuard"]

OTHER = "_OTHER"
MAX_VALUE_LENGTH = 256
TRUNCATED = "…"  # the mark on a value cut to MAX_VALUE_LENGTH characters
DEFAULT_MAX_LABEL_SETS = 128  # x FANOUT (15) = 1920 attribute sets: below the SDK's 2000


def bounded_length(value: str) -> str:
    """``value``, or its first 255 characters and the mark when it is longer than 256."""
    return value if len(value) <= MAX_VALUE_LENGTH else value[: MAX_VALUE_LENGTH - 1] + TRUNCATED


def _names() -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """(who, variant, every bounded attribute): the attributes whose values come from outside."""
    from . import instruments as names

    who = frozenset({names.USER_ID, names.TENANT_ID, names.CONVERSATION_ID})
    variant = frozenset({names.ERROR_TYPE, names.COST_UNPRICED})  # on some instruments' points
    core = frozenset(
        {
            names.REQUEST_MODEL,
            names.RESPONSE_MODEL,
            names.AGENT_NAME,
            names.PROVIDER,
            names.SERVER_ADDRESS,
            names.OPERATION,
        }
    )
    return who, variant, who | variant | core


def _catch_all_keys() -> tuple[str, ...]:
    """What is left of a label set when every place is taken (all three ``_OTHER``)."""
    from . import instruments as names

    return (names.OPERATION, names.PROVIDER, names.AGENT_NAME)


def __getattr__(name: str) -> object:
    """``BOUNDED``: the attributes whose values come from outside; ``WHO``: who a call is for."""
    if name == "BOUNDED":
        return _names()[2]
    if name == "WHO":
        return _names()[0]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class CardinalityGuard:
    """Bounds outside values on metric points: their length, their number per attribute and
    the number of distinct label sets (see the module docstring)."""

    def __init__(
        self,
        limit: int = 200,
        on_overflow: Callable[[str], None] | None = None,
        max_sets: int = DEFAULT_MAX_LABEL_SETS,
    ) -> None:
        self.limit = limit
        self.max_sets = max(2, max_sets)
        self._who, self._variant, bounded = _names()
        self._seen: dict[str, set[Any]] = {key: set() for key in bounded}
        self._lock = threading.Lock()
        self._on_overflow = on_overflow
        #: when every place is taken: operation, provider and agent, all _OTHER (admitted first)
        self._catch_all = {key: OTHER for key in _catch_all_keys()}
        self._sets: set[frozenset[tuple[str, Any]]] = {frozenset(self._catch_all.items())}
        #: label sets with a user, tenant, conversation, error type or unpriced component stop
        #: here: the last quarter is kept for agents and models that come late
        self._shared_room = self.max_sets - max(1, self.max_sets // 4)

    def _overflow(self, what: str) -> None:
        if self._on_overflow is not None:
            self._on_overflow(what)

    def value(self, key: str, value: Any) -> Any:
        """``value`` (cut to 256 characters), or ``_OTHER`` when ``key`` already has ``limit``
        other values."""
        seen = self._seen.get(key)
        if seen is None or value in seen or value == OTHER:
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
        self._overflow(key)
        return OTHER

    def attributes(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """A copy of ``attrs`` with each value bounded (the same dict when nothing changed)."""
        out = attrs
        for key, value in attrs.items():
            if key in self._seen:
                guarded = self.value(key, value)
                if guarded is not value:
                    if out is attrs:
                        out = dict(attrs)
                    out[key] = guarded
        return out

    def label_set(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """``attrs`` bounded value by value and admitted as a label set, or folded until it
        is one (the same dict when nothing changed)."""
        bounded = self.attributes(attrs)
        key = frozenset(bounded.items())
        if key in self._sets:
            return bounded
        who = any(bounded.get(k, OTHER) != OTHER for k in self._who)
        variant = any(bounded.get(k, OTHER) != OTHER for k in self._variant)
        with self._lock:
            if key in self._sets:
                return bounded
            if len(self._sets) < (self._shared_room if who or variant else self.max_sets):
                self._sets.add(key)
                return bounded
        if who:  # who the calls are for gives way first: agents and models keep their names
            self._overflow("label sets: user, tenant, conversation")
            return self.label_set({k: OTHER if k in self._who else v for k, v in bounded.items()})
        if variant:
            self._overflow("label sets: error type, unpriced component")
            return self.label_set(
                {k: OTHER if k in self._variant else v for k, v in bounded.items()}
            )
        self._overflow("label sets: every outside value")
        folded = {k: OTHER if k in self._seen else v for k, v in bounded.items()}
        key = frozenset(folded.items())
        if key in self._sets:
            return folded
        return dict(self._catch_all)  # its place was taken at the start
