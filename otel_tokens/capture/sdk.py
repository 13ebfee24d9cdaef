"""The wrapping every SDK instrumentor shares: one SDK method call -> one call record.

A provider module describes each patched method with an :class:`Operation` (how to read the
request, the response and stream items); :func:`sync_wrapper`/:func:`async_wrapper` do the
rest, the same way for every provider: open the call with the request's facts, make its
span current while the SDK runs, pass the result and the SDK's own exceptions through
unchanged, end the call exactly once with the response's facts, and wrap streams in the
shared stream proxy.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

from .. import faults
from ..account.anomalies import BudgetExceeded
from ..call import Call
from ..request import Request
from ..handler import get_handler
from ..usage import Billing, Usage
from .raw import RAW_TYPES, observed
from .stream import Accumulator, observe

__all__ = ["Operation", "Response", "async_wrapper", "given", "sdk_field", "server_of", "stop_with",
           "sync_wrapper"]


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
    what ``prepare`` made of them); ``prepare(kwargs)`` may adjust the call (e.g. ask for
    stream usage) and returns the kwargs to call with; ``failure(exc)`` names a failure
    whose exception class is too general (an HTTP status for one ``APIError`` class).
    """

    name: str  # gen_ai.operation.name
    provider: Callable[[Any], str]
    server: Callable[[Any], tuple[str | None, int | None]]
    request: Callable[[dict[str, Any]], Request | None]
    response: Callable[[Any], Response]
    accumulator: Callable[[dict[str, Any], dict[str, Any]], Accumulator] | None = None
    prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    is_stream: Callable[[dict[str, Any]], bool] = lambda kwargs: kwargs.get("stream") is True
    once: str | None = None
    #: the failure as recorded (``error.type``), when the exception's class does not say it
    failure: Callable[[BaseException], BaseException | str] | None = None
    #: the conversation a request names (``gen_ai.conversation.id``)
    conversation: Callable[[dict[str, Any]], str | None] | None = None


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


#: set while a gateway library's call (litellm) is recorded: SDK calls it makes inside are
#: part of that call, counted once by it
inside_gateway: ContextVar[bool] = ContextVar("otel_tokens_inside_gateway", default=False)


def open_call(describe: Callable[[Any], Request | None], given: Any, **start: Any) -> Call | None:
    """Open a call on the process-wide handler with the request ``describe(given)`` returns (a
    failure there only loses the estimate); None when instrumentation itself failed, so the
    backend call goes on unrecorded. Raises only an enforced budget's ``BudgetExceeded``."""
    try:
        request = None
        try:
            request = describe(given)
        except Exception as exc:
            faults.report("estimate", exc)
        return get_handler().start(request=request, **start)
    except BudgetExceeded:
        raise  # the user opted in to being stopped
    except Exception as exc:
        faults.report("internal", exc)
        return None


def _start(op: Operation, instance: Any, kwargs: dict[str, Any], stream: bool) -> Call | None:
    """Open the call; None when instrumentation itself failed or an outer gateway call
    records it (the SDK call goes on)."""
    if inside_gateway.get():
        return None
    try:
        model = kwargs.get("model")
        address, port = op.server(instance)
        provider = op.provider(instance)
        conversation = op.conversation(kwargs) if op.conversation else None
    except Exception as exc:
        faults.report("internal", exc)
        return None
    return open_call(
        op.request, kwargs, operation=op.name, provider=provider,
        request_model=model if isinstance(model, str) else None, stream=stream,
        server_address=address, server_port=port, conversation_id=conversation,
    )  # fmt: skip


