"""Provider SDKs that no SDK capture patches, recorded at the HTTP layer through their real
client libraries against a real local server answering in the provider's own shape: exact
tokens, the provider's name (as the user names the server's URL, ``OTEL_TOKENS_PROVIDER_URLS``)
and price, and what the program gets unchanged."""

from __future__ import annotations

import asyncio
import math

import pytest

from ..providers.test_openai_compatible import price_at
from .conftest import attributes, only, tokens

HELLO = [{"role": "user", "content": "Say hello"}]


# -- groq ------------------------------------------------------------------------------------------
def test_groq_plain_stream_and_async(telemetry, named):
    groq = pytest.importorskip("groq")
    client = groq.Groq(api_key="test", base_url=named("groq"), max_retries=0)
    model = "llama-3.3-70b-versatile"
    answer = client.chat.completions.create(model=model, messages=HELLO)
    streamed = "".join(
        c.choices[0].delta.content or ""
        for c in client.chat.completions.create(model=model, messages=HELLO, stream=True)
    )

    async def run_async() -> str:
        aclient = groq.AsyncGroq(api_key="test", base_url=named("groq"), max_retries=0)
        got = await aclient.chat.completions.create(model=model, messages=HELLO)
        return got.choices[0].message.content

    assert (answer.choices[0].message.content, streamed) == ("Hello there", "Hello there")
    assert asyncio.run(run_async()) == "Hello there"
    price = price_at("groq", model, input_tokens=120, output_tokens=30)
    for attrs in attributes(telemetry):  # the stream's usage came in Groq's x_groq.usage
        assert tokens(attrs) == (120, 30)
        assert attrs["gen_ai.provider.name"] == "groq" and attrs["gen_ai.request.model"] == model
        assert math.isclose(attrs["otel_tokens.cost.usd"], price)
    assert len(telemetry.finished()) == 3 and telemetry.errors() == {}


# -- mistralai -------------------------------------------------------------------------------------
def _mistral(url: str):
    mistralai = pytest.importorskip("mistralai")
    cls = getattr(mistralai, "Mistral", None)
    if cls is None:
        from mistralai.client import Mistral as cls
    return cls(api_key="test", server_url=url)


def test_mistral_complete_stream_embeddings_and_async(telemetry, named):
    client = _mistral(named("mistral_ai"))
    model = "mistral-small-latest"
    answer = client.chat.complete(model=model, messages=HELLO)
    streamed = "".join(
        e.data.choices[0].delta.content or ""
        for e in client.chat.stream(model=model, messages=HELLO)
        if e.data.choices
    )
    embedded = client.embeddings.create(model="mistral-embed", inputs=["hello"])

    async def run_async() -> str:
        got = await client.chat.complete_async(model=model, messages=HELLO)
        return got.choices[0].message.content

    assert (
        answer.choices[0].message.content == streamed == asyncio.run(run_async()) == "Hello there"
    )
    assert embedded.usage.prompt_tokens == 9
    chat, stream, embed, chat_async = attributes(telemetry)
    for attrs in (chat, stream, chat_async):
        assert tokens(attrs) == (120, 30) and attrs["gen_ai.provider.name"] == "mistral_ai"
        assert math.isclose(
            attrs["otel_tokens.cost.usd"],
            price_at("mistral", model, input_tokens=120, output_tokens=30),
        )
    # mistralai stops reading at ``[DONE]`` and closes the response: its usage had arrived
    assert stream["otel_tokens.stream.end"] == "closed"
    assert embed["gen_ai.operation.name"] == "embeddings"
    assert (
        embed["gen_ai.usage.input_tokens"] == 9 and embed["gen_ai.request.model"] == "mistral-embed"
    )


# -- together -------------------------------------------------------------------------------------
def test_together_plain_and_stream(telemetry, named):
    together = pytest.importorskip("together")
    client = together.Together(api_key="test", base_url=named("together") + "/v1", max_retries=0)
    model = "meta-llama/Llama-3.3-70B-Instruct-Turbo"
    answer = client.chat.completions.create(model=model, messages=HELLO)
    streamed = "".join(
        c.choices[0].delta.content or ""
        for c in client.chat.completions.create(model=model, messages=HELLO, stream=True)
        if c.choices
    )
    assert answer.choices[0].message.content == streamed == "Hello there"
    for attrs in attributes(telemetry):
        assert tokens(attrs) == (120, 30) and attrs["gen_ai.provider.name"] == "together"
        assert math.isclose(
            attrs["otel_tokens.cost.usd"],
            price_at("together", model, input_tokens=120, output_tokens=30),
        )
    assert len(telemetry.finished()) == 2


