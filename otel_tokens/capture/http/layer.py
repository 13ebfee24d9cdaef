"""The HTTP layer: a POST sent with httpx (or its fork httpx2) to a model API's wire path is
recorded from the bytes as the provider sent them, whichever library built it (a provider's
own SDK, a hand-written call, a client nobody has named).

``Client.send``/``AsyncClient.send`` are wrapped (:mod:`.http_patches`). A request is
recorded when it is a POST, its path names a wire format (:mod:`..wire`), its body is a JSON
object (or, where the format takes one, a multipart form: its text fields, :mod:`.forms`)
and no SDK capture records it already (:data:`..sent.inside_sdk`,
:data:`..sent.inside_gateway`): the provider is named by its URL (:mod:`otel_tokens.endpoints`),
the model by the body (or the path), the usage by the answer. Anything else passes after a
test of its method and path.

The answer is read as the program reads it, never ahead. ``send(stream=False)`` has read the
whole body before it returns: it is read then. With ``stream=True`` the response's byte stream
is wrapped (a tee): each chunk the program pulls is passed on unchanged and decoded on the
way (content encoding, then server-sent events or NDJSON, each event shown to the wire
format's accumulator as it completes; an event that only adds text, :attr:`.wire.Wire.plain`,
is kept as sent and decoded only if the stream ends without usage, its text then put back in
order); a JSON body is kept as it passes and read at its end.
The call ends once, as the stream does: read to its end, closed, failed, or dropped unread.
An answer with an error status ends the call failed (``error.type`` = the status code), its
body left to the program. An answer that carries no usage by its content type
(:attr:`.wire.Wire.unread`: audio, a plain-text transcript) is never read or kept: its call
ends with its usage unknown.
"""

from __future__ import annotations

import importlib
import sys
import threading
import weakref
from functools import partial
from typing import Any

from ... import faults
from ...call import Call
from ...endpoints import endpoint, server_of
from ...settings import current
from ..lifecycle import async_wrapper, open_call, stop_with, sync_wrapper, unusable
from ..raw import _loads
from ..sent import inside_sdk
from ..stream import EMPTY_EVENT_STREAM, STREAM_END, StreamObserver
from ..wire.formats import Wire, find
from ..wire.framing import framing_of
from .forms import httpx_form

__all__ = [
    "Ending",
    "Reader",
    "apassed",
    "failed",
    "json_object",
    "open_request",
    "passed",
    "read_whole",
    "wrapper",
]

_MAX_BODY = 64 * 1024 * 1024  # bytes of a JSON answer kept as it passes, to read at its end
_MAX_UNREAD = 1024 * 1024  # bytes of a stream's text-only events kept unread (Reader.unread)


# -- the request -------------------------------------------------------------------------------
def json_object(content: Any) -> dict[str, Any] | None:
    """A request body's JSON object, or None (not read yet, a form, not JSON: not a model
    API's request)."""
    if isinstance(content, str):
        content = content.encode("utf-8", "replace")
    if not isinstance(content, (bytes, bytearray)) or content[:64].lstrip()[:1] != b"{":
        return None
    try:
        body = _loads(bytes(content))
    except ValueError:
        return None
    return body if type(body) is dict else None


def _body(request: Any) -> dict[str, Any] | None:
    """An httpx request's JSON object, or None."""
    try:
        content = request.content
    except Exception:  # a streamed upload, not read: nothing to read here
        return None
    return json_object(content)


def _provider(base: str, host: str | None) -> str:
    """The provider a request's URL ``base`` names (:mod:`otel_tokens.endpoints`), kept per
    URL and settings' overrides (a request's URL is a new object each time)."""
    overrides = current().provider_urls
    hit = _providers.get(base)
    if hit is not None and hit[0] is overrides:
        return hit[1]
    found = endpoint(base, host, host or "http", None, overrides).provider
    if len(_providers) >= 256:  # programs reach a few endpoints: keep it small
        _providers.clear()
    _providers[base] = (overrides, found)
    return found


_providers: dict[str, tuple[Any, str]] = {}


def open_request(wire: Wire, body: dict[str, Any], path: str, base: str) -> Call | None:
    """Open the call of a recognised request to ``base`` (its URL: scheme, host, port and
    path; no user name, password or query). None: the body is not the format's, as
    :attr:`Wire.accepts` tells, or instrumentation itself failed."""
    try:
        if wire.accepts is not None and not wire.accepts(path, body):
            return None
        address, port = server_of(base)
        provider = _provider(base, address)
        model = wire.model(path, body)
        stream = wire.streams(path, body)
    except Exception as exc:
        faults.report("internal", exc)
        return None
    return open_call(
        partial(_describe, wire, model),
        body,
        operation=wire.operation,
        provider=provider,
        request_model=model,
        stream=stream,
        server_address=address,
        server_port=port,
        billed=wire.billed,
    )


