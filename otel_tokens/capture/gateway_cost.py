"""A gateway's reported cost in a response header (LiteLLM proxy's ``x-litellm-response-cost``).

The ``openai`` SDK keeps no headers on the objects it returns, so its response processing
(``_process_response``, sync and async alike: the headers are read before the response is)
is wrapped to note the header for the call being read; :mod:`.openai_sdk` takes it once: a
non-streamed result when it is read (``with_raw_response``: when it is parsed), a stream when
its accumulator is made (:class:`StreamCost`: the header came with the stream's response
headers, before its body). A value that is not a finite, non-negative number is no cost (the
header is untrusted).

A LiteLLM proxy sends the header on a stream only when the cost is known before the body
(a cache hit: ``0.0``); otherwise it can put the bill in the final usage chunk's
``usage.cost`` (``litellm_settings.include_cost_in_streaming_usage``, or the request header
``x-litellm-include-cost-in-streaming-usage: true``), read as a reported cost by
:mod:`.compatible_usage`. Either is the call's cost, source ``provider``.
"""

from __future__ import annotations

import math
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Callable

from .. import faults
from ..usage import Usage

if TYPE_CHECKING:
    from ..call import Call

__all__ = ["HEADERS", "StreamCost", "clear", "expect", "take", "wrapper"]

HEADERS = ("x-litellm-response-cost",)

_noted: ContextVar[float | None] = ContextVar("otel_tokens_gateway_cost", default=None)


def cost_of(raw: Any) -> float | None:
    """A cost header's USD value, or None."""
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and value >= 0 else None


#: noted instead of a cost: the call's endpoint is a provider's own API (no gateway between)
_OFF: Any = object()


def expect(gateway: bool) -> None:
    """A call starts: forget a cost noted before (an earlier response's, not this call's).
    ``gateway`` False (the client's endpoint is a provider's own API, matched by its URL
    pattern) skips reading the response's headers, which costs more than the rest of this
    step (httpx raises and catches a ``KeyError`` for a header that is not there)."""
    state = None if gateway else _OFF
    if _noted.get() is not state:
        _noted.set(state)


def clear() -> None:
    """Forget a cost noted before this call (an earlier response's, not this call's)."""
    expect(True)


def take() -> float | None:
    """The cost noted for the response just read (once)."""
    cost = _noted.get()
    if cost is None or cost is _OFF:
        return None
    _noted.set(None)
    return cost


class StreamCost:
    """Stream accumulator mixin: the cost header of the stream's response (taken when the
    accumulator is made, right after the SDK returned the stream) is the stream's cost, over
    a cost its usage reports, as for a non-streamed response; a stream without usage keeps
    the cost with its tokens unknown (estimated from the text, as any stream without usage)."""

    usage: Usage | None
    model: str | None
    response_id: str | None

    def take_header_cost(self) -> None:
        self.header_cost = take()

    def end_call(self, call: Call, how: str, error: BaseException | str | None = None,
                 once: str | None = None) -> None:  # fmt: skip
        cost = getattr(self, "header_cost", None)
        if cost is not None:
            usage = self.usage
            self.usage = (Usage(cost_usd=cost, model=self.model, response_id=self.response_id)
                          if usage is None else usage.replace(cost_usd=cost))  # fmt: skip
        super().end_call(call, how, error, once)  # type: ignore[misc]


def wrapper(name: str, is_async: bool) -> Callable[..., Any]:
    """The wrapt wrapper of the SDK's response processing (:mod:`.openai_patches`)."""

    def note_cost(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        if _noted.get() is _OFF:  # a provider's own API answers: no gateway's header
            return wrapped(*args, **kwargs)
        try:
            headers = getattr(kwargs.get("response"), "headers", None)
            raw = headers.get(HEADERS[0]) if headers is not None else None
            _noted.set(cost_of(raw) if raw is not None else None)
        except Exception as exc:
            faults.report("parse", exc)
        return wrapped(*args, **kwargs)

    return note_cost