# -- cohere v2 -------------------------------------------------------------------------------------
def test_cohere_chat_chat_stream_and_embed(telemetry, named):
    cohere = pytest.importorskip("cohere")
    client = cohere.ClientV2(api_key="test", base_url=named("cohere"))
    answer = client.chat(model="command-r-plus", messages=HELLO)
    streamed = "".join(
        e.delta.message.content.text
        for e in client.chat_stream(model="command-r-plus", messages=HELLO)
        if e.type == "content-delta"
    )
    embedded = client.embed(
        model="embed-english-v3.0",
        texts=["hello"],
        input_type="search_query",
        embedding_types=["float"],
    )
    assert answer.message.content[0].text == streamed == "Hello there"
    assert embedded.embeddings.float_ == [[0.1, 0.2]]
    chat, stream, embed = attributes(telemetry)
    for attrs in (chat, stream):  # the billed units: what the price applies to
        assert tokens(attrs) == (11, 5) and attrs["gen_ai.provider.name"] == "cohere"
        assert attrs["gen_ai.request.model"] == "command-r-plus"
        assert attrs["gen_ai.response.finish_reasons"] == ("complete",)
    assert (
        stream["otel_tokens.stream.end"] == "exhausted" and stream["gen_ai.request.stream"] is True
    )
    assert (
        embed["gen_ai.operation.name"] == "embeddings" and embed["gen_ai.usage.input_tokens"] == 4
    )


def test_cohere_async(telemetry, named):
    cohere = pytest.importorskip("cohere")

    async def run() -> str:
        client = cohere.AsyncClientV2(api_key="test", base_url=named("cohere"))
        texts = [
            e.delta.message.content.text
            async for e in client.chat_stream(model="command-r-plus", messages=HELLO)
            if e.type == "content-delta"
        ]
        return "".join(texts)

    assert asyncio.run(run()) == "Hello there"
    assert tokens(only(telemetry)) == (11, 5)


# -- ollama (self-hosted) --------------------------------------------------------------------------
def test_ollama_chat_generate_embed_streamed_and_not(telemetry, server):
    ollama = pytest.importorskip("ollama")
    client = ollama.Client(host=server.url)
    chat = client.chat(model="llama3.2", messages=HELLO)
    streamed = "".join(
        part.message.content for part in client.chat(model="llama3.2", messages=HELLO, stream=True)
    )
    generated = "".join(
        part.response for part in client.generate(model="llama3.2", prompt="hi", stream=True)
    )
    embedded = client.embed(model="all-minilm", input="hello")
    assert chat.message.content == streamed == generated == "Hello there"
    assert embedded.embeddings == [[0.1, 0.2]]
    plain, stream, generate, embed = attributes(telemetry)
    for attrs in (plain, stream, generate):  # prompt_eval_count, eval_count
        assert tokens(attrs) == (26, 12) and attrs["gen_ai.request.model"] == "llama3.2"
        # on this machine: self-hosted, named by its host, no cost
        assert attrs["gen_ai.provider.name"] == "127.0.0.1" and "otel_tokens.cost.usd" not in attrs
    assert plain["gen_ai.request.stream"] is False and stream["gen_ai.request.stream"] is True
    assert generate["gen_ai.operation.name"] == "text_completion"
    assert (
        embed["gen_ai.operation.name"] == "embeddings" and embed["gen_ai.usage.input_tokens"] == 8
    )


def test_ollama_async_stream(telemetry, server):
    ollama = pytest.importorskip("ollama")

    async def run() -> str:
        client = ollama.AsyncClient(host=server.url)
        return "".join(
            [
                p.message.content
                async for p in await client.chat(model="llama3.2", messages=HELLO, stream=True)
            ]
        )

    assert asyncio.run(run()) == "Hello there"
    assert tokens(only(telemetry)) == (26, 12)


# -- huggingface_hub InferenceClient (on httpx2) ---------------------------------------------------
def test_huggingface_inference_client_chat_completion(telemetry, server):
    hub = pytest.importorskip("huggingface_hub")
    client = hub.InferenceClient(base_url=server.url, api_key="test")
    answer = client.chat_completion(messages=HELLO, model="tgi")
    streamed = "".join(
        c.choices[0].delta.content or ""
        for c in client.chat_completion(messages=HELLO, model="tgi", stream=True)
        if c.choices
    )
    assert answer.choices[0].message.content == streamed == "Hello there"
    plain, stream = attributes(telemetry)
    assert tokens(plain) == tokens(stream) == (120, 30)
    assert plain["gen_ai.provider.name"] == "127.0.0.1"  # a TGI server on this machine
