"""Wrapping helpers shared by every instrumentor (wrapt does the patching)."""

from __future__ import annotations

from typing import Any

import wrapt

__all__ = ["unwrap"]

# wrapt >= 2 puts function wrappers under BaseObjectProxy; wrapt 1 has only ObjectProxy
_PROXY = getattr(wrapt, "BaseObjectProxy", wrapt.ObjectProxy)


def unwrap(owner: Any, attribute: str) -> None:
    """Restore ``owner.attribute`` to what a wrapt wrapper replaced (no-op when not wrapped).

    The same as ``opentelemetry.instrumentation.utils.unwrap``, kept here so that
    ``otel_tokens.instrument()`` does not import opentelemetry-instrumentation (~20 ms).
    """
    current = getattr(owner, attribute, None)
    if isinstance(current, _PROXY) and hasattr(current, "__wrapped__"):
        setattr(owner, attribute, current.__wrapped__)
