"""fireworks-ai's real client (on httpx) against a real local server answering in its
OpenAI-compatible shape: recorded by the HTTP layer with no code of its own, under
genai-prices' ``fireworks`` and its price (the provider the URL names: api.fireworks.ai's
pattern, here the server's URL named so); chat plain, streamed and async; answers unchanged."""

from __future__ import annotations

import asyncio
import math

import pytest

from ..http_layer.wire_server import WireServer
from ..providers.test_openai_compatible import price_at
from .conftest import attributes, tokens

fireworks = pytest.importorskip("fireworks")

MODEL = "accounts/fireworks/models/llama-v3p1-8b-instruct"
HELLO = [{"role": "user", "content": "Say hello"}]


@pytest.fixture(scope="module")
def server():
    running = WireServer()
    yield running
    running.close()


def test_chat_plain_streamed_and_async(http_telemetry, server, provider_urls):
    url = provider_urls(server.url, "fireworks")
    client = fireworks.Fireworks(api_key="test", base_url=url, max_retries=0)
    answer = client.chat.completions.create(model=MODEL, messages=HELLO)
    stream = client.chat.completions.create(model=MODEL, messages=HELLO, stream=True)
    streamed = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

    async def run() -> str:
        aclient = fireworks.AsyncFireworks(api_key="test", base_url=url, max_retries=0)
        got = await aclient.chat.completions.create(model=MODEL, messages=HELLO)
        return got.choices[0].message.content

    assert (answer.choices[0].message.content, streamed) == ("Hello there", "Hello there")
    assert asyncio.run(run()) == "Hello there"
    assert [path for path, _ in server.requests[-3:]] == ["/v1/chat/completions"] * 3
    price = price_at("fireworks", MODEL, input_tokens=120, output_tokens=30)
    spans = attributes(http_telemetry)
    assert len(spans) == 3 and http_telemetry.errors() == {}
    for attrs in spans:
        assert tokens(attrs) == (120, 30) and attrs["gen_ai.provider.name"] == "fireworks"
        assert math.isclose(attrs["otel_tokens.cost.usd"], price)


def test_the_fireworks_host_is_named_and_priced_as_fireworks():
    from otel_tokens.endpoints import endpoint

    found = endpoint(
        "https://api.fireworks.ai/inference/v1/chat/completions", "api.fireworks.ai", "http"
    )
    assert (found.provider, found.price_id) == ("fireworks", "fireworks")
