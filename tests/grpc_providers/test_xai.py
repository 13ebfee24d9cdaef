"""xai-sdk (gRPC) through its real client against a real gRPC server serving the SDK's own
protos (``xai_sdk.proto``'s generated servicer): ``chat.create(...).sample()`` and
``.stream()``, sync and async; exact tokens under ``x_ai``, priced; answers unchanged."""

from __future__ import annotations

import asyncio
import math

import pytest

from ..providers.test_openai_compatible import price_at
from .conftest import attributes, serve, tokens

xai_sdk = pytest.importorskip("xai_sdk")
from xai_sdk.proto.v5 import chat_pb2, chat_pb2_grpc, sample_pb2, usage_pb2

MODEL = "grok-4"
#: xAI counts reasoning apart from completion: total = prompt + completion + reasoning
USAGE = {"prompt_tokens": 120, "completion_tokens": 30, "reasoning_tokens": 50, "total_tokens": 200,
             "cached_prompt_text_tokens": 100, "prompt_text_tokens": 120}  # fmt: skip


class Chat(chat_pb2_grpc.ChatServicer):
    """xAI's Chat service answering with a known usage (the stream's in its last chunk)."""

    def __init__(self) -> None:
        self.requests: list = []

    def GetCompletion(self, request, context):
        self.requests.append(request)
        message = chat_pb2.CompletionMessage(content="Hello there", role=chat_pb2.ROLE_ASSISTANT)
        output = chat_pb2.CompletionOutput(
            index=0, message=message, finish_reason=sample_pb2.REASON_STOP
        )
        return chat_pb2.GetChatCompletionResponse(
            id="resp-1",
            model=request.model,
            outputs=[output],
            usage=usage_pb2.SamplingUsage(**USAGE),
        )

    def GetCompletionChunk(self, request, context):
        self.requests.append(request)
        for i, text in enumerate(("Hello", " there")):
            last = i == 1
            output = chat_pb2.CompletionOutputChunk(
                index=0,
                delta=chat_pb2.Delta(content=text, role=chat_pb2.ROLE_ASSISTANT),
                finish_reason=sample_pb2.REASON_STOP if last else 0,
            )
            yield chat_pb2.GetChatCompletionChunk(
                id="resp-2",
                model=request.model,
                outputs=[output],
                usage=usage_pb2.SamplingUsage(**USAGE) if last else None,
            )


@pytest.fixture
def chat_server():
    servicer = Chat()
    server, address = serve(lambda s: chat_pb2_grpc.add_ChatServicer_to_server(servicer, s))
    yield servicer, address
    server.stop(None)


def _user(text: str):
    from xai_sdk.chat import user

    return user(text)


def test_sample_and_stream_sync(telemetry, chat_server):
    servicer, address = chat_server
    client = xai_sdk.Client(api_key="test", api_host=address, use_insecure_channel=True)
    chat = client.chat.create(model=MODEL, messages=[_user("Say hello")], max_tokens=64)
    answer = chat.sample()
    streamed = "".join(chunk.content for _, chunk in chat.stream())
    assert (answer.content, streamed) == ("Hello there", "Hello there")
    assert answer.usage.reasoning_tokens == 50  # what the program gets: unchanged
    price = price_at("x-ai", MODEL, input_tokens=120, output_tokens=80, cache_read_tokens=100)
    spans = attributes(telemetry)
    assert len(spans) == 2 and telemetry.errors() == {}
    for attrs in spans:
        assert tokens(attrs) == (120, 80)  # completion + reasoning
        assert attrs["gen_ai.provider.name"] == "x_ai" and attrs["gen_ai.request.model"] == MODEL
        assert attrs["gen_ai.usage.cache_read.input_tokens"] == 100
        assert math.isclose(attrs["otel_tokens.cost.usd"], price)
        assert attrs["server.address"] == "127.0.0.1"
    assert spans[0]["gen_ai.response.finish_reasons"] == ("stop",)
    assert spans[1]["otel_tokens.stream.end"] == "exhausted"
    assert len(servicer.requests) == 2


def test_sample_and_stream_async(telemetry, chat_server):
    _, address = chat_server
    from xai_sdk import AsyncClient

    async def run() -> tuple[str, str]:
        client = AsyncClient(api_key="test", api_host=address, use_insecure_channel=True)
        chat = client.chat.create(model=MODEL, messages=[_user("Say hello")])
        answer = await chat.sample()
        streamed = [chunk.content async for _, chunk in chat.stream()]
        return answer.content, "".join(streamed)

    assert asyncio.run(run()) == ("Hello there", "Hello there")
    spans = attributes(telemetry)
    assert [tokens(a) for a in spans] == [(120, 80), (120, 80)]
    assert all(a["gen_ai.provider.name"] == "x_ai" for a in spans)
    assert telemetry.errors() == {}


def test_a_failed_call_ends_with_its_grpc_status(telemetry):
    grpc = pytest.importorskip("grpc")

    class Limited(chat_pb2_grpc.ChatServicer):
        def GetCompletion(self, request, context):
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "rate limited")

    server, address = serve(lambda s: chat_pb2_grpc.add_ChatServicer_to_server(Limited(), s))
    try:
        client = xai_sdk.Client(api_key="test", api_host=address, use_insecure_channel=True)
        chat = client.chat.create(model=MODEL, messages=[_user("Say hello")])
        with pytest.raises(grpc.RpcError) as raised:
            chat.sample()
        assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED  # passed through
    finally:
        server.stop(None)
    (attrs,) = attributes(telemetry)
    assert attrs["error.type"] == "RESOURCE_EXHAUSTED" and attrs["gen_ai.provider.name"] == "x_ai"
