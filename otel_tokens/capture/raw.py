"""Raw-response results (``with_raw_response``, ``with_streaming_response``): observed as the
caller reads them, never read ahead.

Such a call returns the SDK's response object (``APIResponse``, ``AsyncAPIResponse``,
``LegacyAPIResponse``) before its body is read. The caller then parses it (``parse()``, sync
or async: a non-streamed result's usage is read from the parsed object; a stream comes back
wrapped in the one stream proxy), or reads the body itself (``read``/``text``/``json``/
``content``: the usage is read from the JSON; ``iter_bytes``/``iter_text``/``iter_lines``: the
chunks are kept as they pass and, once the iteration ends, decoded with the SDK's own SSE
decoder and shown to the stream accumulator), or closes it unread. Each of these ends the call
once; the caller gets exactly what the SDK returns.
"""

from __future__ import annotations

import importlib
import json
import threading
import weakref
from typing import Any, AsyncIterator, Callable, Iterator

import wrapt

from .. import faults
from ..call import Call
from ..usage import Usage
from .stream import STREAM_END, Accumulator, wrap_stream

__all__ = ["RAW_TYPES", "wrap_raw"]

#: the SDKs' raw-response classes (openai, anthropic; both majors)
RAW_TYPES = frozenset(("APIResponse", "AsyncAPIResponse", "LegacyAPIResponse"))
_MAX_BODY = 64 * 1024 * 1024  # bytes of a raw stream kept to decode at its end


class RawEnding:
    """The capture side of one raw response: how its call ends, once."""

    def __init__(
        self,
        call: Call,
        finish: Callable[[Any], None],
        accumulator: Accumulator | None,
        is_async: bool,
        once: str | None,
    ) -> None:
        self.call = call
        self.finish = finish  # ends the call with a parsed result (the operation's reader)
        self.once = once  # see capture.lifecycle.Operation
        self.acc = accumulator  # for a streamed body
        self.is_async = is_async
        self.stream: Any = None  # the proxy returned for a parsed stream (returned again)
        self.chunks: list[Any] = []
        self.size = 0
        self.lines = False
        self._lock = threading.Lock()
        self._done = False

    def _claim(self) -> bool:
        with self._lock:
            if self._done:
                return False
            self._done = True
            return True

    def parsed(self, result: Any) -> Any:
        """What ``parse()`` returned: a stream comes back observed, any other result ends the
        call with its usage. Returns what the caller gets."""
        try:
            if self.stream is not None and self.stream.__wrapped__ is result:
                return self.stream
            if self.acc is not None and hasattr(
                result, "__anext__" if self.is_async else "__next__"
            ):
                if not self._claim():
                    return result
                self.stream = wrap_stream(result, self.call, self.acc, self.is_async, self.once)
                return self.stream
            self.finish_parsed(result)
        except Exception as exc:
            faults.report("internal", exc)
            self.end(None, "error")
        return result

    def finish_parsed(self, result: Any) -> None:
        """A non-streamed result (parsed, or the body's JSON): its usage ends the call."""
        if not self._claim():
            return
        try:
            self.finish(result)
        except ValueError as exc:  # usage values that are not token counts
            faults.report("usage_invalid", exc)
            self.call.stop(Usage())

    def body(self, data: Any) -> None:
        """The whole body, read by the caller: JSON, or a stream's server-sent events."""
        try:
            if isinstance(data, bytearray):
                data = bytes(data)
            if self.acc is not None and data.lstrip()[:1] not in (b"{", "{"):  # events, not JSON
                self.chunks, self.lines = [data], False
                if data and self.call.first_chunk_at is None:
                    self.call.first_chunk()
                self.done("read")
                return
            self.finish_parsed(_loads(data) if isinstance(data, (str, bytes)) else data)
        except Exception as exc:
            faults.report("parse", exc)
            self.end(None, "error")

    def seen(self, chunk: Any) -> None:
        """One chunk (or line) of the body the caller iterates."""
        size = self.size
        if size > _MAX_BODY or self._done:
            return
        if not size and self.call.first_chunk_at is None:
            self.call.first_chunk()
        self.size = size + len(chunk)
        self.chunks.append(chunk)

    def done(self, how: str = "exhausted") -> None:
        """The caller read the body to its end: decode what passed."""
        if self.acc is None:
            self.body("".join(_text(c) for c in self.chunks))
            return
        try:
            chunks, self.chunks = self.chunks, []
            for item in _events(self.call, chunks, self.lines):
                self.acc.add(item)
        except Exception as exc:
            faults.report("parse", exc)
        self.end_stream(how)

    def end_stream(self, how: str) -> None:
        if not self._claim():
            return
        if self.acc is None:
            self.call.stop(None, attributes={STREAM_END: how})
        else:
            self.acc.end_call(self.call, how, once=self.once)

    def end(self, error: BaseException | None, how: str) -> None:
        """Closed unread, collected, or failed while reading."""
        if self.chunks and error is None:
            self.done(how)
            return
        if not self._claim():
            return
        if error is not None:
            self.call.fail(error, attributes={STREAM_END: how})
        else:
            self.call.stop(None, attributes={STREAM_END: how})


