"""A program nobody named: a hand-written httpx POST to an OpenAI-shaped (and Anthropic-,
Gemini-shaped) endpoint is recorded, plain and streamed, sync and async, with what the
program reads unchanged; anything else passes untouched."""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from otel_tokens.capture.http import http_patches
from otel_tokens.emit.instruments import USAGE_REASONING as REASONING

from ..local_server import LocalServer
from ..telemetry.conftest import handling
from .conftest import attributes, only, tokens
from .wire_server import USAGE, sse

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Say hello"}]}


def post(url: str, body: dict, stream: bool = False) -> tuple[int, bytes]:
    """One POST as a program writes it: the status and every byte it read."""
    if not stream:
        response = httpx.post(url, json=body)
        return response.status_code, response.content
    with httpx.stream("POST", url, json=body) as response:
        return response.status_code, b"".join(response.iter_bytes())


async def apost(url: str, body: dict, stream: bool = False) -> tuple[int, bytes]:
    async with httpx.AsyncClient() as client:
        if not stream:
            response = await client.post(url, json=body)
            return response.status_code, response.content
        async with client.stream("POST", url, json=body) as response:
            return response.status_code, b"".join([c async for c in response.aiter_bytes()])


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_hand_written_post_is_recorded_and_its_bytes_unchanged(server, stream, is_async):
    url, body = f"{server.url}/v1/chat/completions", {**CHAT, "stream": stream}
    plain = asyncio.run(apost(url, body, stream)) if is_async else post(url, body, stream)
    with handling(http_patches) as t:
        got = asyncio.run(apost(url, body, stream)) if is_async else post(url, body, stream)
    assert got == plain  # every byte the program read, as without instrumentation
    attrs = only(t)
    assert tokens(attrs) == (120, 30)
    assert attrs["gen_ai.request.model"] == "gpt-4o-mini"
    assert attrs["gen_ai.operation.name"] == "chat"
    # a local server: self-hosted, named by its host, never priced as another provider
    assert attrs["gen_ai.provider.name"] == "127.0.0.1"
    assert "otel_tokens.cost.usd" not in attrs
    assert attrs["gen_ai.response.finish_reasons"] == ("stop",)
    assert attrs.get("otel_tokens.stream.end") == ("exhausted" if stream else None)
    assert t.errors() == {}


def test_requests_that_are_not_a_model_call_pass_untouched(telemetry, server):
    assert httpx.get(f"{server.url}/v1/chat/completions").status_code == 501  # not a POST
    httpx.post(f"{server.url}/v1/models", json={"model": "m"})  # not a wire path
    httpx.post(f"{server.url}/v1/chat/completions", content=b"model=m")  # not a JSON object
    httpx.post(f"{server.url}/v1/messages/batches", json={"requests": []})
    assert telemetry.finished() == [] and telemetry.errors() == {}


def test_an_error_status_fails_the_call_with_its_code_and_the_body_passes(telemetry):
    error = {"error": {"message": "Rate limit reached", "type": "rate_limit"}}
    local = LocalServer(
        lambda path, body: (429, "application/json", json.dumps(error).encode(), {})
    )
    try:
        response = httpx.post(f"{local.url}/v1/chat/completions", json=CHAT)
        with httpx.stream(
            "POST", f"{local.url}/v1/chat/completions", json={**CHAT, "stream": True}
        ) as r:
            streamed = r.read()
    finally:
        local.close()
    assert response.status_code == 429 and response.json() == error
    assert json.loads(streamed) == error
    assert [a["error.type"] for a in attributes(telemetry)] == ["429", "429"]


@pytest.mark.parametrize("library", ["httpx", "httpx2"])
def test_a_gzipped_answer_is_read_through_its_encoding(telemetry, server, library):
    """A gzip-encoded stream and whole answer, read with httpx and with httpx2 (whose decoders
    yield their bytes rather than return them: openai 3 and anthropic 2 send with it)."""
    client = pytest.importorskip(library)
    first = {
        "id": "c",
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": "stop"}],
    }
    streamed = gzip.compress(
        sse([first, {"id": "c", "model": "m", "choices": [], "usage": USAGE}, "[DONE]"])
    )
    whole = gzip.compress(json.dumps({**first, "choices": [], "usage": USAGE}).encode())

    def answer(path: str, body: dict) -> tuple:
        if body.get("stream"):
            return 200, "text/event-stream", streamed, {"content-encoding": "gzip"}
        return 200, "application/json", whole, {"content-encoding": "gzip"}

    local = LocalServer(answer)
    try:
        url = f"{local.url}/v1/chat/completions"
        with client.stream("POST", url, json={**CHAT, "stream": True}) as r:
            lines = [line for line in r.iter_lines() if line]
        with client.stream("POST", url, json=CHAT) as r:
            read = json.loads(r.read())
    finally:
        local.close()
    assert lines[-1] == "data: [DONE]" and read["usage"] == USAGE
    assert [tokens(attrs) for attrs in attributes(telemetry)] == [(120, 30), (120, 30)]


