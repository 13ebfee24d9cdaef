"""SDK methods described as operations: one SDK method call -> one call record.

A provider module describes each patched method with an :class:`Operation` (how to read the
request, the response and stream items); :func:`sync_wrapper`/:func:`async_wrapper` build
its wrapper on the one start/finish path (:mod:`.lifecycle`): the call opened with the
request's facts, ended exactly once with the response's, streams and raw responses wrapped
in the shared proxies.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, NamedTuple

from .. import faults
from .. import handler as _handlers
from ..account.anomalies import BudgetExceeded
from ..call import Call
from ..handler import get_handler
from ..request import Request
from ..usage import Billing, Usage
from . import lifecycle
from .lifecycle import inside_gateway, open_call
from .raw import RAW_TYPES, wrap_raw
from .sent import HELD, rejected
from .stream import Accumulator, wrap_stream

__all__ = ["Operation", "Response", "async_wrapper", "checked", "given", "inside_gateway",
           "open_call", "sdk_field", "server_of", "stop_with", "sync_wrapper"]


class Response(NamedTuple):
    """What a finished, non-streamed response says (a named tuple: one is made per call).

    ``parts``: usages billed apart within the one response (Anthropic's compaction and
    advisor iterations), each with its model, the first being ``usage``; ``billing``: see
    :class:`~otel_tokens.usage.Billing`; ``pending``: the work goes on after this response
    (queued background work: its usage comes later, none is missing now)."""

    usage: Usage | None
    model: str | None = None
    response_id: str | None = None
    finish_reasons: tuple[str, ...] = ()
    billing: Billing | None = None
    parts: tuple[Usage, ...] = ()
    pending: bool = False


def checked(answer: Response, result: Any) -> Response:
    """``answer`` read from ``result``, its usage unusable (reported, not token counts) when
    the body ``result`` was made of broke the one rule for counts (:mod:`.sent`)."""
    exc = rejected(result)
    if exc is None:
        return answer
    faults.report("usage_invalid", exc)
    return answer._replace(usage=Usage(), parts=(), billing=None)


def stop_with(call: Call, answer: Response, once: str | None = None) -> None:
    """End ``call`` with what a response says."""
    call.stop(None if answer.parts else answer.usage, response_model=answer.model,
              response_id=answer.response_id, finish_reasons=answer.finish_reasons or None,
              parts=answer.parts or None, billing=answer.billing, once=once,
              pending=answer.pending)  # fmt: skip


@dataclass(frozen=True)
class Operation:
    """One patched SDK method.

    ``provider(instance)`` names the provider (``gen_ai.provider.name``) and
    ``server(instance)`` its address and port; ``request(kwargs)`` describes the request for
    the estimator; ``response(result)`` reads a non-streamed result;
    ``accumulator(given, sent)`` reads stream items (``given``: the caller's kwargs, ``sent``:
    what ``prepare`` made of them); ``prepare(kwargs)`` may adjust a streamed call (ask for
    stream usage) and returns the kwargs to call with; ``is_stream(kwargs)``: the call
    streams (None: ``stream=True`` was given); ``failure(exc)`` names a failure
    whose exception class is too general (an HTTP status for one ``APIError`` class).
    """

    name: str  # gen_ai.operation.name
    provider: Callable[[Any], str]
    server: Callable[[Any], tuple[str | None, int | None]]
    request: Callable[[dict[str, Any]], Request | None]
    response: Callable[[Any], Response]
    accumulator: Callable[[dict[str, Any], dict[str, Any]], Accumulator] | None = None
    prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    is_stream: Callable[[dict[str, Any]], bool] | None = None
    once: str | None = None
    #: the failure as recorded (``error.type``), when the exception's class does not say it
    failure: Callable[[BaseException], BaseException | str] | None = None
    #: the conversation a request names (``gen_ai.conversation.id``)
    conversation: Callable[[dict[str, Any]], str | None] | None = None
    #: (provider, address, port) in one step, in place of ``provider`` and ``server``
    client: Callable[[Any], tuple[str, str | None, int | None]] | None = None
    #: reads a raw response's headers when the call hands it back, before its body is read
    #: (openai: a gateway's cost header, otherwise read where openai parses a response)
    raw_headers: Callable[[Any], None] | None = None


_NOT_GIVEN = ("NotGiven", "Omit")  # the "argument not given" sentinels of both SDKs


def given(value: Any) -> Any:
    """``value``, or None for an SDK "not given" sentinel."""
    return None if value is not None and type(value).__name__ in _NOT_GIVEN else value


_PLAIN = frozenset((str, int, float, bool, list, dict, tuple))  # never an SDK sentinel


def sdk_field(obj: Any, name: str) -> Any:
    """A field of a dict or an SDK object; SDK "not given" sentinels read as None (``given``
    inlined: this runs for every field of a chunk decoded from a raw stream)."""
    value = obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)
    if value is None or type(value) in _PLAIN or type(value).__name__ not in _NOT_GIVEN:
        return value
    return None


def server_of(url: Any) -> tuple[str | None, int | None]:
    """(``server.address``, ``server.port``) of an SDK client's ``base_url`` (an httpx URL).

    Cached per URL object (clients keep theirs; one set anew is a new object), so the URL's
    parsing properties are not re-read on every call.
    """
    if url is None:
        return None, None
    hit = _servers.get(id(url))
    if hit is not None and hit[0] is url:
        return hit[1], hit[2]
    scheme = url.scheme
    port = url.port or (443 if scheme == "https" else 80 if scheme == "http" else None)
    host = url.host or None
    if len(_servers) >= 256:  # clients come and go: keep the cache small
        _servers.clear()
    _servers[id(url)] = (url, host, port)  # holding the URL keeps its id from being reused
    return host, port


_servers: dict[int, tuple[Any, str | None, int | None]] = {}


def _open(op: Operation, is_async: bool, instance: Any, args: tuple,
          kwargs: dict[str, Any]) -> tuple[Call, tuple, dict[str, Any], tuple] | None:  # fmt: skip
    """Open the call (:data:`.lifecycle.Start`); None when instrumentation itself failed.
    (:func:`.lifecycle.open_call`, written out: this runs on every call.)"""
    try:
        model = kwargs.get("model")
        if op.client is not None:
            provider, address, port = op.client(instance)
        else:
            address, port = op.server(instance)
            provider = op.provider(instance)
        conversation = op.conversation(kwargs) if op.conversation else None
        stream = kwargs.get("stream") is True if op.is_stream is None else op.is_stream(kwargs)
        try:
            request = op.request(kwargs)
        except Exception as exc:  # only the estimate is lost
            request = None
            faults.report("estimate", exc)
        call = (_handlers._handler or get_handler()).start(
            operation=op.name, provider=provider, request_model=model if isinstance(model, str)
            else None, stream=stream, server_address=address, server_port=port, request=request,
            conversation_id=conversation)  # fmt: skip
    except BudgetExceeded:
        raise  # the user opted in to being stopped
    except Exception as exc:
        faults.report("internal", exc)
        return None
    send = _prepared(op, kwargs) if stream and op.prepare is not None else kwargs
    return call, args, send, (kwargs, send)


def _prepared(op: Operation, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The kwargs to call the SDK with (``op.prepare``'s; the caller's if it fails)."""
    try:
        return op.prepare(kwargs)  # type: ignore[misc]
    except Exception as exc:
        faults.report("internal", exc)
        return kwargs


