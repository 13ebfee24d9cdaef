"""The cost of holding litellm's provider streams to the usage rule (``capture/sdk/litellm_http``):
the time the watcher adds per streamed byte, next to litellm's own decoding of the same bytes.

Streams: a Bedrock ConverseStream and an InvokeModel stream (binary frames, read with
botocore's parser) and an Anthropic server-sent-event stream, each of 500 text events of
about 40 characters, fed in 16 KiB reads. Variants run interleaved, medians reported.
Run by hand:  python benchmarks/litellm_streams.py
"""

from __future__ import annotations

import json
import os
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from otel_tokens.capture.sdk.litellm_http import _frames, _Lines  # noqa: E402
from otel_tokens.capture.sent import Sent  # noqa: E402
from tests.sdk.bedrock_server import chunk, frame  # noqa: E402

EVENTS, READ, ROUNDS = 500, 16 * 1024, 15
TEXT = "lorem ipsum dolor sit amet, consectetur "
USAGE = {"input_tokens": 1200, "output_tokens": 500}


def converse() -> bytes:
    deltas = [
        frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": TEXT}})
    ] * EVENTS
    usage = {"usage": {"inputTokens": 1200, "outputTokens": 500}}
    start, stop = (
        frame("messageStart", {"role": "assistant"}),
        frame("messageStop", {"stopReason": "end_turn"}),
    )
    return b"".join([start, *deltas, stop, frame("metadata", usage)])


def anthropic_events() -> list[dict]:
    delta = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": TEXT},
    }
    start = {
        "id": "m",
        "type": "message",
        "role": "assistant",
        "model": "claude-3-5-haiku-20241022",
        "content": [],
        "stop_reason": None,
        "usage": USAGE,
    }
    return [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *[delta] * EVENTS,
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 500},
        },
        {"type": "message_stop"},
    ]


def invoke() -> bytes:
    return b"".join(chunk(e) for e in anthropic_events())


def sse() -> bytes:
    return "".join(
        f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in anthropic_events()
    ).encode()


def reads(body: bytes) -> list[bytes]:
    return [body[i : i + READ] for i in range(0, len(body), READ)]


def watch(kind: str, parts: list[bytes]) -> None:
    sent = Sent()
    reader = _Lines(sent) if kind == "sse" else _frames(sent)
    for part in parts:
        reader.feed(part)
    reader.end()
    assert sent.usage and sent.error is None


def litellm_reads(kind: str, parts: list[bytes]) -> None:
    """litellm's own decoder on the same reads (what the caller's stream costs without us)."""
    from litellm.llms.bedrock.chat.invoke_handler import (
        AmazonAnthropicClaudeStreamDecoder,
        AWSEventStreamDecoder,
    )

    model = "anthropic.claude-3-5-haiku-20241022-v1:0"
    if kind == "converse":
        decoder = AWSEventStreamDecoder(model=model)
    else:
        decoder = AmazonAnthropicClaudeStreamDecoder(model=model, sync_stream=True)
    for _ in decoder.iter_bytes(iter(parts)):
        pass


def timed(run, *args) -> float:
    start = time.perf_counter()
    run(*args)
    return time.perf_counter() - start


def main() -> None:
    streams = {"converse": converse(), "invoke": invoke(), "sse": sse()}
    for kind, body in streams.items():
        parts = reads(body)
        ours, theirs = [], []
        for _ in range(ROUNDS):
            ours.append(timed(watch, kind, parts))
            if kind != "sse":
                theirs.append(timed(litellm_reads, kind, parts))
        mine = statistics.median(ours)
        per_byte = mine / len(body) * 1e9
        size = f"{kind:9s} {len(body) / 1024:7.1f} KiB"
        line = f"{size}  watcher {mine * 1e3:7.2f} ms ({per_byte:5.1f} ns/byte)"
        if theirs:
            line += f"  litellm's decoding {statistics.median(theirs) * 1e3:7.2f} ms"
        print(line)


if __name__ == "__main__":
    main()