class _Gated(BaseHTTPRequestHandler):
    """Sends the first event, then waits until the test has read it before sending the rest
    (its usage among them): a layer that read ahead would wait forever."""

    gate = threading.Event()

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        first = {
            "id": "c",
            "model": "m",
            "choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}],
        }
        self.wfile.write(sse([first]))
        self.wfile.flush()
        self.gate.wait(10)
        last = {
            "id": "c",
            "model": "m",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": USAGE,
        }
        self.wfile.write(sse([last, "[DONE]"]))
        self.wfile.flush()

    def log_message(self, *args) -> None:
        pass


def test_a_stream_is_read_as_the_program_reads_it_never_ahead(telemetry):
    http = ThreadingHTTPServer(("127.0.0.1", 0), _Gated)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    _Gated.gate.clear()
    try:
        url = f"http://127.0.0.1:{http.server_address[1]}/v1/chat/completions"
        with httpx.stream("POST", url, json={**CHAT, "stream": True}, timeout=5) as response:
            lines = response.iter_lines()
            assert next(lines).startswith("data: ")  # the first event, before the rest is sent
            assert telemetry.finished() == []  # still open: the stream is not over
            _Gated.gate.set()
            rest = list(lines)
    finally:
        _Gated.gate.set()
        http.shutdown()
        http.server_close()
    assert "data: [DONE]" in rest
    assert tokens(only(telemetry)) == (120, 30)


def test_a_stream_closed_unread_ends_its_call_once(telemetry, server):
    with httpx.stream("POST", f"{server.url}/v1/chat/completions", json={**CHAT, "stream": True}):
        pass  # closed without reading a byte
    attrs = only(telemetry)
    assert attrs["otel_tokens.stream.end"] == "closed"


def test_an_anthropic_shaped_call_by_hand(telemetry):
    events = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [],
                "usage": {"input_tokens": 25, "output_tokens": 1},
            },
        },
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 15},
        },
        {"type": "message_stop"},
    ]
    local = LocalServer(lambda path, body: (200, "text/event-stream", sse(events, named=True), {}))
    try:
        body = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 100,
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        }
        with httpx.stream("POST", f"{local.url}/v1/messages", json=body) as response:
            response.read()
    finally:
        local.close()
    attrs = only(telemetry)
    assert tokens(attrs) == (25, 15) and attrs["gen_ai.response.model"] == "claude-sonnet-4-5"


def test_a_gemini_shaped_call_by_hand_reads_its_camel_case(telemetry):
    answer = {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "Hi"}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {
            "promptTokenCount": 8,
            "candidatesTokenCount": 4,
            "thoughtsTokenCount": 6,
            "totalTokenCount": 18,
        },
        "modelVersion": "gemini-2.5-flash",
        "responseId": "r1",
    }
    local = LocalServer(
        lambda path, body: (200, "application/json", json.dumps(answer).encode(), {})
    )
    try:
        httpx.post(
            f"{local.url}/v1beta/models/gemini-2.5-flash:generateContent?key=secret",
            json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        )
    finally:
        local.close()
    attrs = only(telemetry)
    assert tokens(attrs) == (8, 10) and attrs["gen_ai.request.model"] == "gemini-2.5-flash"
    assert attrs[REASONING] == 6  # thoughts: inside the output, named apart
    assert "secret" not in json.dumps(attrs)


def test_usage_that_is_not_token_counts_is_unusable_and_the_answer_passes(telemetry):
    """The counts as the provider sent them, held to the one rule: ``"10"`` is not a count."""
    body = {
        "id": "c",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}}],
        "usage": {"prompt_tokens": "10", "completion_tokens": 3, "total_tokens": 13},
    }
    local = LocalServer(lambda path, req: (200, "application/json", json.dumps(body).encode(), {}))
    try:
        got = httpx.post(f"{local.url}/v1/chat/completions", json=CHAT).json()
    finally:
        local.close()
    assert got == body
    assert tokens(only(telemetry)) == (None, None)
    assert telemetry.errors() == {"usage_invalid": 1}


