"""A local server answering OpenAI's image and audio endpoints in OpenAI's own shapes: each
answer is checked against the ``openai`` SDK's types (``ImagesResponse``, the image stream
events, ``Transcription``) before it is sent; the speech ``speech.audio.done`` event as
OpenAI documents it. A path under ``/stream/`` streams (a form's ``stream`` field is not
read by this server)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ..local_server import Answer, LocalServer

openai = pytest.importorskip("openai")
transcription = pytest.importorskip("openai.types.audio")

GENERATED = {"total_tokens": 4210, "input_tokens": 50, "output_tokens": 4160,
             "input_tokens_details": {"text_tokens": 50, "image_tokens": 0}}  # fmt: skip
EDITED = {"total_tokens": 1660, "input_tokens": 380, "output_tokens": 1280,
          "input_tokens_details": {"text_tokens": 12, "image_tokens": 368}}  # fmt: skip
SPOKEN = {"input_tokens": 14, "output_tokens": 101, "total_tokens": 115}
HEARD = {"type": "tokens", "input_tokens": 40, "output_tokens": 9, "total_tokens": 49,
         "input_token_details": {"text_tokens": 0, "audio_tokens": 40}}  # fmt: skip
AUDIO = b"ID3\x04\x00fake-mp3-frames"
_IMAGE = {"b64_json": "ZnVsbA==", "created_at": 2, "size": "1024x1024", "quality": "high",
          "background": "opaque", "output_format": "png"}  # fmt: skip


def _checked(kind: Any, data: dict[str, Any]) -> dict[str, Any]:
    """``data``, once the SDK's type ``kind`` has read it (the real shape, or a failure)."""
    kind.model_validate(data)
    return data


def sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def image_events(kind: str, usage: dict[str, Any]) -> list[dict[str, Any]]:
    """Two partial images and the completed one, as ``images.generate``/``edit`` stream."""
    types = openai.types
    partial_type, done_type = (
        (types.ImageGenPartialImageEvent, types.ImageGenCompletedEvent)
        if kind == "image_generation"
        else (types.ImageEditPartialImageEvent, types.ImageEditCompletedEvent)
    )
    partial = {**_IMAGE, "b64_json": "cGFydA==", "type": f"{kind}.partial_image"}
    return [
        _checked(partial_type, {**partial, "partial_image_index": 0}),
        _checked(partial_type, {**partial, "partial_image_index": 1}),
        _checked(done_type, {**_IMAGE, "type": f"{kind}.completed", "usage": usage}),
    ]


def _images(path: str, body: Any, streamed: bool) -> Answer:
    kind = "image_generation" if path.endswith("/generations") else "image_edit"
    usage = GENERATED if kind == "image_generation" else EDITED
    if streamed:
        return 200, "text/event-stream", sse(image_events(kind, usage)), {}
    model = body.get("model", "") if isinstance(body, dict) else ""
    if path.endswith("/variations") or str(model).startswith("dall-e"):  # DALL-E: no usage
        answer = {"created": 1, "data": [{"url": "https://img.test/1.png"}]}
    else:
        if isinstance(body, dict) and body.get("prompt") == "untrusted":  # not token counts
            usage = {**usage, "output_tokens": "4160", "input_tokens": True}
        answer = {"created": 1, "data": [{"b64_json": "ZnVsbA=="}], "size": "1024x1024",
                  "quality": "high", "output_format": "png", "usage": usage}  # fmt: skip
    return (
        200,
        "application/json",
        json.dumps(_checked(openai.types.ImagesResponse, answer)).encode(),
        {},
    )


def _speech(body: Any) -> Answer:
    if isinstance(body, dict) and body.get("stream_format") == "sse":
        events = [{"type": "speech.audio.delta", "audio": "AAAA"},
                  {"type": "speech.audio.delta", "audio": "BBBB"},
                  {"type": "speech.audio.done", "usage": SPOKEN}]  # fmt: skip
        return (
            200,
            "text/event-stream",
            b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events),
            {},
        )
    return 200, "audio/mpeg", AUDIO, {}


def _transcription(streamed: bool) -> Answer:
    if streamed:
        events = [{"type": "transcript.text.delta", "delta": "Hello"},
                  {"type": "transcript.text.delta", "delta": " there"},
                  {"type": "transcript.text.done", "text": "Hello there", "usage": HEARD}]  # fmt: skip
        return 200, "text/event-stream", sse(events), {}
    answer = _checked(transcription.Transcription, {"text": "Hello there", "usage": HEARD})
    return 200, "application/json", json.dumps(answer).encode(), {}


def media_answer(path: str, body: Any) -> Answer:
    streamed = path.startswith("/stream/") or (
        isinstance(body, dict) and body.get("stream") is True
    )
    if "/images/" in path:
        return _images(path, body, streamed)
    if path.endswith("/audio/speech"):
        return _speech(body)
    if path.endswith("/audio/transcriptions"):
        return _transcription(streamed)
    if path.endswith("/audio/translations"):  # whisper-1: plain text, no usage
        return 200, "text/plain; charset=utf-8", b"Hello there\n", {}
    return 404, "application/json", b'{"error": {"message": "no such path"}}', {}


class MediaServer(LocalServer):
    """A real HTTP server on 127.0.0.1 answering OpenAI's media endpoints."""

    def __init__(self) -> None:
        super().__init__(media_answer)
