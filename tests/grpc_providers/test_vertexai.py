"""google-cloud-aiplatform's ``vertexai.generative_models`` through its real client on its
default transport (gRPC) against a real gRPC server answering with Vertex AI's own messages
(the SDK's proto-plus ``GenerateContentResponse``, serialised by it): ``generate_content``,
streamed and not, sync and async (``generate_content_async``); exact tokens under
``gcp.vertex_ai``, priced; answers unchanged.

The model's GAPIC client is given a plaintext channel to the local server (the SDK dials
TLS to Google's hosts): everything above the channel is the SDK's own."""

from __future__ import annotations

import asyncio
import math

import pytest

from ..providers.test_openai_compatible import price_at
from .conftest import attributes, serve, tokens

pytest.importorskip("vertexai.generative_models")
import grpc
import vertexai
from google.auth.credentials import AnonymousCredentials
from google.cloud.aiplatform_v1.services.prediction_service import (
    PredictionServiceAsyncClient,
    PredictionServiceClient,
    transports,
)
from google.cloud.aiplatform_v1.types import prediction_service as types
from vertexai.generative_models import GenerationConfig, GenerativeModel

MODEL = "gemini-2.5-flash"
USAGE = {"prompt_token_count": 120, "candidates_token_count": 30, "thoughts_token_count": 10,
             "cached_content_token_count": 100, "total_token_count": 160}  # fmt: skip
SERVICE = "google.cloud.aiplatform.v1.PredictionService"