def test_an_unreadable_event_is_a_fault_and_the_stream_passes_unchanged(telemetry):
    usage = {"id": "c", "model": "m", "choices": [], "usage": USAGE}
    payload = b"data: {not json\n\n" + sse([usage, "[DONE]"])
    local = LocalServer(lambda path, body: (200, "text/event-stream", payload, {}))
    try:
        stream = {**CHAT, "stream": True}
        with httpx.stream("POST", f"{local.url}/v1/chat/completions", json=stream) as r:
            got = r.read()
    finally:
        local.close()
    assert got == payload
    assert tokens(only(telemetry)) == (120, 30)
    assert telemetry.errors() == {"parse": 1}


def test_a_connection_failure_fails_the_call_and_raises_unchanged(telemetry):
    local = LocalServer(lambda path, body: (200, "application/json", b"{}", {}))
    url = f"{local.url}/v1/chat/completions"
    local.close()  # nothing listens there any more
    with pytest.raises(httpx.ConnectError):
        httpx.post(url, json=CHAT)
    assert only(telemetry)["error.type"] == "httpx.ConnectError"


def test_a_gemini_stream_without_alt_sse_is_one_json_array(telemetry):
    chunks = [
        {
            "candidates": [{"content": {"parts": [{"text": "Hel"}]}}],
            "modelVersion": "gemini-2.5-flash",
        },
        {
            "candidates": [{"content": {"parts": [{"text": "lo"}]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 8, "candidatesTokenCount": 4},
            "modelVersion": "gemini-2.5-flash",
        },
    ]
    local = LocalServer(
        lambda path, body: (200, "application/json", json.dumps(chunks).encode(), {})
    )
    try:
        url = f"{local.url}/v1beta/models/gemini-2.5-flash:streamGenerateContent"
        with httpx.stream("POST", url, json={"contents": []}) as response:
            assert json.loads(response.read()) == chunks
    finally:
        local.close()
    attrs = only(telemetry)
    assert tokens(attrs) == (8, 4) and attrs["gen_ai.response.finish_reasons"] == ("stop",)


def test_a_responses_stream_by_hand(telemetry):
    response = {
        "id": "resp_1",
        "object": "response",
        "model": "gpt-4.1-mini",
        "status": "completed",
    }
    usage = {"input_tokens": 36, "output_tokens": 87, "total_tokens": 123,
             "input_tokens_details": {"cached_tokens": 0},
             "output_tokens_details": {"reasoning_tokens": 0}}  # fmt: skip
    events = [
        {"type": "response.created", "response": {**response, "status": "in_progress"}},
        {"type": "response.output_text.delta", "delta": "Hi"},
        {"type": "response.completed", "response": {**response, "usage": usage}},
    ]
    local = LocalServer(lambda path, body: (200, "text/event-stream", sse(events, named=True), {}))
    try:
        body = {"model": "gpt-4.1-mini", "input": "hi", "stream": True}
        with httpx.stream("POST", f"{local.url}/v1/responses", json=body) as r:
            r.read()
    finally:
        local.close()
    attrs = only(telemetry)
    assert tokens(attrs) == (36, 87) and attrs["gen_ai.response.id"] == "resp_1"


def test_a_stream_made_in_memory_by_a_mock_transport_is_read(telemetry):
    """A response whose body the transport made in memory (httpx's MockTransport) is never
    read from its byte stream: it is read whole when ``send`` returns it."""
    first = {
        "id": "c",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": {"content": "Hi"}}],
    }
    last = {"id": "c", "model": "gpt-4o-mini", "choices": [], "usage": USAGE}
    payload = sse([first, last, "[DONE]"])

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=payload)

    with httpx.Client(transport=httpx.MockTransport(answer)) as client:
        body = {**CHAT, "stream": True}
        with client.stream("POST", "https://api.openai.com/v1/chat/completions", json=body) as r:
            assert r.read() == payload
    attrs = only(telemetry)
    assert tokens(attrs) == (120, 30) and attrs["gen_ai.provider.name"] == "openai"
    assert attrs["otel_tokens.cost.usd"] > 0  # OpenAI's own API, by genai-prices' URL pattern
