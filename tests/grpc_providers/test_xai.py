"""xai-sdk (gRPC) through its real client against a real gRPC server serving the SDK's own
protos (``xai_sdk.proto``'s generated servicer): ``chat.create(...).sample()`` and
``.stream()``, sync and async; exact tokens under ``x_ai``, priced; answers unchanged; a
deferred completion (``chat.defer``) recorded once when done, its polls before nothing; an
image (``image.sample``) with the cost xAI reports."""

from __future__ import annotations

import asyncio
import datetime
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


# -- deferred completions and images -------------------------------------------------------
from xai_sdk.proto.v5 import deferred_pb2, image_pb2, image_pb2_grpc  # noqa: E402

TICKS = 12_345_000  # the cost xAI reports: 1 tick = 1e-10 USD
COSTED = {**USAGE, "cost_in_usd_ticks": TICKS}
IMAGE_USAGE = {"prompt_tokens": 9, "prompt_text_tokens": 9, "completion_tokens": 0,
               "total_tokens": 9, "cost_in_usd_ticks": 700_000_000}  # fmt: skip


class Deferred(chat_pb2_grpc.ChatServicer):
    """A deferred completion: pending at the first poll of each request, done after."""

    def __init__(self, final=deferred_pb2.DONE) -> None:
        self.polls: dict[str, int] = {}
        self.final = final

    def StartDeferredCompletion(self, request, context):
        request_id = f"req-{len(self.polls)}"
        self.polls[request_id] = 0
        return deferred_pb2.StartDeferredResponse(request_id=request_id)

    def GetDeferredCompletion(self, request, context):
        self.polls[request.request_id] += 1
        if self.polls[request.request_id] == 1:
            return chat_pb2.GetDeferredCompletionResponse(status=deferred_pb2.PENDING)
        if self.final != deferred_pb2.DONE:
            return chat_pb2.GetDeferredCompletionResponse(status=self.final)
        message = chat_pb2.CompletionMessage(content="Hello there", role=chat_pb2.ROLE_ASSISTANT)
        output = chat_pb2.CompletionOutput(
            index=0, message=message, finish_reason=sample_pb2.REASON_STOP
        )
        response = chat_pb2.GetChatCompletionResponse(
            id=f"done-{request.request_id}", model=MODEL, outputs=[output],
            usage=usage_pb2.SamplingUsage(**COSTED),
        )  # fmt: skip
        return chat_pb2.GetDeferredCompletionResponse(status=deferred_pb2.DONE, response=response)


class Images(image_pb2_grpc.ImageServicer):
    def GenerateImage(self, request, context):
        image = image_pb2.GeneratedImage(url="https://img.test/1.jpg", respect_moderation=True)
        return image_pb2.ImageResponse(
            images=[image], model=request.model, usage=usage_pb2.SamplingUsage(**IMAGE_USAGE)
        )


@pytest.fixture
def deferred_server():
    servicer = Deferred()
    server, address = serve(
        lambda s: chat_pb2_grpc.add_ChatServicer_to_server(servicer, s),
        lambda s: image_pb2_grpc.add_ImageServicer_to_server(Images(), s),
    )
    yield servicer, address
    server.stop(None)


FAST = datetime.timedelta(milliseconds=1)


def test_a_deferred_completion_is_recorded_once_when_done(telemetry, deferred_server):
    servicer, address = deferred_server
    client = xai_sdk.Client(api_key="test", api_host=address, use_insecure_channel=True)
    chat = client.chat.create(model=MODEL, messages=[_user("Say hello")])
    answer = chat.defer(interval=FAST)
    assert answer.content == "Hello there" and servicer.polls == {"req-0": 2}
    # read again by its request id: the same completion, not counted again
    stub = chat_pb2_grpc.ChatStub(client._api_channel)
    again = stub.GetDeferredCompletion(deferred_pb2.GetDeferredRequest(request_id="req-0"))
    assert again.status == deferred_pb2.DONE
    (attrs,) = attributes(telemetry)  # the pending poll recorded nothing
    assert tokens(attrs) == (120, 80) and attrs["gen_ai.provider.name"] == "x_ai"
    assert attrs["gen_ai.response.model"] == MODEL and attrs["gen_ai.response.id"] == "done-req-0"
    assert math.isclose(attrs["otel_tokens.cost.usd"], TICKS * 1e-10)  # as xAI billed it
    assert telemetry.errors() == {}


def test_deferred_completions_async_and_an_expired_one(telemetry, deferred_server):
    servicer, address = deferred_server
    from xai_sdk import AsyncClient

    async def run() -> str:
        client = AsyncClient(api_key="test", api_host=address, use_insecure_channel=True)
        chat = client.chat.create(model=MODEL, messages=[_user("Say hello")])
        return (await chat.defer(interval=FAST)).content

    assert asyncio.run(run()) == "Hello there"
    servicer.final = deferred_pb2.EXPIRED
    client = xai_sdk.Client(api_key="test", api_host=address, use_insecure_channel=True)
    with pytest.raises(RuntimeError, match="expired"):  # the SDK's own error, passed through
        client.chat.create(model=MODEL, messages=[_user("Say hello")]).defer(interval=FAST)
    done, expired = attributes(telemetry)
    assert tokens(done) == (120, 80)
    assert tokens(expired) == (None, None) and expired["gen_ai.response.finish_reasons"] == (
        "expired",
    )
    assert telemetry.errors() == {"usage_missing": 1}  # the expired one: never 0


def test_image_generation_sync_and_async(telemetry, deferred_server):
    _, address = deferred_server
    from xai_sdk import AsyncClient

    async def run() -> str:
        client = AsyncClient(api_key="test", api_host=address, use_insecure_channel=True)
        return (await client.image.sample(prompt="a fox", model="grok-imagine-image")).url

    client = xai_sdk.Client(api_key="test", api_host=address, use_insecure_channel=True)
    image = client.image.sample(prompt="a fox", model="grok-imagine-image")
    assert image.url == asyncio.run(run()) == "https://img.test/1.jpg"
    spans = attributes(telemetry)
    assert len(spans) == 2 and telemetry.errors() == {}
    for attrs in spans:
        assert attrs["gen_ai.operation.name"] == "generate_content"
        assert attrs["gen_ai.request.model"] == "grok-imagine-image"
        assert tokens(attrs) == (9, 0)
        assert math.isclose(attrs["otel_tokens.cost.usd"], 0.07)  # xAI's reported cost
