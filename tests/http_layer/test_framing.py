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


def _cut(body: bytes, cuts: list[int]) -> list[tuple[int, bytes]]:
    """Each event framed, with how many bytes had been fed when it came."""
    framing, events, last = ServerSentEvents(), [], 0
    for at in [*cuts, len(body)]:
        events += [(at, event) for event in framing.feed(body[last:at])]
        last = at
    return events + [(len(body), event) for event in framing.end()]


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"], ids=["lf", "crlf"])
def test_a_large_event_held_in_chunks_ends_wherever_its_blank_line_is_cut(newline):
    """Past 64 kB an event's chunks are held: it comes with the chunk that completes its
    blank line, however that line is cut (each of its bytes in another chunk, or split
    across three)."""
    large = b"data: " + json.dumps({"b64_json": "A" * 100_000}).encode() + newline * 2
    body = large + b"data: {}" + newline * 2
    events = [event for _, event in _cut(body, [])]
    assert len(events) == 2
    end = len(large) - 2 * len(newline)  # where its blank line begins
    for at in range(end - 3, end + 2 * len(newline) + 1):
        steady = list(range(8192, at - 1, 8192))
        for cuts in ([*steady, at], [*steady, at, at + 1], [*steady, at - 1, at, at + 1, at + 2]):
            got = _cut(body, cuts)
            assert [event for _, event in got] == events, at
            # the large event comes as soon as its blank line is complete, not later
            assert got[0][0] == min(c for c in [*cuts, len(body)] if c >= len(large)), cuts


def test_a_large_event_in_small_chunks_is_framed_in_linear_time():
    """8 MB in 2 kB chunks: copied again at every chunk, this takes many seconds."""
    event = b"data: " + json.dumps({"b64_json": "A" * 8_000_000}).encode() + b"\n\n"
    framing, started, events = ServerSentEvents(), time.perf_counter(), []
    for at in range(0, len(event), 2048):
        events += framing.feed(event[at : at + 2048])
    elapsed = time.perf_counter() - started
    assert events == [event[:-2]]
    assert elapsed < 3.0, elapsed
