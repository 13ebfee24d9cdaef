"""A local websocket server speaking the OpenAI Realtime API (GA) as OpenAI documents it: a
``session.created`` on connect, a ``session.updated`` for each ``session.update``, and for
each ``response.create`` the events of one response (``response.created``, a text delta,
``response.done`` carrying the next queued usage). The ``response.done`` usage block is the
one of OpenAI's own documentation ("Managing costs": the ``response.done`` example).

With ``?intent=transcription`` (the Agents SDK's streamed speech-to-text session) it is a
transcription session: each appended audio chunk is committed (server VAD) and transcribed,
the ``conversation.item.input_audio_transcription.completed`` carrying the next of
``transcriptions``.

``drop_after_created``: the server cuts the connection (no close frame) right after the
next ``response.created`` (in a transcription session: the next transcription), as a network
failure would; ``never_done``: responses start and
never finish.
"""

from __future__ import annotations

import json
import socket
import threading
from typing import Any

from websockets.sync.server import ServerConnection, serve

MODEL = "gpt-realtime-2025-08-28"
TRANSCRIBER = "gpt-4o-transcribe"
#: an input transcription's usage, as OpenAI documents it (managing costs: input transcription)
TRANSCRIPTION_USAGE = {"type": "tokens", "total_tokens": 26, "input_tokens": 17,
                       "input_token_details": {"text_tokens": 0, "audio_tokens": 17},
                       "output_tokens": 9}  # fmt: skip

#: OpenAI's documented ``response.done`` usage (docs: Realtime API, managing costs)
DOCUMENTED_USAGE = {
    "total_tokens": 253, "input_tokens": 132, "output_tokens": 121,
    "input_token_details": {
        "text_tokens": 119, "audio_tokens": 13, "image_tokens": 0, "cached_tokens": 64,
        "cached_tokens_details": {"text_tokens": 64, "audio_tokens": 0, "image_tokens": 0},
    },
    "output_token_details": {"text_tokens": 30, "audio_tokens": 91},
}  # fmt: skip


def usage(text_in: int, audio_in: int, cached_text: int, cached_audio: int, text_out: int,
          audio_out: int) -> dict[str, Any]:  # fmt: skip
    """A ``response.done`` usage block of these counts (totals as the API adds them)."""
    return {
        "total_tokens": text_in + audio_in + text_out + audio_out,
        "input_tokens": text_in + audio_in, "output_tokens": text_out + audio_out,
        "input_token_details": {
            "text_tokens": text_in, "audio_tokens": audio_in, "image_tokens": 0,
            "cached_tokens": cached_text + cached_audio,
            "cached_tokens_details": {"text_tokens": cached_text, "audio_tokens": cached_audio,
                                      "image_tokens": 0},
        },
        "output_token_details": {"text_tokens": text_out, "audio_tokens": audio_out},
    }  # fmt: skip


def _session(event_type: str, n: int) -> dict[str, Any]:
    return {"type": event_type, "event_id": f"event_s{n}", "session": {
        "type": "realtime", "object": "realtime.session", "id": "sess_C9G5QPteg4UIbotdKLoYQ",
        "model": MODEL, "output_modalities": ["audio"], "instructions": "Be brief.",
        "tools": [], "tool_choice": "auto", "max_output_tokens": "inf", "tracing": None,
        "prompt": None, "expires_at": 1756324625, "include": None,
        "audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000},
                            "transcription": {"model": TRANSCRIBER}, "noise_reduction": None,
                            "turn_detection": None},
                  "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "marin",
                             "speed": 1.0}},
    }}  # fmt: skip


def _transcription(event_type: str, n: int, transcription: dict | None) -> dict[str, Any]:
    """A transcription session's ``session.created``/``session.updated`` (GA shape)."""
    return {"type": event_type, "event_id": f"event_s{n}", "session": {
        "type": "transcription", "object": "realtime.transcription_session",
        "id": "sess_C9TZgbkYM2WvOcNvXUVqO", "expires_at": 1756324625, "include": None,
        "audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000},
                            "transcription": transcription, "noise_reduction": None,
                            "turn_detection": {"type": "semantic_vad", "eagerness": "auto"}}},
    }}  # fmt: skip


def _response(rid: str, status: str, used: dict[str, Any] | None) -> dict[str, Any]:
    return {"object": "realtime.response", "id": rid, "status": status, "status_details": None,
            "output": [], "conversation_id": "conv_C9G5RJeJ2gF77mV7f2B1j",
            "output_modalities": ["text"], "max_output_tokens": "inf", "usage": used,
            "metadata": None}  # fmt: skip


