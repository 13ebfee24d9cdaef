"""A gateway's reported cost in a response header (LiteLLM proxy's ``x-litellm-response-cost``).

The ``openai`` SDK keeps no headers on the objects it returns, so its response processing
(``_process_response``, sync and async alike: the headers are read before the response is)
is wrapped to note the header for the call being read; :mod:`.openai_sdk` takes it once. A
value that is not a finite, non-negative number is no cost (the header is untrusted).
"""

from __future__ import annotations

import math
from contextvars import ContextVar
from typing import Any, Callable

from .. import faults

__all__ = ["HEADERS", "clear", "take", "wrapper"]

HEADERS = ("x-litellm-response-cost",)

_noted: ContextVar[float | None] = ContextVar("otel_tokens_gateway_cost", default=None)


def cost_of(raw: Any) -> float | None:
    """A cost header's USD value, or None."""
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and value >= 0 else None


def clear() -> None:
    """Forget a cost noted before this call (an earlier response's, not this call's)."""
    if _noted.get() is not None:
        _noted.set(None)


def take() -> float | None:
    """The cost noted for the response just read (once)."""
    cost = _noted.get()
    if cost is not None:
        _noted.set(None)
    return cost


def wrapper(name: str, is_async: bool) -> Callable[..., Any]:
    """The wrapt wrapper of the SDK's response processing (:mod:`.openai_patches`)."""

    def note_cost(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        try:
            headers = getattr(kwargs.get("response"), "headers", None)
            raw = headers.get(HEADERS[0]) if headers is not None else None
            _noted.set(cost_of(raw) if raw is not None else None)
        except Exception as exc:
            faults.report("parse", exc)
        return wrapped(*args, **kwargs)

    return note_cost