def _text(chunk: Any) -> str:
    return chunk.decode("utf-8", "replace") if isinstance(chunk, (bytes, bytearray)) else chunk


_decoders: dict[str, Any] = {}  # SDK module -> its SSEDecoder class

try:  # the SDKs' own JSON parser (both depend on it); json when it is not there
    from jiter import from_json as _from_json

    def _loads(payload: str | bytes) -> Any:
        """JSON from text or raw bytes (not decoded to text first); ValueError when invalid.
        Bytes that are not UTF-8 are read as json reads them decoded with replacement."""
        try:
            raw = payload if type(payload) is bytes else payload.encode("utf-8", "replace")
            return _from_json(raw)
        except ValueError:
            if type(payload) is not bytes:
                raise
            return json.loads(payload.decode("utf-8", "replace"))
except ImportError:  # pragma: no cover - an SDK without jiter
    _loads = json.loads


def _events(call: Call, chunks: list[Any], lines: bool) -> Iterator[Any]:
    """The JSON payloads of a server-sent-events body, decoded by the SDK's own decoder: line
    by line when the caller read lines, else from the bytes."""
    module = "anthropic" if call.provider.startswith(("anthropic", "aws", "gcp")) else "openai"
    decoder_class = _decoders.get(module)
    if decoder_class is None:
        decoder_class = _decoders[module] = importlib.import_module(
            f"{module}._streaming"
        ).SSEDecoder
    decoder = decoder_class()
    if lines:
        decode = decoder.decode
        events = (
            decode((line if type(line) is str else _text(line)).rstrip("\r\n"))
            for line in [*chunks, ""]
        )
    else:
        events = decoder.iter_bytes(iter(["".join(_text(c) for c in chunks).encode("utf-8")]))
    for event in events:
        payload = event.data if event is not None else None
        if payload and payload != "[DONE]":
            try:
                yield _loads(payload)
            except ValueError:
                faults.report("parse", detail="an unreadable server-sent event")


class _Base(wrapt.ObjectProxy):  # type: ignore[misc]
    def __init__(self, wrapped: Any, ending: RawEnding) -> None:
        super().__init__(wrapped)
        self._self_ending = ending
        self._self_finalizer = weakref.finalize(self, ending.end, None, "abandoned")

    def _self_iterated(self, chunks: Iterator[Any], line: bool = False) -> Iterator[Any]:
        ending = self._self_ending
        ending.lines = line
        seen = ending.seen
        try:
            for chunk in chunks:
                seen(chunk)
                yield chunk
        except GeneratorExit:
            raise
        except BaseException as exc:
            ending.end(exc, "error")
            raise
        ending.done()


