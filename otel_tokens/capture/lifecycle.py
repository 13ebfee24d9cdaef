"""The one start/finish path of every backend call: open, run with the span current, end once.

Every capture module builds its wrappers here (SDK methods through :mod:`.operations`,
Bedrock, litellm, ``instrument_backend``); agent-CLI runs, which are not one method call,
end through :func:`unusable` and the same ``Call`` methods. The rules are the same for all:

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

from contextvars import ContextVar
from typing import Any, Callable

from .. import faults
from .. import handler as _handlers
from ..account.anomalies import BudgetExceeded
from ..call import Call
from ..handler import get_handler
from ..request import Request
from ..usage import Usage

__all__ = ["async_wrapper", "inside_gateway", "open_call", "sync_wrapper", "unusable"]

#: set while a gateway library's call (litellm) is recorded: SDK calls it makes inside are
#: part of that call, counted once by it. Its value is the gateway reader's context when
#: that is an object of its own (litellm's record of what its provider sent, see .sent)
inside_gateway: ContextVar[Any] = ContextVar("otel_tokens_inside_gateway", default=False)

#: ``start(instance, args, kwargs)`` -> (call, args, kwargs to call with, reader's context)
Start = Callable[[Any, tuple, dict], "tuple[Call, tuple, dict, Any] | None"]
Read = Callable[[Call, Any, Any], Any]


def open_call(describe: Callable[[Any], Request | None], given: Any, *, operation: str,
              provider: str, request_model: str | None, stream: bool = False,
              server_address: str | None = None, server_port: int | None = None,
              conversation_id: str | None = None) -> Call | None:  # fmt: skip
    """Open a call on the process-wide handler with the request ``describe(given)`` returns (a
    failure there only loses the estimate); None when instrumentation itself failed, so the
    backend call goes on unrecorded. Raises only an enforced budget's ``BudgetExceeded``.
    (The call's facts as named arguments: packing and unpacking them as ``**`` cost more.)"""
    try:
        request = None
        try:
            request = describe(given)
        except Exception as exc:
            faults.report("estimate", exc)
        return (_handlers._handler or get_handler()).start(
            operation=operation, provider=provider, request_model=request_model, stream=stream,
            server_address=server_address, server_port=server_port, request=request,
            conversation_id=conversation_id)  # fmt: skip
    except BudgetExceeded:
        raise  # the user opted in to being stopped
    except Exception as exc:
        faults.report("internal", exc)
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


def sync_wrapper(start: Start, read: Read, failure: Callable[[BaseException], Any] | None = None,
                 gateway: bool = False) -> Callable[..., Any]:  # fmt: skip
    """A wrapt wrapper for a synchronous backend method (``gateway``: calls made inside it
    are its own, see :data:`inside_gateway`)."""

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        if type(wrapped).__name__ == _WRAPPER and _reuse_spans():  # beneath, it is the method
            return _innermost(wrapped, instance, wrapper)(*args, **kwargs)
        opened = None if inside_gateway.get() else start(instance, args, kwargs)
        if opened is None:
            return wrapped(*args, **kwargs)
        call, send_args, send, context = opened
        token = inside_gateway.set(context or True) if gateway else None
        try:
            emission = call.emission  # the span made current (call.activate(), written out)
            with emission if emission is not None else call.activate():
                result = wrapped(*send_args, **send)
        except BaseException as exc:
            call.fail(exc if failure is None else _named(failure, exc))
            raise
        finally:
            if token is not None:
                inside_gateway.reset(token)
        try:
            return read(call, result, context)
        except Exception as exc:
            unusable(call, exc)
            return result

    return wrapper


def async_wrapper(start: Start, read: Read, failure: Callable[[BaseException], Any] | None = None,
                  gateway: bool = False) -> Callable[..., Any]:  # fmt: skip
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
            try:
                with call.activate():
                    result = await wrapped(*send_args, **send)
            except BaseException as exc:
                call.fail(exc if failure is None else _named(failure, exc))
                raise
            finally:
                if token is not None:
                    inside_gateway.reset(token)
            try:
                return read(call, result, context)
            except Exception as exc:
                unusable(call, exc)
                return result

        return run()

    return wrapper
