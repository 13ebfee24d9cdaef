"""Stream framings, decoded as the bytes pass (never read ahead): server-sent events and
newline-delimited JSON. Each ``feed(chunk)`` returns the events completed by that chunk, as
sent; ``end()`` the last one when the body ended without its closing newline; ``payload``
of an event is its JSON text (None: it carries none)."""

from __future__ import annotations


_HOLD = 64 * 1024  # bytes of an incomplete event past which its chunks are held, not joined


class ServerSentEvents:
    """``text/event-stream``: an event's payload is its ``data`` lines joined (``event:``,
    ``id:``, ``retry:`` and comments are not read: every format here names its events in the
    data). Lines end in LF or CRLF; an event ends at a blank line. An event past
    ``_HOLD`` bytes not complete yet (a partial image of megabytes) is joined once, when its
    end comes: each chunk meanwhile is only searched for an end, never copied again."""

    def __init__(self) -> None:
        self._rest = b""  # the event not complete yet
        self._held: list[bytes] = []  # chunks after it with no event's end in them
        self._tail = b""  # the last bytes held, for an end split across chunks

    def feed(self, chunk: bytes) -> list[bytes]:
        if self._held or len(self._rest) > _HOLD:
            if not self._ends(chunk):
                before = self._tail if self._held else self._rest[-3:]
                self._held.append(chunk)
                self._tail = (before + chunk[-3:])[-3:]
                return []
            buffer = b"".join([self._rest, *self._held, chunk])
            self._held = []
        else:
            buffer = self._rest + chunk if self._rest else chunk
        if buffer.find(b"\r") != -1:  # CRLF lines (a CR the next chunk ends waits for it)
            buffer = buffer.replace(b"\r\n", b"\n")
        events = buffer.split(b"\n\n")
        self._rest = events.pop()
        return events

    def _ends(self, chunk: bytes) -> bool:
        """``chunk`` may end the large event held (a blank line in it, or begun before it:
        LF LF, CRLF CRLF, or the two mixed, each containing one of the two patterns)."""
        if b"\n\n" in chunk or b"\n\r\n" in chunk:
            return True
        joint = (self._tail if self._held else self._rest[-3:]) + chunk[:3]
        return b"\n\n" in joint or b"\n\r\n" in joint

    def end(self) -> list[bytes]:
        rest = b"".join([self._rest, *self._held]) if self._held else self._rest
        self._rest, self._held = b"", []
        rest = rest.replace(b"\r\n", b"\n").rstrip(b"\r\n")
        return [rest] if rest else []

    @staticmethod
    def payload(event: bytes) -> bytes | None:
        """An event's ``data`` lines joined (None: it has none)."""
        lines = event.split(b"\n")
        if len(lines) == 1:  # one line, as nearly every event is
            return _value(event)
        values = [value for value in map(_value, lines) if value is not None]
        return b"\n".join(values) if values else None


def _value(line: bytes) -> bytes | None:
    """A ``data:`` line's value (one leading space dropped), or None."""
    if line[:5] != b"data:":
        return None
    return line[6:] if line[5:6] == b" " else line[5:]


class JsonLines:
    """``application/x-ndjson`` (Ollama's streams): one JSON value per line."""

    def __init__(self) -> None:
        self._rest = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        lines = (self._rest + chunk).split(b"\n")
        self._rest = lines.pop()
        return [line for line in lines if line.strip()]

    def end(self) -> list[bytes]:
        rest, self._rest = self._rest, b""
        return [rest] if rest.strip() else []

    @staticmethod
    def payload(event: bytes) -> bytes:
        return event


def framing_of(content_type: str) -> type[ServerSentEvents | JsonLines] | None:
    """The framing a response's ``content-type`` names (None: one JSON body)."""
    kind = content_type.lower()
    if "event-stream" in kind:
        return ServerSentEvents
    if "ndjson" in kind or "jsonl" in kind:
        return JsonLines
    return None
