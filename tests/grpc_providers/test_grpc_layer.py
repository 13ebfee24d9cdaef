"""The gRPC layer beneath any client: a generated stub used by hand (xAI's protos against a
real gRPC server), through interceptors and every call style grpc has (``__call__``,
``with_call``, ``future``, a stream dropped half read); any other method's callable is the one
grpc made; a call an SDK capture records already is not recorded again."""

from __future__ import annotations

import gc

import pytest

from otel_tokens.capture.sent import inside_sdk

from .conftest import attributes, tokens
from .test_xai import MODEL, chat_server  # noqa: F401 (a fixture)

grpc = pytest.importorskip("grpc")
from xai_sdk.proto.v5 import chat_pb2, chat_pb2_grpc


class PassThrough(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """An interceptor as clients add them (auth, logging): continues each call unchanged."""

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(details, request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(details, request)


def _request():
    content = chat_pb2.Content(text="Say hello")
    message = chat_pb2.Message(role=chat_pb2.ROLE_USER, content=[content])
    return chat_pb2.GetCompletionsRequest(model=MODEL, messages=[message])


def test_every_call_style_direct_and_through_interceptors(telemetry, chat_server):  # noqa: F811
    _, address = chat_server
    direct = grpc.insecure_channel(address)
    intercepted = grpc.intercept_channel(grpc.insecure_channel(address), PassThrough())
    answers = []
    for channel in (direct, intercepted):
        stub = chat_pb2_grpc.ChatStub(channel)
        answers.append(stub.GetCompletion(_request()))
        answers.append(stub.GetCompletion.with_call(_request())[0])
        answers.append(stub.GetCompletion.future(_request()).result(timeout=30))
        answers.append(list(stub.GetCompletionChunk(_request()))[-1])
    assert all(a.usage.prompt_tokens == 120 for a in answers)  # the messages grpc made
    spans = attributes(telemetry)
    assert len(spans) == 8 and telemetry.errors() == {}
    assert all(tokens(a) == (120, 80) and a["gen_ai.provider.name"] == "x_ai" for a in spans)


def test_a_stream_dropped_half_read_ends_once(telemetry, chat_server):  # noqa: F811
    _, address = chat_server
    stub = chat_pb2_grpc.ChatStub(grpc.insecure_channel(address))
    stream = stub.GetCompletionChunk(_request())
    first = next(stream)
    assert first.outputs[0].delta.content == "Hello"
    stream.cancel()  # the call object's own methods pass through
    del stream
    gc.collect()
    (attrs,) = attributes(telemetry)
    assert attrs["otel_tokens.stream.end"] == "abandoned"


def test_other_methods_get_the_callable_grpc_made(telemetry, chat_server):  # noqa: F811
    _, address = chat_server
    channel = grpc.insecure_channel(address)
    made = channel.unary_unary("/xai_api.Models/ListLanguageModels")
    assert type(made).__module__ == "grpc._channel"  # not wrapped
    known = channel.unary_unary("/xai_api.Chat/GetCompletion")
    assert isinstance(known, grpc.UnaryUnaryMultiCallable)  # wrapped, still one


def test_a_call_an_sdk_capture_records_is_not_recorded_again(telemetry, chat_server):  # noqa: F811
    _, address = chat_server
    stub = chat_pb2_grpc.ChatStub(grpc.insecure_channel(address))
    token = inside_sdk.set(True)
    try:
        stub.GetCompletion(_request())
    finally:
        inside_sdk.reset(token)
    assert telemetry.finished() == []


class Limited(chat_pb2_grpc.ChatServicer):
    """Every call refused, as a rate limit refuses it."""

    def GetCompletion(self, request, context):
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "rate limited")

    def GetCompletionChunk(self, request, context):
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "rate limited")
        yield  # a generator, as a streaming method is


def test_every_call_style_fails_with_its_grpc_status(telemetry):
    import asyncio

    from .conftest import serve

    server, address = serve(lambda s: chat_pb2_grpc.add_ChatServicer_to_server(Limited(), s))
    stub = chat_pb2_grpc.ChatStub(grpc.insecure_channel(address))
    styles = (
        lambda: stub.GetCompletion(_request()),
        lambda: stub.GetCompletion.with_call(_request()),
        lambda: stub.GetCompletion.future(_request()).result(timeout=30),
        lambda: list(stub.GetCompletionChunk(_request())),
    )

    async def run_async() -> None:
        async with grpc.aio.insecure_channel(address) as channel:
            astub = chat_pb2_grpc.ChatStub(channel)
            with pytest.raises(grpc.aio.AioRpcError):
                await astub.GetCompletion(_request())
            with pytest.raises(grpc.aio.AioRpcError):
                async for _ in astub.GetCompletionChunk(_request()):
                    pass

    try:
        for style in styles:
            with pytest.raises(grpc.RpcError) as raised:
                style()
            assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED  # passed through
        asyncio.run(run_async())
    finally:
        server.stop(None)
    spans = attributes(telemetry)
    assert len(spans) == 6
    assert {a["error.type"] for a in spans} == {"RESOURCE_EXHAUSTED"}