class RealtimeServer:
    """The server, on 127.0.0.1 in a thread of its own; ``usages``: the next responses'."""

    def __init__(self) -> None:
        self.usages: list[dict[str, Any]] = []
        #: the next input transcriptions' (transcript, usage)
        self.transcriptions: list[tuple[str, dict[str, Any]]] = []
        self.drop_after_created = False
        self.never_done = False  # responses start and never end (no response.done)
        self.responses = 0
        self.client_events: list[dict[str, Any]] = []
        self._server = serve(self._handle, "127.0.0.1", 0)
        self.port = self._server.socket.getsockname()[1]
        self.url = f"ws://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _handle(self, ws: ServerConnection) -> None:
        if "intent=transcription" in ws.request.path:
            self._transcription_session(ws)
            return
        n = 0
        ws.send(json.dumps(_session("session.created", n)))
        for raw in ws:
            event = json.loads(raw)
            self.client_events.append(event)
            n += 1
            if event.get("type") == "session.update":
                ws.send(json.dumps(_session("session.updated", n)))
            elif event.get("type") == "response.create":
                if not self._respond(ws, n):
                    return
            elif event.get("type") == "input_audio_buffer.commit":
                self._transcribe(ws, n)

    def _transcribe(self, ws: ServerConnection, n: int) -> None:
        """The committed input audio, transcribed (billed apart, by its own model): the next
        of ``transcriptions`` (transcript, usage), else the documented one."""
        item = f"item_C9G8{n:04d}"
        text, used = (self.transcriptions.pop(0) if self.transcriptions
                      else ("Hi, can you hear me?", TRANSCRIPTION_USAGE))  # fmt: skip
        ws.send(json.dumps({"type": "input_audio_buffer.committed", "event_id": f"event_i{n}",
                            "previous_item_id": None, "item_id": item}))  # fmt: skip
        ws.send(json.dumps({"type": "conversation.item.input_audio_transcription.completed",
                            "event_id": f"event_t{n}", "item_id": item, "content_index": 0,
                            "transcript": text, "usage": used}))  # fmt: skip

    def _transcription_session(self, ws: ServerConnection) -> None:
        """A transcription session (``?intent=transcription``) with server VAD: each appended
        chunk is a turn the server commits and transcribes; the client's own last commit then
        finds the buffer empty (the documented error, naming the client's event)."""
        ws.send(json.dumps(_transcription("session.created", 0, None)))
        for n, raw in enumerate(ws, 1):
            event = json.loads(raw)
            self.client_events.append(event)
            kind = event.get("type")
            if kind == "session.update":
                configured = event["session"]["audio"]["input"]["transcription"]
                ws.send(json.dumps(_transcription("session.updated", n, configured)))
            elif kind == "input_audio_buffer.append":
                self._transcribe(ws, n)
                if self.drop_after_created:  # no close frame: a dropped connection
                    ws.socket.shutdown(socket.SHUT_RDWR)
                    return
            elif kind == "input_audio_buffer.commit":
                ws.send(json.dumps({"type": "error", "event_id": f"event_x{n}", "error": {
                    "type": "invalid_request_error", "code": "input_audio_buffer_commit_empty",
                    "message": "Error committing input audio buffer: buffer too small.",
                    "param": None, "event_id": event.get("event_id")}}))  # fmt: skip
            elif kind == "input_audio_buffer.clear":
                ws.send(json.dumps({"type": "input_audio_buffer.cleared",
                                    "event_id": f"event_l{n}"}))  # fmt: skip

    def _respond(self, ws: ServerConnection, n: int) -> bool:
        """One response's events; False when the connection was cut."""
        self.responses += 1
        rid = f"resp_C9G8p7IH2WxLbkgPNo{self.responses:03d}"
        ws.send(json.dumps({"type": "response.created", "event_id": f"event_c{n}",
                            "response": _response(rid, "in_progress", None)}))  # fmt: skip
        if self.drop_after_created:
            ws.socket.shutdown(socket.SHUT_RDWR)  # no close frame: a dropped connection
            return False
        if self.never_done:
            return True
        ws.send(json.dumps({"type": "response.output_text.delta", "event_id": f"event_d{n}",
                            "response_id": rid, "item_id": "item_1", "output_index": 0,
                            "content_index": 0, "delta": "Hi."}))  # fmt: skip
        used = self.usages.pop(0) if self.usages else DOCUMENTED_USAGE
        ws.send(json.dumps({"type": "response.done", "event_id": f"event_e{n}",
                            "response": _response(rid, "completed", used)}))  # fmt: skip
        return True

    def close(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=10)


def resources() -> tuple[int, int]:
    """(threads, open file descriptors) of this process."""
    import os

    return threading.active_count(), len(os.listdir("/proc/self/fd"))


def settled(before: tuple[int, int], slack: int = 2, within: float = 10.0) -> tuple[int, int]:
    """The process's threads and fds once back within ``slack`` of ``before`` (connection
    threads end a moment after their socket closes), or as they are after ``within`` s."""
    import gc
    import time

    deadline = time.monotonic() + within
    while True:
        gc.collect()
        now = resources()
        if all(n <= b + slack for n, b in zip(now, before)) or time.monotonic() > deadline:
            return now
        time.sleep(0.05)
