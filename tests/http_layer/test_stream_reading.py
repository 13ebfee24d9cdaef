"""How the HTTP layer reads an OpenAI-shaped stream's events: a chunk that only adds text is
kept as sent and decoded only when the stream ends without usage (its text then put back in
the order it was sent); every chunk that ends a choice or carries usage is read as it comes."""

from __future__ import annotations

import httpx
import pytest

from otel_tokens.capture.http import layer as http_layer
from otel_tokens.capture.wire.formats import find

from ..local_server import LocalServer
from .conftest import only, tokens
from .wire_server import USAGE, sse

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def chunk(content: str | None = None, reason: str | None = None, **extra) -> dict:
    delta = {} if content is None else {"content": content}
    choice = {"index": 0, "delta": delta, "finish_reason": reason}
    return {"id": "c", "model": "m", "choices": [choice], **extra}


def streamed(events: list) -> bytes:
    """The body read through httpx from a local server sending ``events``."""
    local = LocalServer(lambda path, body: (200, "text/event-stream", sse(events), {}))
    try:
        with httpx.stream("POST", f"{local.url}/v1/chat/completions", json=CHAT) as response:
            return b"".join(response.iter_bytes())
    finally:
        local.close()


@pytest.fixture
def decoded(monkeypatch) -> list:
    """Every stream event the HTTP layer decodes."""
    seen: list = []

    def loads(payload):
        seen.append(payload)
        return real(payload)

    real = http_layer._loads
    monkeypatch.setattr(http_layer, "_loads", loads)
    return seen


def test_a_stream_with_usage_decodes_only_the_chunks_it_needs(telemetry, decoded):
    events = [chunk(f"w{i} ") for i in range(50)]
    streamed([*events, chunk(reason="stop"), {**chunk(), "choices": [], "usage": USAGE}, "[DONE]"])
    attrs = only(telemetry)
    assert tokens(attrs) == (120, 30)
    assert attrs["gen_ai.response.finish_reasons"] == ("stop",)
    # the first chunk (model, first-chunk time), the last two
    assert len([data for data in decoded if b'"choices"' in data]) == 3


def test_without_usage_the_text_is_read_at_the_end_in_the_order_sent(telemetry, decoded):
    events = [
        chunk("alpha "),
        chunk("beta "),
        {**chunk(), "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"name": "f", "arguments": "{}"}}]}, "finish_reason": None}]},
        chunk("gamma ", reason="length"),  # read as it comes: it ends the choice
        "[DONE]",
    ]  # fmt: skip
    streamed(events)
    attrs = only(telemetry)
    assert attrs["gen_ai.response.finish_reasons"] == ("length",)
    assert attrs["otel_tokens.usage.source"] == "estimated" and tokens(attrs)[1] > 0
    # all of them: their text is the estimate's
    assert len([data for data in decoded if b'"choices"' in data]) == 4


def test_the_text_goes_back_where_it_was_sent():
    """Between events read as they came, the kept ones' text keeps its place."""
    wire = find("/v1/chat/completions")
    reader = http_layer.Reader(_Call(), wire, dict(CHAT), {"content-type": "text/event-stream"})
    parts = [chunk("a"), chunk("b"), chunk("c", "stop"), chunk("d"), chunk("e", "stop"), chunk("f")]
    body = sse(parts)
    for at in range(0, len(body), 7):  # as a network delivers it
        reader.feed(body[at : at + 7])
    reader.end("exhausted")
    assert reader.call.stopped["output_text"] == "abcdef"
    assert reader.call.stopped["finish_reasons"] == ["stop", "stop"]


def test_usage_in_a_chunk_that_goes_on_is_not_lost(telemetry):
    """A provider sending running usage in every chunk, none after the last: it is read."""
    running = {"prompt_tokens": 120, "completion_tokens": 29, "total_tokens": 149}
    streamed([chunk("a", usage=running), chunk("b", usage=USAGE), "[DONE]"])
    assert tokens(only(telemetry)) == (120, 30)


def test_several_choices_are_read_as_they_come(telemetry):
    two = {**chunk(), "choices": [
        {"index": 0, "delta": {"content": "x"}, "finish_reason": "stop"},
        {"index": 1, "delta": {"content": "y"}, "finish_reason": None}]}  # fmt: skip
    streamed([chunk("a"), two, chunk(reason="length"), {**chunk(), "choices": [], "usage": USAGE}])
    attrs = only(telemetry)
    assert attrs["gen_ai.response.finish_reasons"] == ("stop", "length")
    assert tokens(attrs) == (120, 30)


class _Call:
    """What a stream's reader needs of a call, keeping how it was stopped."""

    first_chunk_at = None
    ended = False

    def first_chunk(self) -> None:
        self.first_chunk_at = 1.0

    def stream_usage(self, usage) -> None:
        pass

    def stop(self, usage=None, **kwargs) -> None:
        self.ended, self.stopped = True, kwargs

    def fail(self, error, usage=None, **kwargs) -> None:
        self.ended, self.stopped = True, kwargs