def _start(instance: Any, args: tuple, kwargs: dict) -> tuple[Call, tuple, dict, Any] | None:
    """Open the call of an httpx request to a model API's wire path (None: not one, or an
    SDK capture records it already)."""
    try:
        request = args[0] if args else kwargs.get("request")
        if request.method != "POST" or inside_sdk.get():
            return None
        url = request.url
        wire = find(url.path)
        body = _body(request) if wire is not None else None
        if body is None and wire is not None and wire.form:
            body = httpx_form(request) or {}
        if body is None:
            return None
        base = f"{url.scheme}://{url.netloc.decode('ascii', 'replace')}{url.path}"
    except Exception as exc:
        faults.report("internal", exc)
        return None
    call = open_request(wire, body, url.path, base)
    if call is None:
        return None
    return call, args, kwargs, (wire, body, kwargs.get("stream") is True)


def _describe(wire: Wire, model: str | None, body: dict[str, Any]) -> Any:
    return wire.request(body, model)


# -- the answer --------------------------------------------------------------------------------
class Reader:
    """One answer's body, read as it passes (decoded, framed, each event shown to the wire
    format's accumulator), and how its call ends: once, whichever ending comes first."""

    def __init__(self, call: Call, wire: Wire, body: dict[str, Any], headers: Any) -> None:
        self.call, self.wire = call, wire
        kind = headers.get("content-type") or ""
        framing = framing_of(kind)
        self.framing = framing() if framing is not None and wire.accumulator is not None else None
        #: an answer that carries no usage (audio, a plain-text transcript): never read
        self.unread_body = self.framing is None and wire.unread is not None and wire.unread(kind)
        self.observer = StreamObserver(call, wire.accumulator(body)) if self.framing else None
        self.body, self.headers = body, headers
        self.decoder: Any = None  # the content encoding's, for bytes as sent
        self.kept: list[bytes] = []  # a JSON answer's bytes, as they passed
        self.size = 0
        #: events that only add text (:attr:`Wire.plain`), kept unread, read if the stream
        #: ends without usage; ``marks``: (unread events, text pieces) as each other event
        #: was read, to put their text back in the order it was sent
        self.unread: list[bytes] = []
        self.unread_size = 0
        self.marks: list[tuple[int, int]] = []
        self.usage_at = 0  # the events kept unread when usage was last read
        self.broken = False  # the body could not be read: the call ends without usage
        self._lock = threading.Lock()
        self._ended = False

    def feed(self, chunk: bytes) -> None:
        """One chunk as the program got it; never raises into the program."""
        if self.broken or self._ended or self.unread_body:
            return
        try:
            if self.decoder is not None:
                chunk = _bytes(self.decoder.decode(chunk))
            if self.observer is not None:
                self._events(self.framing.feed(chunk))
            else:
                self._keep(chunk)
        except Exception as exc:
            faults.report("parse", exc)
            self.broken = True

    def _keep(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > _MAX_BODY:
            faults.report("parse", detail="an answer too large to read for its usage")
            self.broken, self.kept = True, []
            return
        self.kept.append(chunk)

    def _events(self, events: list[bytes]) -> None:
        """Events as framed: each read now, or kept unread when it only adds text."""
        plain, call, unread = self.wire.plain, self.call, self.unread
        for event in events:
            if plain is not None and call.first_chunk_at is not None and plain(event):
                unread.append(event)
                self.unread_size += len(event)
            else:
                self._read_event(event)
        if self.unread_size > _MAX_UNREAD:
            self._read_unread()

    def _read_event(self, event: bytes) -> None:
        if self.unread:  # read after events kept unread: where their text goes (_read_unread)
            self.marks.append((len(self.unread), len(self.observer.acc.text)))  # type: ignore[union-attr]
        payload = self.framing.payload(event)  # type: ignore[union-attr]
        if payload is None or payload == b"[DONE]":
            return
        try:
            data = _loads(payload)
        except ValueError:
            faults.report("parse", detail="an unreadable stream event")
            return
        observer = self.observer
        before = observer.acc.usage  # type: ignore[union-attr]
        observer.item(self.wire.event(data))  # type: ignore[union-attr]
        if observer.acc.usage is not before:  # type: ignore[union-attr]
            self.usage_at = len(self.unread)

    def _read_unread(self) -> None:
        """The events kept unread, read in order: their text put back where it was sent
        among the others' (``marks``)."""
        unread, marks = self.unread, self.marks
        self.unread, self.unread_size, self.marks, self.usage_at = [], 0, [], 0
        acc = self.observer.acc  # type: ignore[union-attr]
        read, acc.text = acc.text, []
        events = texts = 0
        for upto, text in [*marks, (len(unread), len(read))]:
            acc.text.extend(read[texts:text])  # the text read before these events came
            for event in unread[events:upto]:
                self._read_event(event)
            events, texts = upto, text

    def _flush(self) -> None:
        """What the decoder and the framing still hold at the body's end."""
        if self.broken:
            return
        try:
            if self.decoder is not None:
                rest, self.decoder = _bytes(self.decoder.flush()), None
                if rest:
                    self.feed(rest)
            if self.observer is not None:
                self._events(self.framing.end())  # type: ignore[union-attr]
        except Exception as exc:
            faults.report("parse", exc)

    def end(self, how: str, error: BaseException | str | None = None) -> None:
        """The body ended ``how`` (``exhausted``, ``closed``, ``error``, ``abandoned``): the call
        ends with what it said, once."""
        with self._lock:
            if self._ended:
                return
            self._ended = True
        try:
            if how == "exhausted":
                self._flush()
            if self.observer is not None:
                self._end_stream(self.observer, how, error)
            else:
                self._end_body(how, error)
        except Exception as exc:
            faults.report("internal", exc)
            if not self.call.ended:
                self.call.stop(None)

    def _end_stream(self, observer: StreamObserver, how: str, error: Any) -> None:
        if self.unread:
            self._end_unread(observer.acc.usage)
        if error is None and how == "exhausted" and self.call.first_chunk_at is None:
            faults.report("parse", detail="a stream ended without a single event")
            how, error = "error", EMPTY_EVENT_STREAM
        observer.end(how, error)

    def _end_unread(self, usage: Any) -> None:
        """At the stream's end: the events kept unread are read when no usage came (their
        text, for the estimate), else those after the last usage read (a running usage)."""
        if usage is None or usage.output_tokens is None:
            self._read_unread()
            return
        later, self.unread = self.unread[self.usage_at :], []
        for event in later:
            self._read_event(event)

    def _end_body(self, how: str, error: Any) -> None:
        """A JSON answer: read at its end (one object; a JSON array of stream chunks, as
        Gemini sends a stream without ``alt=sse``)."""
        if error is not None:
            self.call.fail(error, attributes={STREAM_END: how})
            return
        if how != "exhausted" or self.broken or self.unread_body:
            self.call.stop(None, attributes={STREAM_END: how} if how != "exhausted" else None)
            return
        data, self.kept = b"".join(self.kept), []
        try:
            answer = _loads(data)
        except ValueError:
            faults.report("parse", detail="an answer that is not JSON")
            self.call.stop(None)
            return
        if type(answer) is list and self.wire.accumulator is not None:
            observer = StreamObserver(self.call, self.wire.accumulator(self.body))
            for item in answer:
                observer.item(self.wire.event(item))
            self._end_stream(observer, "exhausted", None)
            return
        try:
            response = self.wire.response(answer)
            if self.wire.headers is not None:
                response = self.wire.headers(response, self.headers)
            stop_with(self.call, response)
        except Exception as exc:
            unusable(self.call, exc)


def _decoder(package: str, headers: Any) -> Any:
    """A decoder of the body's content encoding (gzip, br, ...), the client library's own;
    None for identity."""
    names = [name.strip().lower() for name in (headers.get("content-encoding") or "").split(",")]
    names = [name for name in names if name and name != "identity"]
    if not names:
        return None
    module = importlib.import_module(f"{package}._decoders")
    decoders = [module.SUPPORTED_DECODERS[name]() for name in reversed(names)]
    return decoders[0] if len(decoders) == 1 else module.MultiDecoder(decoders)


def _bytes(decoded: Any) -> bytes:
    """A decoder's output as bytes: httpx's decoders return them, httpx2's yield them."""
    return decoded if isinstance(decoded, bytes) else b"".join(decoded)


def failed(call: Call, status: int) -> bool:
    """An answer with an error status fails its call (``error.type``: the status code); its
    body is the program's to read (an SDK raises from it). True when so."""
    if 200 <= status < 300:
        return False
    call.fail(str(status))
    return True


def read_whole(call: Call, wire: Wire, body: dict[str, Any], headers: Any, content: bytes) -> None:
    """End the call from a body the client has read whole (decoded)."""
    reader = Reader(call, wire, body, headers)
    reader.feed(content)
    reader.end("exhausted")


def _read(package: str, is_async: bool, call: Call, response: Any, context: Any) -> Any:
    """End the call from the answer ``send`` returned, or leave it to end as the program
    reads its stream; returns the response, unchanged but for its byte stream."""
    wire, body, streamed = context
    if failed(call, response.status_code):
        return response
    # read by send, or made in memory (a mock transport's): the decoded body, read now
    content = response.content if not streamed else getattr(response, "_content", None)
    if content is not None:
        read_whole(call, wire, body, response.headers, content)
        return response
    reader = Reader(call, wire, body, response.headers)
    try:
        reader.decoder = _decoder(package, response.headers)
    except Exception as exc:
        faults.report("parse", exc)
        reader.broken = True
    response.stream = _tee_class(package, is_async)(response.stream, reader)
    return response


# -- the response's byte stream, passed on as the program reads it ------------------------------
class Ending:
    """How a body's wrapper (a tee, of any client library) ends its reader's call: once, when
    the body ends, fails or is closed (``ending(how, error)``), or when the wrapper is
    dropped unread (``abandoned``, found when it is collected)."""

    __slots__ = ("_finalizer", "_reader")

    def __init__(self, owner: Any, reader: Reader) -> None:
        self._reader = reader
        self._finalizer = weakref.finalize(owner, reader.end, "abandoned")

    def __call__(self, how: str, error: BaseException | None = None) -> None:
        self._finalizer.detach()
        self._reader.end(how, error)


def passed(chunks: Any, reader: Reader, ending: Ending) -> Any:
    """``chunks`` passed on unchanged as the program pulls them, each shown to ``reader``;
    their end, or an error, ends the call (the program stopping early does not)."""
    feed = reader.feed
    try:
        for chunk in chunks:
            feed(chunk)
            yield chunk
    except GeneratorExit:  # the program stopped reading: not an ending
        raise
    except BaseException as exc:
        ending("error", exc)
        raise
    ending("exhausted")


async def apassed(chunks: Any, reader: Reader, ending: Ending) -> Any:
    """:func:`passed`, for an asynchronous iterator."""
    feed = reader.feed
    try:
        async for chunk in chunks:
            feed(chunk)
            yield chunk
    except GeneratorExit:
        raise
    except BaseException as exc:
        ending("error", exc)
        raise
    ending("exhausted")


def _sync_tee(base: type) -> type:
    """A ``SyncByteStream`` (of the client library ``base`` is from) around a response's own."""

    class Tee(base):  # type: ignore[misc, valid-type]
        """The response's byte stream: each chunk passed on unchanged, shown to the reader."""

        def __init__(self, stream: Any, reader: Reader) -> None:
            self._stream, self._reader = stream, reader
            self._ending = Ending(self, reader)

        def __iter__(self) -> Any:  # a generator of its own: the tee lives while it is read
            yield from passed(self._stream, self._reader, self._ending)

        def close(self) -> None:
            try:
                self._stream.close()
            finally:
                self._ending("closed")

    return Tee


def _async_tee(base: type) -> type:
    """An ``AsyncByteStream`` around a response's own, as :func:`_sync_tee`."""

    class AsyncTee(base):  # type: ignore[misc, valid-type]
        """The response's byte stream: each chunk passed on unchanged, shown to the reader."""

        def __init__(self, stream: Any, reader: Reader) -> None:
            self._stream, self._reader = stream, reader
            self._ending = Ending(self, reader)

        async def __aiter__(self) -> Any:  # the tee lives while it is read
            async for chunk in apassed(self._stream, self._reader, self._ending):
                yield chunk

        async def aclose(self) -> None:
            try:
                await self._stream.aclose()
            finally:
                self._ending("closed")

    return AsyncTee


_tees: dict[tuple[str, bool], type] = {}


def _tee_class(package: str, is_async: bool) -> type:
    """The tee for ``package``'s (httpx, httpx2) streams, made once."""
    found = _tees.get((package, is_async))
    if found is None:
        module = sys.modules[package]
        found = _async_tee(module.AsyncByteStream) if is_async else _sync_tee(module.SyncByteStream)
        _tees[(package, is_async)] = found
    return found


def wrapper(name: str, is_async: bool) -> Any:
    """The wrapt wrapper of ``send`` of ``name``'s (httpx, httpx2) client, on the one path; a
    recorded request is the HTTP layer's own beneath it too (an httpx transport sending with
    aiohttp or requests is not recorded twice)."""
    read = partial(_read, name, is_async)
    return (async_wrapper if is_async else sync_wrapper)(_start, read, sdk=True)