def _answer(text: str, last: bool) -> types.GenerateContentResponse:
    candidate = {"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}
    if last:
        candidate["finish_reason"] = "STOP"
    return types.GenerateContentResponse(
        candidates=[candidate],
        model_version=MODEL,
        response_id="resp-1",
        usage_metadata=USAGE if last else {"prompt_token_count": 120},
    )


def _handler(seen: list, service: str = SERVICE):
    """Vertex's service (v1; its v1beta1 has the same messages on the wire)."""

    def generate(request, context):
        seen.append(request)
        return _answer("Hello there", last=True)

    def stream(request, context):
        seen.append(request)
        yield _answer("Hello", last=False)
        yield _answer(" there", last=True)

    options = {
        "request_deserializer": types.GenerateContentRequest.deserialize,
        "response_serializer": types.GenerateContentResponse.serialize,
    }
    return grpc.method_handlers_generic_handler(
        service,
        {
            "GenerateContent": grpc.unary_unary_rpc_method_handler(generate, **options),
            "StreamGenerateContent": grpc.unary_stream_rpc_method_handler(stream, **options),
        },
    )


@pytest.fixture
def vertex_server():
    seen: list = []
    handlers = (_handler(seen), _handler(seen, SERVICE.replace(".v1.", ".v1beta1.")))
    server, address = serve(lambda s: s.add_generic_rpc_handlers(handlers))
    vertexai.init(
        project="test-project", location="us-central1", credentials=AnonymousCredentials()
    )
    yield seen, address
    server.stop(None)


def _model(address: str, is_async: bool = False) -> GenerativeModel:
    model = GenerativeModel(MODEL, generation_config=GenerationConfig(max_output_tokens=256))
    if is_async:
        channel = grpc.aio.insecure_channel(address)
        transport = transports.PredictionServiceGrpcAsyncIOTransport(channel=channel)
        model.__dict__["_prediction_async_client"] = PredictionServiceAsyncClient(
            transport=transport
        )
    else:
        transport = transports.PredictionServiceGrpcTransport(
            channel=grpc.insecure_channel(address)
        )
        model.__dict__["_prediction_client"] = PredictionServiceClient(transport=transport)
    return model


def _check(spans: list) -> None:
    assert spans, "nothing recorded"
    price = price_at("google", MODEL, input_tokens=120, output_tokens=40, cache_read_tokens=100)
    for attrs in spans:
        assert tokens(attrs) == (120, 40)  # candidates + thoughts
        assert attrs["gen_ai.usage.cache_read.input_tokens"] == 100
        assert attrs["gen_ai.provider.name"] == "gcp.vertex_ai"
        assert attrs["gen_ai.request.model"] == MODEL and attrs["gen_ai.response.model"] == MODEL
        assert attrs["gen_ai.response.finish_reasons"] == ("stop",)
        assert math.isclose(attrs["otel_tokens.cost.usd"], price)


def test_generate_content_plain_and_streamed(telemetry, vertex_server):
    seen, address = vertex_server
    model = _model(address)
    answer = model.generate_content("Say hello")
    streamed = "".join(chunk.text for chunk in model.generate_content("Say hello", stream=True))
    assert (answer.text, streamed) == ("Hello there", "Hello there")
    assert answer.usage_metadata.thoughts_token_count == 10  # what the program gets: unchanged
    spans = attributes(telemetry)
    assert len(spans) == 2 and telemetry.errors() == {}
    _check(spans)
    assert spans[1]["otel_tokens.stream.end"] == "exhausted"
    assert [r.model.rsplit("/", 1)[-1] for r in seen] == [MODEL, MODEL]


def test_generate_content_async_plain_and_streamed(telemetry, vertex_server):
    _, address = vertex_server

    async def run() -> tuple[str, str]:
        model = _model(address, is_async=True)
        answer = await model.generate_content_async("Say hello")
        chunks = await model.generate_content_async("Say hello", stream=True)
        streamed = [chunk.text async for chunk in chunks]
        return answer.text, "".join(streamed)

    assert asyncio.run(run()) == ("Hello there", "Hello there")
    spans = attributes(telemetry)
    assert len(spans) == 2 and telemetry.errors() == {}
    _check(spans)


# -- the REST transport: recorded by the HTTP layer (requests), Gemini's wire format ----------
def _rest_chunk(text: str, last: bool) -> dict:
    candidate = {"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}
    usage = {"promptTokenCount": 120}
    if last:
        candidate["finishReason"] = "STOP"
        usage = {"promptTokenCount": 120, "candidatesTokenCount": 30, "thoughtsTokenCount": 10,
                 "cachedContentTokenCount": 100, "totalTokenCount": 160}  # fmt: skip
    return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": MODEL,
            "responseId": "resp-1"}  # fmt: skip


def _rest_answer(path: str, body):
    import json

    if ":streamGenerateContent" in path:  # a JSON array of chunks (no alt=sse)
        chunks = [_rest_chunk("Hello", False), _rest_chunk(" there", True)]
        return 200, "application/json", json.dumps(chunks).encode(), {}
    return 200, "application/json", json.dumps(_rest_chunk("Hello there", True)).encode(), {}


def test_generate_content_on_the_rest_transport(http_telemetry, provider_urls):
    from ..local_server import LocalServer

    server = LocalServer(_rest_answer)
    try:
        provider_urls(server.url, "gcp.vertex_ai")
        vertexai.init(
            project="test-project", location="us-central1", credentials=AnonymousCredentials()
        )
        model = GenerativeModel(MODEL)
        transport = transports.PredictionServiceRestTransport(
            host=server.url.removeprefix("http://"),
            url_scheme="http",
            credentials=AnonymousCredentials(),
        )
        model.__dict__["_prediction_client"] = PredictionServiceClient(transport=transport)
        answer = model.generate_content("Say hello")
        streamed = "".join(c.text for c in model.generate_content("Say hello", stream=True))
    finally:
        server.close()
    assert (answer.text, streamed) == ("Hello there", "Hello there")
    assert [p.rpartition(":")[2].partition("?")[0] for p in server.paths] == ["generateContent", "streamGenerateContent"]  # fmt: skip
    spans = attributes(http_telemetry)
    assert len(spans) == 2 and http_telemetry.errors() == {}
    _check(spans)


def test_the_preview_namespace_on_v1beta1(telemetry, vertex_server):
    from google.cloud.aiplatform_v1beta1.services import prediction_service as beta
    from vertexai.preview.generative_models import GenerativeModel as PreviewModel

    _, address = vertex_server
    model = PreviewModel(MODEL)
    channel = grpc.insecure_channel(address)
    transport = beta.transports.PredictionServiceGrpcTransport(channel=channel)
    model.__dict__["_prediction_client"] = beta.PredictionServiceClient(transport=transport)
    assert model.generate_content("Say hello").text == "Hello there"
    spans = attributes(telemetry)
    assert len(spans) == 1
    _check(spans)
