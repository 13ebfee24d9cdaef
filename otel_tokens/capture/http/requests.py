"""The HTTP layer on ``requests`` (``Session.send``, which ``requests.post`` and azure-core's
transport go through): the same recognition, readers and endings as on httpx
(:mod:`.layer`).

``send(stream=False)`` has read the body before it returns: it is read then. With
``stream=True`` the response's ``raw`` (urllib3's response) is wrapped: what the program
pulls through ``stream()`` or ``read()`` (``iter_content``, ``iter_lines``, ``content``)
passes on unchanged and is read on the way; closing it, or dropping it unread, ends the call.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import wrapt

from ... import faults
from ...call import Call
from .layer import (
    Ending,
    Reader,
    failed,
    json_object,
    open_request,
    passed,
    read_whole,
)
from ..lifecycle import sync_wrapper
from ..sent import inside_sdk
from ..wire.formats import find
from .forms import from_bytes

__all__ = ["wrapper"]


def _start(instance: Any, args: tuple, kwargs: dict) -> tuple[Call, tuple, dict, Any] | None:
    """Open the call of a prepared request to a model API's wire path (None: not one, or an
    SDK capture records it already)."""
    try:
        request = args[0] if args else kwargs.get("request")
        if request.method != "POST" or inside_sdk.get():
            return None
        parts = urlsplit(request.url)
        wire = find(parts.path)
        body = json_object(request.body) if wire is not None else None
        if body is None and wire is not None and wire.form:
            body = from_bytes(request.headers.get("content-type"), request.body) or {}
        if body is None:
            return None
        netloc = parts.netloc.rpartition("@")[2]  # never a user name or password
        base = f"{parts.scheme}://{netloc}{parts.path}"
    except Exception as exc:
        faults.report("internal", exc)
        return None
    call = open_request(wire, body, parts.path, base)
    if call is None:
        return None
    return call, args, kwargs, (wire, body, kwargs.get("stream") is True)


def _read(call: Call, response: Any, context: Any) -> Any:
    """End the call from the answer, or leave it to end as the program reads ``raw``."""
    wire, body, streamed = context
    if failed(call, response.status_code):
        return response
    if not streamed:  # read by send: the decoded body
        read_whole(call, wire, body, response.headers, response.content)
        return response
    response.raw = _RawTee(response.raw, Reader(call, wire, body, response.headers))
    return response


class _RawTee(wrapt.ObjectProxy):  # type: ignore[misc]
    """urllib3's response, each chunk the program pulls passed on unchanged and shown to the
    reader (decoded: as ``requests`` asks for it; bytes asked for still encoded are not
    read, the call then has no usage)."""

    def __init__(self, raw: Any, reader: Reader) -> None:
        super().__init__(raw)
        self._self_reader = reader
        self._self_end = Ending(self, reader)

    def _self_check(self, decode_content: Any) -> None:
        if decode_content is False and self.__wrapped__.headers.get("content-encoding"):
            self._self_reader.broken = True  # encoded bytes: not read here

    def stream(self, amt: Any = 2**16, decode_content: Any = None) -> Any:
        self._self_check(decode_content)
        chunks = self.__wrapped__.stream(amt, decode_content=decode_content)
        yield from passed(chunks, self._self_reader, self._self_end)  # the tee lives meanwhile

    def read(self, amt: Any = None, *args: Any, **kwargs: Any) -> Any:
        self._self_check(kwargs.get("decode_content", args[0] if args else None))
        try:
            data = self.__wrapped__.read(amt, *args, **kwargs)
        except BaseException as exc:
            self._self_end("error", exc)
            raise
        if data:
            self._self_reader.feed(data)
        if not data or amt is None:  # the end: nothing more, or everything at once
            self._self_end("exhausted")
        return data

    def close(self) -> None:
        try:
            self.__wrapped__.close()
        finally:
            self._self_end("closed")


_SEND = sync_wrapper(_start, _read, sdk=True)


def wrapper(name: str, is_async: bool) -> Any:
    """The wrapt wrapper of ``requests.Session.send``."""
    return _SEND
