"""Stream framings, decoded as the bytes pass (never read ahead): server-sent events and
newline-delimited JSON. Each ``feed(chunk)`` returns the payloads completed by that chunk;
``end()`` the last one when the body ended without its closing newline."""

from __future__ import annotations


class ServerSentEvents:
    """``text/event-stream``: each event's ``data`` lines joined (``event:``, ``id:``,
    ``retry:`` and comments are not read: every format here names its events in the data)."""

    def __init__(self) -> None:
        self._rest = b""
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        lines = (self._rest + chunk).split(b"\n")
        self._rest = lines.pop()
        out: list[bytes] = []
        for line in lines:
            self._line(line.rstrip(b"\r"), out)
        return out

    def end(self) -> list[bytes]:
        out: list[bytes] = []
        if self._rest:
            self._line(self._rest.rstrip(b"\r"), out)
            self._rest = b""
        self._line(b"", out)
        return out

    def _line(self, line: bytes, out: list[bytes]) -> None:
        if not line:
            if self._data:
                out.append(b"\n".join(self._data))
                self._data = []
        elif line.startswith(b"data:"):
            value = line[5:]
            self._data.append(value[1:] if value.startswith(b" ") else value)


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


def framing_of(content_type: str) -> type[ServerSentEvents | JsonLines] | None:
    """The framing a response's ``content-type`` names (None: one JSON body)."""
    kind = content_type.lower()
    if "event-stream" in kind:
        return ServerSentEvents
    if "ndjson" in kind or "jsonl" in kind:
        return JsonLines
    return None