def _read(op: Operation, is_async: bool, call: Call, result: Any, context: tuple) -> Any:
    """End a non-streamed call, or hand a stream to the proxy (:data:`.lifecycle.Read`);
    returns what the caller gets."""
    if type(result).__name__ in RAW_TYPES:  # with_raw_response / with_streaming_response
        if op.raw_headers is not None:
            op.raw_headers(result)
        given, sent = context
        acc = op.accumulator(given, sent) if call.stream and op.accumulator is not None else None
        return wrap_raw(result, call,
                        lambda parsed: stop_with(call, checked(op.response(parsed), parsed), op.once),
                        acc, is_async, op.once)  # fmt: skip
    # a stream only when asked for one: hasattr on a pydantic result that is not one raises
    # and catches an AttributeError inside pydantic (~15k instructions per call)
    if call.stream and op.accumulator is not None and hasattr(
            result, "__anext__" if is_async else "__next__"):  # fmt: skip
        return wrap_stream(result, call, op.accumulator(*context), is_async, op.once)
    answer = op.response(result)  # checked and stop_with, written out: this runs on every call
    exc = rejected(result) if HELD else None  # none held (nearly always): no call
    if exc is not None:
        faults.report("usage_invalid", exc)
        answer = answer._replace(usage=Usage(), parts=(), billing=None)
    call.stop(None if answer.parts else answer.usage, response_model=answer.model,
              response_id=answer.response_id, finish_reasons=answer.finish_reasons or None,
              parts=answer.parts or None, billing=answer.billing, once=op.once,
              pending=answer.pending)  # fmt: skip
    return result


def sync_wrapper(op: Operation) -> Callable[..., Any]:
    """A wrapt wrapper for a synchronous SDK method (the one path: :mod:`.lifecycle`)."""
    return lifecycle.sync_wrapper(partial(_open, op, False), partial(_read, op, False), op.failure)


def async_wrapper(op: Operation) -> Callable[..., Any]:
    """A wrapt wrapper for an asynchronous SDK method."""
    return lifecycle.async_wrapper(partial(_open, op, True), partial(_read, op, True), op.failure)
