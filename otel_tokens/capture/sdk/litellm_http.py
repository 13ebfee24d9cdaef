"""Provider usage as sent, on litellm's own HTTP clients (Anthropic, Gemini, Bedrock, Cohere...).

litellm calls most providers over its own httpx clients (``HTTPHandler``/``AsyncHTTPHandler``
``.post``) and turns each answer into its OpenAI-shaped ``Usage``: ``true`` becomes 1, ``10.7``
10, ``"10"`` 0 or an error. Every body and streamed event such a call receives inside a recorded
litellm call is held to the one rule (:func:`otel_tokens.usage.check_sent_usage`) on the
call's record of what its provider sent (:class:`..sent.Sent`): a count that breaks it makes the
call's usage unusable (``usage_invalid``), as on every other backend. Streams are read as their
bytes pass: server-sent events and JSON lines (:class:`_Lines`), and Bedrock's binary AWS event
streams (:class:`_Frames`, botocore's own parser, as litellm reads them). Only a usage block
found is noted (a provider shape not known here claims nothing). The response and its bytes
pass to litellm unchanged.
"""

from __future__ import annotations

import base64
import json
from typing import Any, AsyncIterator, Callable, Iterator

import httpx  # litellm's HTTP client (this module is imported at litellm's first request)

from ... import faults
from ..sent import inside_gateway
from ..sent import Sent

__all__ = ["provider_usage", "wrapper"]

#: a provider's usage block: OpenAI, Anthropic, Bedrock, Cohere v2 (``usage``), Gemini and
#: Vertex (``usageMetadata``), Cohere v1 (``meta``: ``billed_units``, ``tokens``), the billed
#: counts closing a Bedrock InvokeModel stream (``amazon-bedrock-invocationMetrics``)
_USAGE_KEYS = (
    "usage",
    "usageMetadata",
    "usage_metadata",
    "meta",
    "amazon-bedrock-invocationMetrics",
)
#: ... or one level down: Anthropic's ``message_start`` event, Responses events
_WRAPPERS = ("message", "response")
_MAX_LINE = 8 * 1024 * 1024  # bytes of one streamed line kept while it is incomplete
_EVENT_STREAM = "amazon.eventstream"  # Bedrock's binary framing (botocore reads it)


def provider_usage(body: Any) -> Any:
    """The usage block of a provider's body or streamed event (None: none found)."""
    if type(body) is not dict:
        return None
    for key in _USAGE_KEYS:
        usage = body.get(key)
        if usage is not None:
            return usage
    for key in _WRAPPERS:
        inner = body.get(key)
        if type(inner) is dict and inner.get("usage") is not None:
            return inner["usage"]
    return None


def _note(sent: Sent, payload: bytes) -> None:
    """One JSON body or event: its usage, if it has one, noted on ``sent``."""
    if b"oken" not in payload:  # no token count in it (the common streamed event)
        return
    try:
        body = json.loads(payload)
    except ValueError:
        return  # litellm reports what it cannot parse itself
    usage = provider_usage(body)
    if usage is not None:
        sent.note(usage)


class _Lines:
    """The lines of a streamed body (server-sent events or JSON lines), as they pass; a line
    longer than :data:`_MAX_LINE` is let go (no usage event is that long)."""

    __slots__ = ("sent", "parts", "size")

    def __init__(self, sent: Sent) -> None:
        self.sent, self.parts, self.size = sent, [], 0

    def feed(self, chunk: bytes) -> None:
        try:
            if b"\n" not in chunk:  # a line goes on: kept in parts, joined once it is whole
                if self.size <= _MAX_LINE:
                    self.parts.append(chunk)
                self.size += len(chunk)
                return
            first, last = chunk.find(b"\n"), chunk.rfind(b"\n")
            if self.size <= _MAX_LINE:  # the line begun in earlier chunks ends here
                self.parts.append(chunk[:first])
                self._line(b"".join(self.parts))
            if first < last:  # whole lines: read only when a token count may be among them
                middle = chunk[first + 1 : last]
                if b"oken" in middle:
                    for line in middle.split(b"\n"):
                        self._line(line)
            rest = chunk[last + 1 :]
            self.parts, self.size = [rest], len(rest)
        except Exception as exc:
            faults.report("internal", exc)

    def end(self) -> None:
        """The body ended: its last line, if it had no line end."""
        if self.size <= _MAX_LINE and self.parts:
            self.feed(b"\n")
        self.parts, self.size = [], 0

    def _line(self, line: bytes) -> None:
        line = line.strip()
        if line.startswith(b"data:"):
            line = line[5:].lstrip()
        if line[:1] == b"{":
            _note(self.sent, line)


