"""The HTTP layer on ``aiohttp``: a hand-written ``session.post`` nobody named, plain and
streamed, and azure-ai-inference's async client (aiohttp under azure-core)."""

from __future__ import annotations

import asyncio

import pytest

from .conftest import attributes, tokens

aiohttp = pytest.importorskip("aiohttp")

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Say hello"}]}


def test_a_hand_written_aiohttp_post_is_recorded_plain_and_streamed(telemetry, server):
    url = f"{server.url}/v1/chat/completions"

    async def run() -> tuple:
        async with aiohttp.ClientSession() as session:
            async with session.post(url, json=CHAT) as response:
                whole = await response.json()
            async with session.post(url, json={**CHAT, "stream": True}) as response:
                lines = [line async for line in response.content if line.strip()]
            async with session.post(url, json={**CHAT, "stream": True}) as response:
                chunks = [chunk async for chunk in response.content.iter_chunked(7)]
        return whole, lines, chunks

    whole, lines, chunks = asyncio.run(run())
    assert whole["choices"][0]["message"]["content"] == "Hello there"
    assert lines[-1] == b"data: [DONE]\n" and b"".join(chunks).endswith(b"data: [DONE]\n\n")
    found = attributes(telemetry)
    assert [tokens(a) for a in found] == [(120, 30)] * 3
    assert [a.get("otel_tokens.stream.end") for a in found] == [None, "exhausted", "exhausted"]
    assert found[0]["gen_ai.provider.name"] == "127.0.0.1"


def test_requests_that_are_not_a_model_call_pass_untouched(telemetry, server):
    async def run() -> None:
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{server.url}/v1/files", json={"purpose": "batch"}) as response,
        ):
            await response.read()

    asyncio.run(run())
    assert telemetry.finished() == []


def test_azure_ai_inference_async_complete(telemetry, named):
    pytest.importorskip("azure.ai.inference")
    from azure.ai.inference.aio import ChatCompletionsClient
    from azure.core.credentials import AzureKeyCredential

    url = named("azure.ai.inference")

    async def run() -> tuple:
        async with ChatCompletionsClient(
            endpoint=url, credential=AzureKeyCredential("test")
        ) as chat:
            answer = await chat.complete(
                messages=[{"role": "user", "content": "Say hello"}], model="Phi-4"
            )
            stream = await chat.complete(
                messages=[{"role": "user", "content": "Say hello"}], model="Phi-4", stream=True
            )
            text = "".join([u.choices[0].delta.content or "" async for u in stream if u.choices])
        return answer.choices[0].message.content, text

    assert asyncio.run(run()) == ("Hello there", "Hello there")
    whole, stream = attributes(telemetry)
    assert tokens(whole) == tokens(stream) == (120, 30)
    assert (
        whole["gen_ai.provider.name"] == "azure.ai.inference"
        and whole["gen_ai.request.model"] == "Phi-4"
    )