def _prepared(op: Operation, kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(kwargs to call the SDK with, kwargs as the caller gave them)."""
    if op.prepare is None:
        return kwargs, kwargs
    try:
        return op.prepare(kwargs), kwargs
    except Exception as exc:
        faults.report("internal", exc)
        return kwargs, kwargs


def _finish(
    op: Operation, call: Call, given: dict[str, Any], sent: dict[str, Any], result: Any,
    is_async: bool,
) -> Any:
    """End a non-streamed call, or hand a stream to the proxy; returns what the caller gets."""
    try:
        if type(result).__name__ in RAW_TYPES:  # with_raw_response / with_streaming_response
            acc = op.accumulator(given, sent) if call.stream and op.accumulator is not None else None
            return observed(result, call, lambda parsed: stop_with(call, op.response(parsed), op.once),
                            acc, is_async, op.once)  # fmt: skip
        if call.stream and op.accumulator is not None and _is_stream(result, is_async):
            return observe(result, call, op.accumulator(given, sent), is_async, op.once)
        stop_with(call, op.response(result), op.once)
    except Exception as exc:
        invalid = isinstance(exc, ValueError)  # the backend's usage is not token counts
        faults.report("usage_invalid" if invalid else "internal", exc)
        if not call.ended:
            call.stop(Usage() if invalid else None)  # unusable usage: unknown, not missing
    return result


def _failure(op: Operation, exc: BaseException) -> BaseException | str:
    try:
        return op.failure(exc)  # type: ignore[misc]
    except Exception as error:
        faults.report("internal", error)
        return exc


def _is_stream(result: Any, is_async: bool) -> bool:
    return hasattr(result, "__anext__" if is_async else "__next__")


_WRAPPER = "BoundFunctionWrapper"  # wrapt's bound wrapper: another instrumentation's, beneath ours


def _innermost(wrapped: Any, instance: Any, record: Callable[..., Any]) -> Callable[..., Any]:
    """``wrapped`` (other instrumentations' wrappers, then the SDK method) with ``record``
    moved beneath them: their GenAI span is open, and current, when ours would start, so
    ``OTEL_TOKENS_REUSE_GENAI_SPAN`` can put our attributes on it whatever the patch order."""
    theirs, inner, bound_to = wrapped._self_wrapper, wrapped.__wrapped__, wrapped._self_instance
    if type(inner).__name__ == _WRAPPER:
        below = _innermost(inner, instance, record)
    else:
        def below(*args: Any, **kwargs: Any) -> Any:
            return record(inner, instance, args, kwargs)
    return lambda *args, **kwargs: theirs(below, bound_to, args, kwargs)


def _reuse_spans() -> bool:
    try:
        return get_handler().recorder.reuse_genai_span
    except Exception as exc:
        faults.report("internal", exc)
        return False


def sync_wrapper(op: Operation) -> Callable[..., Any]:
    """A wrapt wrapper for a synchronous SDK method."""

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        if type(wrapped).__name__ == _WRAPPER and _reuse_spans():  # beneath, it is the method
            return _innermost(wrapped, instance, wrapper)(*args, **kwargs)
        call = _start(op, instance, kwargs, op.is_stream(kwargs))
        if call is None:
            return wrapped(*args, **kwargs)
        send, given = _prepared(op, kwargs) if op.prepare is not None else (kwargs, kwargs)
        try:
            with call.activate():
                result = wrapped(*args, **send)
        except BaseException as exc:
            call.fail(exc if op.failure is None else _failure(op, exc))
            raise
        return _finish(op, call, given, send, result, False)

    return wrapper


def async_wrapper(op: Operation) -> Callable[..., Any]:
    """A wrapt wrapper for an asynchronous SDK method."""

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        if type(wrapped).__name__ == _WRAPPER and _reuse_spans():  # beneath, it is the method
            return _innermost(wrapped, instance, wrapper)(*args, **kwargs)

        async def run() -> Any:
            call = _start(op, instance, kwargs, op.is_stream(kwargs))
            if call is None:
                return await wrapped(*args, **kwargs)
            send, given = _prepared(op, kwargs)
            try:
                with call.activate():
                    result = await wrapped(*args, **send)
            except BaseException as exc:
                call.fail(exc if op.failure is None else _failure(op, exc))
                raise
            return _finish(op, call, given, send, result, True)

        return run()

    return wrapper
