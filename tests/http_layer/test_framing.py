"""Server-sent events framed as the bytes pass: the same events however the body is cut into
chunks (LF and CRLF lines), and an event of megabytes sent in many small chunks (a partial
image) joined once, not copied again at every chunk."""

from __future__ import annotations

import json
import time

import pytest

from otel_tokens.capture.wire.framing import ServerSentEvents

EVENTS = [
    {"type": "image_generation.partial_image", "b64_json": "cGFydA==" * 20},
    {"type": "image_generation.completed", "usage": {"input_tokens": 50}},
]


def _framed(body: bytes, size: int) -> list[bytes]:
    framing, events = ServerSentEvents(), []
    for at in range(0, len(body), size):
        events += framing.feed(body[at : at + size])
    return events + framing.end()


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"], ids=["lf", "crlf"])
def test_every_cut_of_a_body_frames_the_same_events(newline):
    body = b"".join(
        b"event: " + e["type"].encode() + newline + b"data: " + json.dumps(e).encode()
        + newline + newline
        for e in EVENTS
    )  # fmt: skip
    whole = _framed(body, len(body))
    assert [ServerSentEvents.payload(e) for e in whole] == [json.dumps(e).encode() for e in EVENTS]
    for size in range(1, 40):
        assert _framed(body, size) == whole, size


def test_a_large_event_in_small_chunks_is_framed_in_linear_time():
    """8 MB in 2 kB chunks: copied again at every chunk, this takes many seconds."""
    event = b"data: " + json.dumps({"b64_json": "A" * 8_000_000}).encode() + b"\n\n"
    framing, started, events = ServerSentEvents(), time.perf_counter(), []
    for at in range(0, len(event), 2048):
        events += framing.feed(event[at : at + 2048])
    elapsed = time.perf_counter() - started
    assert events == [event[:-2]]
    assert elapsed < 3.0, elapsed
