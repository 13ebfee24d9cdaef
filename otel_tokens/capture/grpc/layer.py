"""The gRPC layer: a call to a model API's gRPC method (Vertex AI's ``PredictionService``,
xAI's ``Chat``) is recorded from the messages the client's own deserialiser made, whichever
library built the call (``vertexai``, ``xai-sdk``, a generated stub used by hand).

grpc's channels make one callable per method (``Channel.unary_unary``/``unary_stream``,
sync and ``grpc.aio``, wrapped by :mod:`.grpc_patches`): the method's path is looked up then
(:data:`METHODS`), and only a recognised method's callable is wrapped; any other is returned
as made. A wrapped callable opens the call as it is called and ends it with the answer:
returned (``__call__``, ``with_call``), a future's result, an awaited ``grpc.aio`` call, or a
stream of messages read as the program reads them (the one stream proxy, :mod:`.stream`).
A failed call's ``error.type`` is its gRPC status (``RESOURCE_EXHAUSTED``). A polled method
(:attr:`..wire.protobuf.Method.polled`: xAI's deferred completions) records no call per
poll: the answer that says the work ended is recorded as one call (spent already: never
refused by a budget), once per response id, however often it is read. Answers, calls
and streams pass through unchanged; a call an SDK capture records already is not recorded
again (:data:`.sent.inside_sdk`, :data:`.sent.inside_gateway`).
"""

from __future__ import annotations

import weakref
from functools import partial
from typing import Any

import wrapt

from ... import faults
from ...call import Call
from ...handler import get_handler
from ..lifecycle import open_call, stop_with, sync_wrapper, unusable
from ..sent import inside_sdk
from ..stream import wrap_stream
from ..wire import vertex_grpc, xai_grpc
from ..wire.protobuf import Method, status

__all__ = ["METHODS", "wrapper"]

#: full method path (``/package.Service/Method``) -> what its messages say
METHODS: dict[str, Method] = {**vertex_grpc.METHODS, **xai_grpc.METHODS}


def _server(target: Any) -> tuple[str | None, int | None]:
    """(address, port) of a channel's target (``host:port``, ``dns:///host:port``)."""
    if not isinstance(target, str):
        return None, None
    rest = target.rpartition("///")[2] if "///" in target else target
    host, colon, port = rest.rpartition(":")
    if not colon or "]" in port:
        return rest or None, None
    return host.strip("[]") or None, int(port) if port.isdigit() else None


def _start(known: tuple[Method, tuple], args: tuple, kwargs: dict) -> Any:
    """Open the call of a recognised method's request (None: an SDK capture records it)."""
    if inside_sdk.get():
        return None
    method, (address, port) = known
    try:
        request = args[0] if args else kwargs.get("request")
        model = method.model(request)
    except Exception as exc:
        faults.report("internal", exc)
        return None
    call = open_call(
        partial(method.request, model=model),
        request,
        operation=method.operation,
        provider=method.provider,
        request_model=model,
        stream=method.accumulator is not None,
        server_address=address,
        server_port=port,
    )
    return None if call is None else (call, args, kwargs, (method, request))


def _answered(call: Call, message: Any, context: Any) -> Any:
    """End the call with a unary answer; returns it unchanged."""
    try:
        stop_with(call, context[0].response(message))
    except Exception as exc:
        unusable(call, exc)
    return message


def _with_call(call: Call, result: Any, context: Any) -> Any:
    """``with_call``'s (answer, call): ended with the answer."""
    _answered(call, result[0], context)
    return result


def _future(call: Call, future: Any, context: Any) -> Any:
    """``future()``'s future: the call ends when it does."""

    def done(finished: Any) -> None:
        try:
            try:
                error = finished.exception()
            except BaseException as exc:  # cancelled
                error = exc
            if error is not None:
                call.fail(status(error))
            else:
                _answered(call, finished.result(), context)
        except Exception as exc:  # grpc's callback thread: never raised into it
            faults.report("internal", exc)

    future.add_done_callback(done)
    return future


def _stream(is_async: bool, call: Call, stream: Any, context: Any) -> Any:
    """A stream of messages, read as the program reads it (the one stream proxy)."""
    method, request = context
    return wrap_stream(stream, call, method.accumulator(request), is_async)  # type: ignore[misc]


def _awaited(call: Call, pending: Any, context: Any) -> Any:
    """A ``grpc.aio`` unary call: ended as it is awaited (or dropped)."""
    return _AioUnary(pending, call, context)


_UNARY = sync_wrapper(_start, _answered, status, sdk=True)
_UNARY_WITH_CALL = sync_wrapper(_start, _with_call, status, sdk=True)
_UNARY_FUTURE = sync_wrapper(_start, _future, status, sdk=True)
_STREAM = sync_wrapper(_start, partial(_stream, False), status, sdk=True)
_AIO_UNARY = sync_wrapper(_start, _awaited, status, sdk=True)
_AIO_STREAM = sync_wrapper(_start, partial(_stream, True), status, sdk=True)


