"""The ``anthropic`` SDK at Anthropic-compatible endpoints (z.ai, DeepSeek, Moonshot) and its
Bedrock and Vertex clients: each call under that provider's name, at its price (checked
against genai-prices at that provider), body and stream."""

from __future__ import annotations

import math

import pytest

from otel_tokens.capture.sdk import anthropic as anthropic_sdk

from ..telemetry.conftest import handling
from .hosts import Host

anthropic = pytest.importorskip("anthropic")
genai_prices = pytest.importorskip("genai_prices")


@pytest.fixture
def telemetry():
    with handling(anthropic_sdk) as t:
        yield t


def message(model: str) -> dict:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": "Hello there"}], "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 300, "output_tokens": 40, "cache_read_input_tokens": 200,
                      "cache_creation_input_tokens": 0}}  # fmt: skip


def events(model: str) -> list[dict]:
    start = message(model)
    start = {**start, "content": [], "stop_reason": None,
             "usage": {**start["usage"], "output_tokens": 1}}  # fmt: skip
    return [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello there"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
         "usage": {"output_tokens": 40}},
        {"type": "message_stop"},
    ]  # fmt: skip


def price_at(provider_id: str, model: str) -> float:
    usage = genai_prices.Usage(input_tokens=500, cache_read_tokens=200, cache_write_tokens=0, output_tokens=40)
    return float(genai_prices.calc_price(usage, model, provider_id=provider_id).total_price)


def ask(client, stream: bool) -> str:
    kwargs = {"model": MODEL_OF[id(client)], "max_tokens": 64,
              "messages": [{"role": "user", "content": "Say hello"}]}  # fmt: skip
    if not stream:
        return client.messages.create(**kwargs).content[0].text
    with client.messages.stream(**kwargs) as s:
        return "".join(s.text_stream)


MODEL_OF: dict[int, str] = {}

# (name, base URL, provider name, server address, genai-prices id, model)
COMPATIBLE = [
    ("zai", "https://api.z.ai/api/anthropic", "zai", "api.z.ai", "zai", "glm-4.6"),
    ("deepseek", "https://api.deepseek.com/anthropic", "deepseek", "api.deepseek.com", "deepseek", "deepseek-chat"),
    ("moonshot", "https://api.moonshot.ai/anthropic", "moonshotai", "api.moonshot.ai", "moonshotai",
     "kimi-k2-0711-preview"),
    ("anthropic", "https://api.anthropic.com", "anthropic", "api.anthropic.com", "anthropic",
     "claude-3-5-haiku-20241022"),
]  # fmt: skip


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
@pytest.mark.parametrize("case", COMPATIBLE, ids=[c[0] for c in COMPATIBLE])
def test_anthropic_compatible_endpoints(telemetry, case, stream):
    _name, base, provider, address, price_id, model = case
    host = Host("anthropic", events=events(model), sse_names=True) if stream else Host("anthropic", message(model))
    client = anthropic.Anthropic(api_key="test", base_url=base, http_client=host.client(), max_retries=0)
    MODEL_OF[id(client)] = model
    assert ask(client, stream) == "Hello there"
    (span,) = telemetry.finished()
    attrs = span.attributes
    assert (attrs["gen_ai.provider.name"], attrs["server.address"]) == (provider, address)
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.cache_read.input_tokens"]) == (500, 200)
    assert attrs["otel_tokens.cost.price_match"] == "endpoint"
    assert math.isclose(attrs["otel_tokens.cost.usd"], price_at(price_id, model), rel_tol=1e-9)


def test_bedrock_client_is_aws_bedrock_at_its_price(telemetry):
    from anthropic import AnthropicBedrock

    model = "anthropic.claude-3-5-sonnet-20241022-v2:0"
    host = Host("anthropic", message(model))
    client = AnthropicBedrock(aws_access_key="AKIDEXAMPLE", aws_secret_key="secret", aws_region="us-west-2",
                              http_client=host.client(), max_retries=0)  # fmt: skip
    MODEL_OF[id(client)] = model
    assert ask(client, False) == "Hello there"
    (span,) = telemetry.finished()
    attrs = span.attributes
    assert attrs["gen_ai.provider.name"] == "aws.bedrock"
    assert attrs["server.address"] == "bedrock-runtime.us-west-2.amazonaws.com"
    assert math.isclose(attrs["otel_tokens.cost.usd"], price_at("aws", model), rel_tol=1e-9)


def test_vertex_client_is_gcp_vertex_ai_at_its_price(telemetry):
    from anthropic import AnthropicVertex

    model = "claude-3-5-sonnet-v2@20241022"
    host = Host("anthropic", message(model))
    client = AnthropicVertex(region="us-east5", project_id="proj", access_token="token",
                             http_client=host.client(), max_retries=0)  # fmt: skip
    MODEL_OF[id(client)] = model
    assert ask(client, False) == "Hello there"
    (span,) = telemetry.finished()
    attrs = span.attributes
    assert attrs["gen_ai.provider.name"] == "gcp.vertex_ai"
    assert attrs["server.address"] == "us-east5-aiplatform.googleapis.com"
    assert math.isclose(attrs["otel_tokens.cost.usd"], price_at("google", model), rel_tol=1e-9)


def test_vertex_client_streams_at_its_price(telemetry):
    from anthropic import AnthropicVertex

    model = "claude-3-5-sonnet-v2@20241022"
    host = Host("anthropic", events=events(model), sse_names=True)
    client = AnthropicVertex(region="europe-west1", project_id="proj", access_token="token",
                             http_client=host.client(), max_retries=0)  # fmt: skip
    MODEL_OF[id(client)] = model
    assert ask(client, True) == "Hello there"
    (span,) = telemetry.finished()
    attrs = span.attributes
    assert (attrs["gen_ai.provider.name"], attrs["server.address"]) == (
        "gcp.vertex_ai", "europe-west1-aiplatform.googleapis.com")
    assert math.isclose(attrs["otel_tokens.cost.usd"], price_at("google", model), rel_tol=1e-9)


def test_async_client_at_a_compatible_endpoint(telemetry):
    import asyncio

    host = Host("anthropic", message("glm-4.6"))
    client = anthropic.AsyncAnthropic(api_key="t", base_url="https://api.z.ai/api/anthropic",
                                      http_client=host.client(is_async=True), max_retries=0)  # fmt: skip

    async def run():
        reply = await client.messages.create(model="glm-4.6", max_tokens=64,
                                             messages=[{"role": "user", "content": "hi"}])  # fmt: skip
        return reply.content[0].text

    assert asyncio.run(run()) == "Hello there"
    (span,) = telemetry.finished()
    assert span.attributes["gen_ai.provider.name"] == "zai"
    assert math.isclose(span.attributes["otel_tokens.cost.usd"], price_at("zai", "glm-4.6"), rel_tol=1e-9)
