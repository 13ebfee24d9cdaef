"""litellm through its real code against a local server speaking the OpenAI and Anthropic wire
formats (documented format): every call recorded once (litellm talks to the providers over
its own HTTP clients, or through an SDK that is not recorded again), with litellm's routing as
the provider, exact usage per class and genai-prices' cost; sync, async, streams."""

from __future__ import annotations

import asyncio
import json
import os
from urllib.parse import unquote

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network at import
litellm = pytest.importorskip("litellm", reason="litellm is an optional extra (pip install otel-tokens[litellm])")

import genai_prices  # noqa: E402

from otel_tokens.capture.sdk import litellm_patches
from otel_tokens.capture.sdk import openai as openai_sdk  # noqa: E402

from ..local_server import LocalServer  # noqa: E402
from ..telemetry.conftest import handling  # noqa: E402

CHAT = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1200, "completion_tokens": 30, "total_tokens": 1230,
                  "prompt_tokens_details": {"cached_tokens": 1024},
                  "completion_tokens_details": {"reasoning_tokens": 0}}}  # fmt: skip
MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-3-5-haiku-20241022",
           "content": [{"type": "text", "text": "hey"}], "stop_reason": "end_turn",
           "usage": {"input_tokens": 20, "output_tokens": 4, "cache_read_input_tokens": 100,
                     "cache_creation_input_tokens": 50}}  # fmt: skip