class _Frames:
    """The frames of a Bedrock event stream (``application/vnd.amazon.eventstream``), as they
    pass, read by botocore's own parser (litellm's too). Only the frames that can carry usage
    are opened: Converse's ``metadata`` event and InvokeModel's ``chunk`` (the model's JSON,
    base64 in ``bytes``); a stream botocore cannot read is let go (litellm reports it)."""

    __slots__ = ("broken", "buffer", "sent")

    def __init__(self, sent: Sent, buffer: Any, broken: type[Exception]) -> None:
        self.sent, self.buffer, self.broken = sent, buffer, broken

    def feed(self, chunk: bytes) -> None:
        if self.buffer is None:
            return
        try:
            self.buffer.add_data(chunk)
            for message in self.buffer:
                self._frame(message.headers.get(":event-type"), message.payload)
        except Exception as exc:
            self.buffer = None  # botocore's ParserError: litellm's reader fails on it and says so
            if not isinstance(exc, self.broken):
                faults.report("internal", exc)

    def end(self) -> None:
        self.buffer = None

    def _frame(self, kind: Any, payload: bytes) -> None:
        if kind == "metadata":  # Converse: {"usage": ..., "metrics": ...}
            _note(self.sent, payload)
        elif kind == "chunk":  # InvokeModel: {"bytes": base64 of the model's own event}
            try:
                inner = json.loads(payload)["bytes"]
                _note(self.sent, base64.b64decode(inner, validate=True))
            except (ValueError, KeyError, TypeError):
                return  # litellm reports what it cannot parse itself


def _frames(sent: Sent) -> _Frames | None:
    """A reader of Bedrock's event stream for ``sent`` (None without botocore: litellm cannot
    read the stream either)."""
    try:
        from botocore.eventstream import EventStreamBuffer, ParserError
    except ImportError:
        return None
    return _Frames(sent, EventStreamBuffer(), ParserError)


class _Watched(httpx.SyncByteStream):
    """An httpx byte stream passing every chunk on unchanged, each also fed to ``lines`` (a
    :class:`_Lines` or :class:`_Frames`)."""

    def __init__(self, stream: Any, lines: _Lines | _Frames) -> None:
        self.stream, self.lines = stream, lines

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.stream:
            self.lines.feed(chunk)
            yield chunk
        self.lines.end()

    def close(self) -> None:
        self.stream.close()


class _AsyncWatched(httpx.AsyncByteStream):
    """:class:`_Watched` for an async client."""

    def __init__(self, stream: Any, lines: _Lines | _Frames) -> None:
        self.stream, self.lines = stream, lines

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.stream:
            self.lines.feed(chunk)
            yield chunk
        self.lines.end()

    async def aclose(self) -> None:
        await self.stream.aclose()


def _reader(response: Any, sent: Sent) -> _Lines | _Frames | None:
    """What reads the stream of ``response`` as it passes, by its content type (None: none)."""
    kind = response.headers.get("content-type", "")
    if _EVENT_STREAM in kind:  # before "event-stream": Bedrock's binary frames
        return _frames(sent)
    if "event-stream" in kind or "json" in kind:
        return _Lines(sent)
    return None


def _seen(response: Any, is_async: bool) -> None:
    """Note what ``response`` carries, or will carry as litellm reads it, on the call's record."""
    sent = inside_gateway.get()
    if not isinstance(sent, Sent) or response is None:
        return
    try:
        if response.is_stream_consumed:  # a whole body, read by the client
            content = response.content
            if content.lstrip()[:1] == b"{":
                _note(sent, content)
        else:
            reader = _reader(response, sent)
            if reader is not None:
                response.stream = (_AsyncWatched if is_async else _Watched)(response.stream, reader)
    except Exception as exc:
        faults.report("internal", exc)


def _post(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    """``HTTPHandler.post``: the provider's answer, seen as sent."""
    response = wrapped(*args, **kwargs)
    _seen(response, False)
    return response


async def _apost(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    """``AsyncHTTPHandler.post``: as :func:`_post`."""
    response = await wrapped(*args, **kwargs)
    _seen(response, True)
    return response


def wrapper(name: str, is_async: bool) -> Callable[..., Any]:
    """The wrapt wrapper of litellm's ``post`` (:mod:`.litellm_patches`)."""
    return _apost if is_async else _post
