"""The one start/finish path of every backend call: open, run with the span current, end once.

Every capture module builds its wrappers here: an SDK method described as an
:class:`Operation` (how to read its request, response and stream items) through
:func:`operation_wrapper`; Bedrock, litellm and ``instrument_backend`` with their own
``start``/``read``. Agent-CLI runs, which are not one method call, end through
:func:`unusable` and the same ``Call`` methods. The rules are the same for all:

* ``start(instance, args, kwargs)`` opens the call (None: not recorded, the backend runs
  unwrapped); only an enforced budget's ``BudgetExceeded`` is raised to the caller;
* the backend raises: the call fails with the error (``failure`` may name it, e.g. an HTTP
  status) and the exception goes on unchanged;
* ``read(call, result, context)`` ends the call from the answer, or hands back a proxy (a
  stream, a body) that ends it as the caller reads; a reader that fails still ends it: usage
  that is not token counts (a ``ValueError`` of the usage record) as reported but unusable,
  any other fault with no usage;
* a proxy ends its call once whichever ending comes first: read to the end, closed, failed,
  or dropped unread (found when collected).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, NamedTuple

from .. import faults
from ..account.anomalies import BudgetExceeded
from ..call import Call
from ..handler import get_handler
from ..request import Request
from ..usage import Billing, Usage
from .raw import RAW_TYPES, wrap_raw
from .sent import inside_gateway, inside_sdk, rejected
from .stream import Accumulator, wrap_stream

__all__ = [
    "Operation",
    "Response",
    "async_wrapper",
    "checked",
    "given",
    "open_call",
    "operation_wrapper",
    "sdk_field",
    "stop_with",
    "sync_wrapper",
    "unusable",
]

#: ``start(instance, args, kwargs)`` -> (call, args, kwargs to call with, reader's context)
Start = Callable[[Any, tuple, dict], "tuple[Call, tuple, dict, Any] | None"]
Read = Callable[[Call, Any, Any], Any]


def open_call(
    describe: Callable[[Any], Request | None],
    given: Any,
    *,
    operation: str,
    provider: str,
    request_model: str | None,
    stream: bool = False,
    server_address: str | None = None,
    server_port: int | None = None,
    conversation_id: str | None = None,
    billed: Callable[[Any], Billing | None] | None = None,
) -> Call | None:
    """Open a call on the process-wide handler with the request ``describe(given)`` returns (a
    failure there only loses the estimate) and what ``billed(given)`` counts of it
    (:class:`~otel_tokens.usage.Billing`'s ``counted``); None when instrumentation itself
    failed, so the backend call goes on unrecorded. Raises only an enforced budget's
    ``BudgetExceeded``."""
    try:
        request = None
        try:
            request = describe(given)
        except Exception as exc:
            faults.report("estimate", exc)
        call = get_handler().start(
            operation=operation,
            provider=provider,
            request_model=request_model,
            stream=stream,
            server_address=server_address,
            server_port=server_port,
            request=request,
            conversation_id=conversation_id,
        )
        if billed is not None:
            call.billing = _counted(billed, given)
        return call
    except BudgetExceeded:
        raise  # the user opted in to being stopped
    except Exception as exc:
        faults.report("internal", exc)
        return None


def _counted(billed: Callable[[Any], Billing | None], given: Any) -> Billing | None:
    """What ``billed`` counts of the request (None, counted, when it fails: nothing billed)."""
    try:
        return billed(given)
    except Exception as exc:
        faults.report("parse", exc)
        return None


def unusable(call: Call, exc: Exception) -> None:
    """A reader failed: the call still ends, once. Usage that is not token counts is recorded
    as reported but unusable (rejected, counted as ``usage_invalid``, not as missing)."""
    invalid = isinstance(exc, ValueError)
    faults.report("usage_invalid" if invalid else "internal", exc)
    if not call.ended:
        call.stop(Usage() if invalid else None)


def _named(failure: Callable[[BaseException], BaseException | str], exc: BaseException) -> Any:
    try:
        return failure(exc)
    except Exception as error:
        faults.report("internal", error)
        return exc


_WRAPPER = "BoundFunctionWrapper"  # wrapt's bound wrapper: another instrumentation's, beneath ours


def _innermost(wrapped: Any, instance: Any, record: Callable[..., Any]) -> Callable[..., Any]:
    """``wrapped`` (other instrumentations' wrappers, then the method) with ``record`` moved
    beneath them: their GenAI span is open, and current, when ours would start, so
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


def sync_wrapper(
    start: Start,
    read: Read,
    failure: Callable[[BaseException], Any] | None = None,
    gateway: bool = False,
    sdk: bool = False,
) -> Callable[..., Any]:
    """A wrapt wrapper for a synchronous backend method (``gateway``: calls made inside it
    are its own, see :data:`inside_gateway`; ``sdk``: the method sends the model request
    itself, the HTTP layer stays silent beneath it, see :data:`inside_sdk`)."""

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        if type(wrapped).__name__ == _WRAPPER and _reuse_spans():  # beneath, it is the method
            return _innermost(wrapped, instance, wrapper)(*args, **kwargs)
        opened = None if inside_gateway.get() else start(instance, args, kwargs)
        if opened is None:
            return wrapped(*args, **kwargs)
        call, send_args, send, context = opened
        token = inside_gateway.set(context or True) if gateway else None
        own = inside_sdk.set(True) if sdk else None
        try:
            with call.activate():  # the call's span made current
                result = wrapped(*send_args, **send)
        except BaseException as exc:
            call.fail(exc if failure is None else _named(failure, exc))
            raise
        finally:
            if token is not None:
                inside_gateway.reset(token)
            if own is not None:
                inside_sdk.reset(own)
        try:
            return read(call, result, context)
        except Exception as exc:
            unusable(call, exc)
            return result

    return wrapper


def async_wrapper(
    start: Start,
    read: Read,
    failure: Callable[[BaseException], Any] | None = None,
    gateway: bool = False,
    sdk: bool = False,
) -> Callable[..., Any]:
    """A wrapt wrapper for an asynchronous backend method: the same path, awaited."""

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        if type(wrapped).__name__ == _WRAPPER and _reuse_spans():  # beneath, it is the method
            return _innermost(wrapped, instance, wrapper)(*args, **kwargs)

        async def run() -> Any:
            opened = None if inside_gateway.get() else start(instance, args, kwargs)
            if opened is None:
                return await wrapped(*args, **kwargs)
            call, send_args, send, context = opened
            token = inside_gateway.set(context or True) if gateway else None
            own = inside_sdk.set(True) if sdk else None
            try:
                with call.activate():
                    result = await wrapped(*send_args, **send)
            except BaseException as exc:
                call.fail(exc if failure is None else _named(failure, exc))
                raise
            finally:
                if token is not None:
                    inside_gateway.reset(token)
                if own is not None:
                    inside_sdk.reset(own)
            try:
                return read(call, result, context)
            except Exception as exc:
                unusable(call, exc)
                return result

        return run()

    return wrapper


# -- SDK methods described as operations: one method call -> one call record ------------
class Response(NamedTuple):
    """What a finished, non-streamed response says.

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
    call.stop(
        None if answer.parts else answer.usage,
        response_model=answer.model,
        response_id=answer.response_id,
        finish_reasons=answer.finish_reasons or None,
        parts=answer.parts or None,
        billing=answer.billing,
        once=once,
        pending=answer.pending,
    )


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
    #: what the request is billed by where its model is priced by that alone, counted from
    #: the kwargs when the call opens (:func:`open_call`'s ``billed``: speech's characters)
    billed: Callable[[dict[str, Any]], Billing | None] | None = None


_NOT_GIVEN = ("NotGiven", "Omit")  # the "argument not given" sentinels of both SDKs


def given(value: Any) -> Any:
    """``value``, or None for an SDK "not given" sentinel."""
    return None if value is not None and type(value).__name__ in _NOT_GIVEN else value


_PLAIN = frozenset((str, int, float, bool, list, dict, tuple))  # never an SDK sentinel


def sdk_field(obj: Any, name: str) -> Any:
    """A field of a dict or an SDK object; SDK "not given" sentinels read as None (as
    :func:`given` reads them)."""
    value = obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)
    if value is None or type(value) in _PLAIN or type(value).__name__ not in _NOT_GIVEN:
        return value
    return None


def _open(
    op: Operation, is_async: bool, instance: Any, args: tuple, kwargs: dict[str, Any]
) -> tuple[Call, tuple, dict[str, Any], tuple] | None:
    """Open the call (:data:`Start`) with the facts ``op`` reads; None when instrumentation
    itself failed."""
    try:
        model = kwargs.get("model")
        if op.client is not None:
            provider, address, port = op.client(instance)
        else:
            address, port = op.server(instance)
            provider = op.provider(instance)
        conversation = op.conversation(kwargs) if op.conversation else None
        stream = kwargs.get("stream") is True if op.is_stream is None else op.is_stream(kwargs)
    except Exception as exc:
        faults.report("internal", exc)
        return None
    call = open_call(
        op.request,
        kwargs,
        operation=op.name,
        provider=provider,
        request_model=model if isinstance(model, str) else None,
        stream=stream,
        server_address=address,
        server_port=port,
        conversation_id=conversation,
        billed=op.billed,
    )
    if call is None:
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
    """End a non-streamed call, or hand a stream to the proxy (:data:`Read`);
    returns what the caller gets."""
    if type(result).__name__ in RAW_TYPES:  # with_raw_response / with_streaming_response
        if op.raw_headers is not None:
            op.raw_headers(result)
        given, sent = context
        acc = op.accumulator(given, sent) if call.stream and op.accumulator is not None else None
        return wrap_raw(
            result,
            call,
            lambda parsed: stop_with(call, checked(op.response(parsed), parsed), op.once),
            acc,
            is_async,
            op.once,
        )
    # a stream only when asked for one (hasattr on a pydantic result that is not one raises
    # and catches an AttributeError inside pydantic)
    if (
        call.stream
        and op.accumulator is not None
        and hasattr(result, "__anext__" if is_async else "__next__")
    ):
        return wrap_stream(result, call, op.accumulator(*context), is_async, op.once)
    stop_with(call, checked(op.response(result), result), op.once)
    return result


def operation_wrapper(op: Operation, is_async: bool) -> Callable[..., Any]:
    """A wrapt wrapper for an SDK method described by ``op``, on the one path above."""
    wrap = async_wrapper if is_async else sync_wrapper
    return wrap(partial(_open, op, is_async), partial(_read, op, is_async), op.failure, sdk=True)