def chat_stream() -> bytes:
    chunk = {**CHAT, "object": "chat.completion.chunk", "usage": None}
    events = [{**chunk, "choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}]} for w in ("a", "b")]
    events.append({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    events.append({**chunk, "choices": [], "usage": CHAT["usage"]})
    return ("".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n").encode()


class Server(LocalServer):
    def __init__(self) -> None:
        self.queue: list[tuple[str, bytes]] = []
        super().__init__(lambda path, body: (200, *self.queue.pop(0), {}))

    def json(self, body: dict) -> None:
        self.queue.append(("application/json", json.dumps(body).encode()))


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


@pytest.fixture
def telemetry():
    # openai_sdk too, as under instrument(): litellm's own SDK use must not count twice
    with handling(openai_sdk, litellm_patches) as t:
        yield t


def price(model: str, provider: str, **usage: int) -> float:
    return float(genai_prices.calc_price(genai_prices.Usage(**usage), model, provider_id=provider).total_price)


def usage_of(span) -> tuple:
    a = span.attributes
    return (a.get("gen_ai.usage.input_tokens"), a.get("gen_ai.usage.output_tokens"),
            a.get("gen_ai.usage.cache_read.input_tokens"), a.get("gen_ai.usage.cache_write.input_tokens"))  # fmt: skip


MESSAGES = [{"role": "user", "content": "Say hi."}]


def test_an_openai_model(telemetry, server):
    server.json(CHAT)
    response = litellm.completion(model="gpt-4o-mini", messages=MESSAGES, api_base=server.url + "/v1", api_key="k")
    assert response.choices[0].message.content == "hi"
    (span,) = telemetry.finished()
    attrs = span.attributes
    assert (attrs["gen_ai.provider.name"], attrs["gen_ai.request.model"], attrs["gen_ai.response.model"]) == \
        ("openai", "gpt-4o-mini", "gpt-4o-mini-2024-07-18")  # fmt: skip
    assert usage_of(span) == (1200, 30, 1024, None)
    assert attrs["otel_tokens.cost.usd"] == pytest.approx(
        price("gpt-4o-mini", "openai", input_tokens=1200, cache_read_tokens=1024, output_tokens=30), rel=1e-9)


def test_an_anthropic_model_over_litellm_own_http(telemetry, server):
    server.json(MESSAGE)
    litellm.completion(model="anthropic/claude-3-5-haiku-20241022", messages=MESSAGES, api_base=server.url, api_key="k")
    assert server.paths == ["/v1/messages"]
    (span,) = telemetry.finished()
    assert span.attributes["gen_ai.provider.name"] == "anthropic"
    assert span.attributes["gen_ai.request.model"] == "claude-3-5-haiku-20241022"
    assert usage_of(span) == (170, 4, 100, 50)
    assert span.attributes["otel_tokens.cost.usd"] == pytest.approx(
        price("claude-3-5-haiku-20241022", "anthropic", input_tokens=170, cache_read_tokens=100,
              cache_write_tokens=50, output_tokens=4), rel=1e-9)  # fmt: skip


def test_a_stream_is_recorded_once_when_the_caller_has_read_it(telemetry, server):
    server.queue.append(("text/event-stream", chat_stream()))
    stream = litellm.completion(model="gpt-4o-mini", messages=MESSAGES, api_base=server.url + "/v1", api_key="k",
                                stream=True, stream_options={"include_usage": True})  # fmt: skip
    texts = [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content]
    assert texts == ["a", "b"]
    (span,) = telemetry.finished()
    assert usage_of(span) == (1200, 30, 1024, None)
    assert span.attributes["otel_tokens.stream.end"] == "exhausted"


def test_async_calls_and_streams(telemetry, server):
    server.json(MESSAGE)
    server.queue.append(("text/event-stream", chat_stream()))

    async def main():
        whole = await litellm.acompletion(model="anthropic/claude-3-5-haiku-20241022", messages=MESSAGES,
                                          api_base=server.url, api_key="k")  # fmt: skip
        stream = await litellm.acompletion(model="gpt-4o-mini", messages=MESSAGES, api_base=server.url + "/v1",
                                           api_key="k", stream=True, stream_options={"include_usage": True})  # fmt: skip
        return whole.choices[0].message.content, [c async for c in stream]

    text, chunks = asyncio.run(main())
    assert text == "hey" and chunks
    assert sorted(usage_of(s) for s in telemetry.finished()) == [(170, 4, 100, 50), (1200, 30, 1024, None)]


def test_an_sdk_call_made_inside_a_recorded_litellm_call_is_not_recorded_again(telemetry, server):
    """Whichever provider path litellm takes, one call: an SDK call inside it passes through."""
    import openai

    from otel_tokens.capture.sent import inside_gateway

    server.json(CHAT)
    client = openai.OpenAI(api_key="k", base_url=server.url + "/v1", max_retries=0)
    token = inside_gateway.set(True)
    try:
        assert client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES).usage.prompt_tokens == 1200
    finally:
        inside_gateway.reset(token)
    assert telemetry.finished() == []


# -- Bedrock's binary event streams over litellm's own client (documented format: frames as
# botocore's ``eventstream`` parser reads them, payloads in the ``bedrock-runtime`` shapes) --------
BEDROCK_MODEL = "us.anthropic.claude-3-5-haiku-20241022-v1:0"
AWS = {"aws_region_name": "us-east-1", "aws_access_key_id": "AKIDEXAMPLE",
       "aws_secret_access_key": "secret"}  # fmt: skip


def bedrock_frames(route: str) -> bytes:
    """A stream answering "Hello there": ConverseStream's events, or InvokeModel's chunks of
    Anthropic's events closed by Bedrock's invocation metrics; 120 fresh input tokens, 40 read
    from the cache and 8 written to it, 9 output tokens."""
    from ..sdk.bedrock_server import chunk, frame

    if route == "converse":
        return b"".join([frame("messageStart", {"role": "assistant"}),
                         *(frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": t}})
                           for t in ("Hello", " there")),
                         frame("contentBlockStop", {"contentBlockIndex": 0}),
                         frame("messageStop", {"stopReason": "end_turn"}),
                         frame("metadata", {"usage": {"inputTokens": 120, "outputTokens": 9, "totalTokens": 177,
                                                      "cacheReadInputTokens": 40, "cacheWriteInputTokens": 8},
                                            "metrics": {"latencyMs": 5}})])  # fmt: skip
    events = [{"type": "message_start", "message": {
                  "id": "m", "type": "message", "role": "assistant", "model": "claude-3-5-haiku-20241022",
                  "content": [], "stop_reason": None, "usage": {"input_tokens": 120, "output_tokens": 1,
                  "cache_read_input_tokens": 40, "cache_creation_input_tokens": 8}}},
              {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
              *({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}}
                for t in ("Hello", " there")),
              {"type": "content_block_stop", "index": 0},
              {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}},
              {"type": "message_stop", "amazon-bedrock-invocationMetrics": {
                  "inputTokenCount": 120, "outputTokenCount": 9, "invocationLatency": 5, "firstByteLatency": 1}}]  # fmt: skip
    return b"".join(chunk(e) for e in events)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("route, path", [("converse", "converse-stream"),
                                         ("invoke", "invoke-with-response-stream")])  # fmt: skip
def test_a_bedrock_event_stream_is_recorded_exactly_and_passes_unchanged(telemetry, server, route, path,
                                                                          is_async):  # fmt: skip
    """Its frames are read as they pass (the usage held to the one rule): the caller's text is
    the stream's, and the call is recorded once, with the counts Bedrock sent."""
    server.queue.append(("application/vnd.amazon.eventstream", bedrock_frames(route)))
    call = {"model": f"bedrock/{route}/{BEDROCK_MODEL}", "messages": MESSAGES, "api_base": server.url,
            "stream": True, "stream_options": {"include_usage": True}, **AWS}  # fmt: skip

    async def read() -> str:
        chunks = [c async for c in await litellm.acompletion(**call)]
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

    if is_async:
        text = asyncio.run(read())
    else:
        chunks = list(litellm.completion(**call))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello there"
    assert [unquote(p) for p in server.paths] == [f"/model/{BEDROCK_MODEL}/{path}"]
    (span,) = telemetry.finished()
    assert span.attributes["gen_ai.provider.name"] == "aws.bedrock"
    assert usage_of(span) == (168, 9, 40, 8)
    assert span.attributes["otel_tokens.usage.source"] == "reported"
    assert span.attributes["otel_tokens.stream.end"] == "exhausted"
    assert telemetry.errors() == {}
