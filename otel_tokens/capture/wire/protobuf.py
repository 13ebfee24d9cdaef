"""What every gRPC wire format shares (:mod:`.vertex_grpc`, :mod:`.xai_grpc`): the shape of
one recognised method (:class:`Method`), a message's plain protobuf form, an enum field's
name and a failed call's status.

A gRPC method is recognised by its full path (``/package.Service/Method``), read once when a
client makes its callable; its request and response are the messages the client's own
(de)serialisers made: plain protobuf, or proto-plus wrappers (Google's generated clients)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from ...request import Request
from ..lifecycle import Response
from ..stream import Accumulator

__all__ = ["Method", "enum_name", "plain", "status"]


class Method(NamedTuple):
    """One recognised gRPC method.

    ``provider``: ``gen_ai.provider.name``; ``operation``: ``gen_ai.operation.name``;
    ``model(request)``: the requested model; ``request(request, model)``: what the estimate
    reads; ``response(message)``: a whole answer read; ``accumulator(request)``: a reader of
    the streamed messages (None: the method answers once); ``polled``: the method asks
    after work started before (a deferred completion): its call is recorded only when an
    answer says the work ended, once per response id under ``once``."""

    provider: str
    operation: str
    model: Callable[[Any], str | None]
    request: Callable[[Any, str | None], Request | None]
    response: Callable[[Any], Response]
    accumulator: Callable[[Any], Accumulator] | None = None
    polled: bool = False
    once: str | None = None


def plain(message: Any) -> Any:
    """The protobuf message itself of a proto-plus wrapper (``Message.pb``); a plain protobuf
    message as it is."""
    to_pb = getattr(type(message), "pb", None)
    return to_pb(message) if to_pb is not None else message


def enum_name(message: Any, field: str) -> str | None:
    """The name of an enum field's value (``STOP``), None for its zero value (unspecified)."""
    number = getattr(message, field, 0)
    if not number:
        return None
    values = message.DESCRIPTOR.fields_by_name[field].enum_type.values_by_number
    found = values.get(number)
    return found.name if found is not None else str(number)


def status(error: Any) -> Any:
    """A failed call's ``error.type``: its gRPC status name (``RESOURCE_EXHAUSTED``), as the
    alerts on rate limits and server errors read it; anything else as it is."""
    code = getattr(error, "code", None)
    if callable(code):
        try:
            name = getattr(code(), "name", None)
        except Exception:
            return error
        if isinstance(name, str):
            return name
    return error