# -- a polled method: the answer that ends the work, recorded once ---------------------------
def _polled(known: tuple[Method, tuple], message: Any) -> None:
    """A poll's answer: one call when it says the work ended (pending: nothing), unless its
    response was counted before or an SDK capture records it; never raises."""
    method, (address, port) = known
    try:
        if inside_sdk.get():
            return
        answer = method.response(message)
        handler = get_handler()
        again = method.once and answer.response_id
        if answer.pending or (again and handler.counted_before(method.once, answer.response_id)):
            return
        call = handler.start(
            operation=method.operation,
            provider=method.provider,
            request_model=answer.model,
            server_address=address,
            server_port=port,
            spent=True,
        )
    except Exception as exc:
        faults.report("internal", exc)
        return
    stop_with(call, answer, method.once)


def _polled_future(known: tuple[Method, tuple], future: Any) -> Any:
    """``future()`` of a polled method: its answer recorded when it is done."""

    def done(finished: Any) -> None:
        try:
            if not finished.cancelled() and finished.exception() is None:
                _polled(known, finished.result())
        except Exception as exc:  # grpc's callback thread: never raised into it
            faults.report("internal", exc)

    future.add_done_callback(done)
    return future


class _Callable(wrapt.ObjectProxy):  # type: ignore[misc]
    """A recognised method's callable; everything but calling it passes through."""

    def __init__(self, wrapped: Any, known: tuple[Method, tuple]) -> None:
        super().__init__(wrapped)
        self._self_known = known


class _Unary(_Callable):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _UNARY(self.__wrapped__, self._self_known, args, kwargs)

    def with_call(self, *args: Any, **kwargs: Any) -> Any:
        return _UNARY_WITH_CALL(self.__wrapped__.with_call, self._self_known, args, kwargs)

    def future(self, *args: Any, **kwargs: Any) -> Any:
        return _UNARY_FUTURE(self.__wrapped__.future, self._self_known, args, kwargs)


class _Stream(_Callable):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _STREAM(self.__wrapped__, self._self_known, args, kwargs)


class _AioUnaryCallable(_Callable):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _AIO_UNARY(self.__wrapped__, self._self_known, args, kwargs)


class _AioStream(_Callable):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _AIO_STREAM(self.__wrapped__, self._self_known, args, kwargs)


class _PolledUnary(_Callable):
    """A polled method's callable: called as made, its answer then read (:func:`_polled`)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        message = self.__wrapped__(*args, **kwargs)
        _polled(self._self_known, message)
        return message

    def with_call(self, *args: Any, **kwargs: Any) -> Any:
        result = self.__wrapped__.with_call(*args, **kwargs)
        _polled(self._self_known, result[0])
        return result

    def future(self, *args: Any, **kwargs: Any) -> Any:
        return _polled_future(self._self_known, self.__wrapped__.future(*args, **kwargs))


class _AioPolledCallable(_Callable):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _AioPolled(self.__wrapped__(*args, **kwargs), self._self_known)


class _AioPolled(wrapt.ObjectProxy):  # type: ignore[misc]
    """A ``grpc.aio`` call of a polled method: its answer read as it is awaited."""

    def __init__(self, pending: Any, known: tuple[Method, tuple]) -> None:
        super().__init__(pending)
        self._self_known = known

    def __await__(self) -> Any:
        message = yield from self.__wrapped__.__await__()
        _polled(self._self_known, message)
        return message


class _AioUnary(wrapt.ObjectProxy):  # type: ignore[misc]
    """A ``grpc.aio`` unary call (awaitable, and a call object): its answer read as it is
    awaited; dropped unawaited, its call ends without usage."""

    def __init__(self, pending: Any, call: Call, context: Any) -> None:
        super().__init__(pending)
        self._self_call, self._self_context = call, context
        self._self_finalizer = weakref.finalize(self, _dropped, call)

    def __await__(self) -> Any:
        call = self._self_call
        try:
            message = yield from self.__wrapped__.__await__()
        except BaseException as exc:
            self._self_finalizer.detach()
            if not call.ended:
                call.fail(status(exc))
            raise
        self._self_finalizer.detach()
        if not call.ended:
            _answered(call, message, self._self_context)
        return message


def _dropped(call: Call) -> None:
    if not call.ended:
        call.stop(None)


_CALLABLES = {
    "unary_unary": _Unary,
    "unary_stream": _Stream,
    "aio_unary_unary": _AioUnaryCallable,
    "aio_unary_stream": _AioStream,
}


def _made(kind: type, wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """``Channel.unary_unary(method, ...)``: the callable it makes, wrapped when the method
    is a recognised one."""
    made = wrapped(*args, **kwargs)
    try:
        path = args[0] if args else kwargs.get("method")
        method = METHODS.get(path) if isinstance(path, str) else None
        if method is None:
            return made
        if method.polled:
            kind = _AioPolledCallable if kind is _AioUnaryCallable else _PolledUnary
        return kind(made, (method, _server(getattr(instance, "_target", None))))
    except Exception as exc:
        faults.report("internal", exc)
        return made


def wrapper(name: str, is_async: bool) -> Any:
    """The wrapt wrapper of a channel's ``name`` (``unary_unary``, ``aio_unary_stream``...)."""
    return partial(_made, _CALLABLES[name])
