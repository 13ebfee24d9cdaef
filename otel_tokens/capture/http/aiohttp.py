"""The HTTP layer on ``aiohttp`` (``ClientSession._request``, which ``session.post`` and
azure-core's async transport go through): the same recognition, readers and endings as on
httpx (:mod:`.layer`).

aiohttp returns the response before reading its body. Its ``content`` (the payload stream,
decompressed by aiohttp) is wrapped: whatever the program reads through it (``read()``,
``json()``, ``text()``, ``readline()``, ``async for line in resp.content``, ``iter_chunked``,
``iter_any``, ``iter_chunks``) passes on unchanged and is read on the way; the call ends at
the body's end, on an error, or when the response is dropped.
"""

from __future__ import annotations

from typing import Any

import wrapt

from ... import faults
from ...call import Call
from .layer import Ending, Reader, failed, json_object, open_request
from ..lifecycle import async_wrapper
from ..sent import inside_sdk
from ..wire.formats import find
from .forms import aiohttp_form

__all__ = ["wrapper"]


def _url(instance: Any, given: Any) -> Any:
    """The request's ``yarl.URL``, joined to the session's ``base_url`` as aiohttp joins it."""
    build = getattr(instance, "_build_url", None)
    if build is not None:
        return build(given)
    from yarl import URL

    return URL(given)


def _body(kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON object a request sends (``json=``, or ``data=`` bytes or text), or None."""
    given = kwargs.get("json")
    if given is not None:
        return given if type(given) is dict else None
    return json_object(kwargs.get("data"))


def _start(instance: Any, args: tuple, kwargs: dict) -> tuple[Call, tuple, dict, Any] | None:
    """Open the call of a request to a model API's wire path (None: not one, or an SDK
    capture records it already)."""
    try:
        method = args[0] if args else kwargs.get("method")
        if not isinstance(method, str) or method.upper() != "POST" or inside_sdk.get():
            return None
        url = _url(instance, args[1] if len(args) > 1 else kwargs.get("str_or_url"))
        wire = find(url.path)
        body = _body(kwargs) if wire is not None else None
        if body is None and wire is not None and wire.form:
            body = aiohttp_form(kwargs.get("data"), kwargs.get("headers")) or {}
        if body is None:
            return None
        base = f"{url.origin()}{url.path}"  # no user name or password, no query
    except Exception as exc:
        faults.report("internal", exc)
        return None
    call = open_request(wire, body, url.path, base)
    if call is None:
        return None
    return call, args, kwargs, (wire, body)


def _read(call: Call, response: Any, context: Any) -> Any:
    """Leave the call to end as the program reads the response's content."""
    wire, body = context
    if failed(call, response.status):
        return response
    response.content = _ContentTee(response.content, Reader(call, wire, body, response.headers))
    return response


class _ContentTee(wrapt.ObjectProxy):  # type: ignore[misc]
    """aiohttp's payload stream: each read passed on unchanged and shown to the reader."""

    def __init__(self, content: Any, reader: Reader) -> None:
        super().__init__(content)
        self._self_reader = reader
        self._self_end = Ending(self, reader)

    async def _self_step(self, step: Any, whole: bool = False) -> Any:
        """``await step()``: its bytes fed, the end (no bytes, or the whole body) noted."""
        try:
            data = await step()
        except BaseException as exc:
            self._self_end("error", exc)
            raise
        chunk = data[0] if type(data) is tuple else data  # readchunk(): (bytes, end of chunk)
        if chunk:
            self._self_reader.feed(chunk)
        if whole or (not chunk and self.__wrapped__.at_eof()):
            self._self_end("exhausted")
        return data

    async def read(self, n: int = -1) -> bytes:
        return await self._self_step(lambda: self.__wrapped__.read(n), whole=n == -1)

    async def readany(self) -> bytes:
        return await self._self_step(self.__wrapped__.readany)

    async def readchunk(self) -> tuple[bytes, bool]:
        return await self._self_step(self.__wrapped__.readchunk)

    async def readline(self, *args: Any, **kwargs: Any) -> bytes:
        return await self._self_step(lambda: self.__wrapped__.readline(*args, **kwargs))

    async def readuntil(self, *args: Any, **kwargs: Any) -> bytes:
        return await self._self_step(lambda: self.__wrapped__.readuntil(*args, **kwargs))

    async def readexactly(self, n: int) -> bytes:
        return await self._self_step(lambda: self.__wrapped__.readexactly(n))

    def __aiter__(self) -> Any:
        from aiohttp.streams import AsyncStreamIterator

        return AsyncStreamIterator(self.readline)

    def iter_chunked(self, n: int) -> Any:
        from aiohttp.streams import AsyncStreamIterator

        return AsyncStreamIterator(lambda: self.read(n))

    def iter_any(self) -> Any:
        from aiohttp.streams import AsyncStreamIterator

        return AsyncStreamIterator(self.readany)

    def iter_chunks(self) -> Any:
        from aiohttp.streams import ChunkTupleAsyncStreamIterator

        return ChunkTupleAsyncStreamIterator(self)


_REQUEST = async_wrapper(_start, _read, sdk=True)


def wrapper(name: str, is_async: bool) -> Any:
    """The wrapt wrapper of ``aiohttp.ClientSession._request``."""
    return _REQUEST