class RawResponseProxy(_Base):
    """``APIResponse`` (sync): parse(), read/text/json, iter_bytes/iter_text/iter_lines, close()."""

    def parse(self, *args: Any, **kwargs: Any) -> Any:
        return self._self_ending.parsed(self.__wrapped__.parse(*args, **kwargs))

    def read(self) -> Any:
        data = self.__wrapped__.read()
        self._self_ending.body(data)
        return data

    def text(self) -> Any:
        data = self.__wrapped__.text()
        self._self_ending.body(data)
        return data

    def json(self) -> Any:
        data = self.__wrapped__.json()
        if self._self_ending.acc is None:
            self._self_ending.finish_parsed(data)
        return data

    def iter_bytes(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        return self._self_iterated(self.__wrapped__.iter_bytes(*args, **kwargs))

    def iter_text(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        return self._self_iterated(self.__wrapped__.iter_text(*args, **kwargs))

    def iter_lines(self) -> Iterator[Any]:
        return self._self_iterated(self.__wrapped__.iter_lines(), line=True)

    def close(self) -> None:
        try:
            self.__wrapped__.close()
        finally:
            self._self_finalizer.detach()
            self._self_ending.end(None, "closed")


class LegacyResponseProxy(_Base):
    """``LegacyAPIResponse`` (openai's ``with_raw_response``): a sync parse(), the body as the
    ``content``/``text`` properties."""

    def parse(self, *args: Any, **kwargs: Any) -> Any:
        return self._self_ending.parsed(self.__wrapped__.parse(*args, **kwargs))

    @property
    def content(self) -> Any:
        data = self.__wrapped__.content
        self._self_ending.body(data)
        return data

    @property
    def text(self) -> Any:
        data = self.__wrapped__.text
        self._self_ending.body(data)
        return data


class AsyncRawResponseProxy(_Base):
    """``AsyncAPIResponse``: the same, every reader awaited."""

    async def parse(self, *args: Any, **kwargs: Any) -> Any:
        return self._self_ending.parsed(await self.__wrapped__.parse(*args, **kwargs))

    async def read(self) -> Any:
        data = await self.__wrapped__.read()
        self._self_ending.body(data)
        return data

    async def text(self) -> Any:
        data = await self.__wrapped__.text()
        self._self_ending.body(data)
        return data

    async def json(self) -> Any:
        data = await self.__wrapped__.json()
        if self._self_ending.acc is None:
            self._self_ending.finish_parsed(data)
        return data

    def iter_bytes(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        return self._self_aiterated(self.__wrapped__.iter_bytes(*args, **kwargs))

    def iter_text(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        return self._self_aiterated(self.__wrapped__.iter_text(*args, **kwargs))

    def iter_lines(self) -> AsyncIterator[Any]:
        return self._self_aiterated(self.__wrapped__.iter_lines(), line=True)

    async def _self_aiterated(
        self, chunks: AsyncIterator[Any], line: bool = False
    ) -> AsyncIterator[Any]:
        ending = self._self_ending
        ending.lines = line
        seen = ending.seen
        try:
            async for chunk in chunks:
                seen(chunk)
                yield chunk
        except GeneratorExit:
            raise
        except BaseException as exc:
            ending.end(exc, "error")
            raise
        ending.done()

    async def close(self) -> None:
        try:
            await self.__wrapped__.close()
        finally:
            self._self_finalizer.detach()
            self._self_ending.end(None, "closed")


def wrap_raw(
    result: Any,
    call: Call,
    finish: Callable[[Any], None],
    accumulator: Accumulator | None,
    is_async: bool,
    once: str | None = None,
) -> Any:
    """``result`` (a raw response) as the caller will read it, its call ending as it is read:
    ``finish(parsed)`` ends it with a parsed result, a streamed body goes to ``accumulator``."""
    ending = RawEnding(call, finish, accumulator, is_async, once)
    name = type(result).__name__
    if name == "LegacyAPIResponse":
        return LegacyResponseProxy(result, ending)
    if name == "AsyncAPIResponse":
        return AsyncRawResponseProxy(result, ending)
    return RawResponseProxy(result, ending)
