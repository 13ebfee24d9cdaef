"""Never counted twice: a call an SDK capture records (openai, anthropic, google-genai,
litellm) is not recorded again by the HTTP layer beneath it, whichever was patched first;
a stream that sends its request at its first read (google-genai's) included."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from otel_tokens.capture.sdk import anthropic as anthropic_sdk
from otel_tokens.capture.sdk import google_genai_patches
from otel_tokens.capture.http import http_patches
from otel_tokens.capture.sdk import openai as openai_sdk

from ..local_server import LocalServer
from ..telemetry.conftest import handling
from .conftest import attributes, tokens

HELLO = [{"role": "user", "content": "Say hello"}]
ORDERS = {"http-first": (http_patches, openai_sdk), "sdk-first": (openai_sdk, http_patches)}


def _openai_calls(base_url: str) -> list[str]:
    """A plain and a streamed chat completion, sync and async; the texts the program got."""
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(api_key="test", base_url=base_url, max_retries=0)
    texts = [
        client.chat.completions.create(model="gpt-4o-mini", messages=HELLO)
        .choices[0]
        .message.content
    ]
    stream = client.chat.completions.create(model="gpt-4o-mini", messages=HELLO, stream=True)
    texts.append("".join(c.choices[0].delta.content or "" for c in stream if c.choices))

    async def run_async() -> list[str]:
        aclient = openai.AsyncOpenAI(api_key="test", base_url=base_url, max_retries=0)
        got = await aclient.chat.completions.create(model="gpt-4o-mini", messages=HELLO)
        astream = await aclient.chat.completions.create(
            model="gpt-4o-mini", messages=HELLO, stream=True
        )
        return [
            got.choices[0].message.content,
            "".join([c.choices[0].delta.content or "" async for c in astream if c.choices]),
        ]

    return texts + asyncio.run(run_async())


@pytest.mark.parametrize("order", sorted(ORDERS))
def test_openai_sdk_calls_are_recorded_once(server, order):
    with handling(*ORDERS[order]) as t:
        texts = _openai_calls(server.url + "/v1")
    assert texts == ["Hello there"] * 4
    found = attributes(t)
    assert len(found) == 4  # plain, stream, async plain, async stream: one span each
    assert [tokens(a) for a in found] == [(120, 30)] * 4


def test_the_http_layer_alone_records_the_openai_sdk(server):
    """Without the openai capture (not installed, or turned off), the same calls are still
    recorded, once, by their wire format."""
    with handling(http_patches) as t:
        _openai_calls(server.url + "/v1")
    assert [tokens(a) for a in attributes(t)] == [(120, 30)] * 4


MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-3-5-haiku-20241022",
    "content": [{"type": "text", "text": "hey"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 20, "output_tokens": 4},
}


@pytest.mark.parametrize("first", ["http", "sdk"])
def test_anthropic_sdk_calls_are_recorded_once(first):
    anthropic = pytest.importorskip("anthropic")
    local = LocalServer(
        lambda path, body: (200, "application/json", json.dumps(MESSAGE).encode(), {})
    )
    order = (http_patches, anthropic_sdk) if first == "http" else (anthropic_sdk, http_patches)
    try:
        with handling(*order) as t:
            client = anthropic.Anthropic(api_key="test", base_url=local.url, max_retries=0)
            client.messages.create(model="claude-3-5-haiku-20241022", max_tokens=10, messages=HELLO)
    finally:
        local.close()
    assert [tokens(a) for a in attributes(t)] == [(20, 4)]


@pytest.fixture
def gemini():
    pytest.importorskip("google.genai")
    from ..sdk.gemini_server import GeminiServer, answer

    server = GeminiServer()
    yield server, answer
    server.close()


@pytest.mark.parametrize("first", ["http", "sdk"])
def test_a_google_genai_stream_sent_at_its_first_read_is_recorded_once(gemini, first):
    server, answer = gemini
    usage = {"promptTokenCount": 8, "candidatesTokenCount": 4, "totalTokenCount": 12}
    server.queue.append([answer("Hel", None, reason=None), answer("lo", usage)])
    server.queue.append(answer("Hello", usage))
    order = (
        (http_patches, google_genai_patches)
        if first == "http"
        else (google_genai_patches, http_patches)
    )
    with handling(*order) as t:
        client = server.client()
        stream = client.models.generate_content_stream(model="gemini-2.5-flash", contents="hi")
        text = "".join(chunk.text for chunk in stream)  # the request goes out at the first read
        whole = client.models.generate_content(model="gemini-2.5-flash", contents="hi").text
    assert (text, whole) == ("Hello", "Hello")
    assert [tokens(a) for a in attributes(t)] == [(8, 4), (8, 4)]
    assert [a["gen_ai.provider.name"] for a in attributes(t)] == ["gcp.gemini"] * 2


def test_google_genai_async_calls_and_streams_are_recorded_once(gemini):
    """``client.aio`` sends with aiohttp where it is installed (else httpx): one span each."""
    server, answer = gemini
    usage = {"promptTokenCount": 8, "candidatesTokenCount": 4, "totalTokenCount": 12}
    server.queue.append(answer("Hello", usage))
    server.queue.append([answer("Hel", None, reason=None), answer("lo", usage)])

    async def run(client) -> tuple:
        whole = await client.aio.models.generate_content(model="gemini-2.5-flash", contents="hi")
        stream = await client.aio.models.generate_content_stream(
            model="gemini-2.5-flash", contents="hi"
        )
        return whole.text, "".join([chunk.text async for chunk in stream])

    with handling(http_patches, google_genai_patches) as t:
        client = server.client()
        assert asyncio.run(run(client)) == ("Hello", "Hello")
    assert [tokens(a) for a in attributes(t)] == [(8, 4), (8, 4)]


def test_the_http_layer_alone_records_google_genai_by_its_wire_format(gemini):
    server, answer = gemini
    usage = {"promptTokenCount": 8, "candidatesTokenCount": 4, "totalTokenCount": 12}
    server.queue.append([answer("Hel", None, reason=None), answer("lo", usage)])
    with handling(http_patches) as t:
        client = server.client()  # kept: a client collected closes its connections
        stream = client.models.generate_content_stream(model="gemini-2.5-flash", contents="hi")
        assert "".join(chunk.text for chunk in stream) == "Hello"
    (attrs,) = attributes(t)
    assert tokens(attrs) == (8, 4) and attrs["gen_ai.request.model"] == "gemini-2.5-flash"
    assert attrs["gen_ai.response.finish_reasons"] == ("stop",)


@pytest.fixture
def litellm():
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network at import
    return pytest.importorskip("litellm")


def test_litellm_calls_are_recorded_once(litellm, server):
    """Through the openai SDK (an OpenAI model) and over litellm's own httpx client (Ollama's
    and Anthropic's wire formats): one span each, litellm's."""
    from otel_tokens.capture.sdk import litellm_patches

    anthropic = LocalServer(
        lambda path, body: (200, "application/json", json.dumps(MESSAGE).encode(), {})
    )
    try:
        with handling(http_patches, openai_sdk, litellm_patches) as t:
            litellm.completion(
                model="gpt-4o-mini", messages=HELLO, api_base=server.url + "/v1", api_key="k"
            )
            litellm.completion(
                model="anthropic/claude-3-5-haiku-20241022",
                messages=HELLO,
                api_base=anthropic.url,
                api_key="k",
            )
            stream = litellm.completion(
                model="gpt-4o-mini",
                messages=HELLO,
                api_base=server.url + "/v1",
                api_key="k",
                stream=True,
                stream_options={"include_usage": True},
            )
            assert (
                "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
                == "Hello there"
            )
    finally:
        anthropic.close()
    assert [tokens(a) for a in attributes(t)] == [(120, 30), (20, 4), (120, 30)]


@pytest.fixture(scope="module")
def media():
    from .media_server import MediaServer

    running = MediaServer()
    yield running
    running.close()


def _openai_media_calls(base_url: str) -> None:
    """Images (generated, edited, streamed), speech (events and audio) and a transcription
    through the openai SDK, sync and async."""
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(api_key="test", base_url=base_url + "/v1", max_retries=0)
    png, wav = ("in.png", b"\x89PNG fake", "image/png"), ("in.wav", b"RIFF fake", "audio/wav")
    client.images.generate(model="gpt-image-1", prompt="a fox")
    client.images.edit(model="gpt-image-1", image=png, prompt="blue")
    list(client.images.generate(model="gpt-image-1", prompt="a fox", stream=True))
    speech = {"model": "gpt-4o-mini-tts", "voice": "coral", "input": "Hi"}
    client.audio.speech.create(**speech, stream_format="sse")
    client.audio.speech.create(**speech)
    client.audio.transcriptions.create(model="gpt-4o-transcribe", file=wav)

    async def run_async() -> None:
        aclient = openai.AsyncOpenAI(api_key="test", base_url=base_url + "/v1", max_retries=0)
        await aclient.images.edit(model="gpt-image-1", image=png, prompt="blue")
        await aclient.audio.speech.create(**speech, stream_format="sse")

    asyncio.run(run_async())


#: the usage of each call of _openai_media_calls, in order (plain audio: none)
MEDIA_TOKENS = [(50, 4160), (380, 1280), (50, 4160), (14, 101), (None, None), (40, 9),
                (380, 1280), (14, 101)]  # fmt: skip


@pytest.mark.parametrize("order", sorted(ORDERS))
def test_openai_sdk_media_calls_are_recorded_once(media, order):
    with handling(*ORDERS[order]) as t:
        _openai_media_calls(media.url)
    assert [tokens(a) for a in attributes(t)] == MEDIA_TOKENS
    assert t.errors() == {"usage_missing": 1}  # the plain audio's, once


def test_the_http_layer_alone_records_the_openai_sdks_media_calls(media):
    """Without the openai capture, the same calls are recorded once by their wire format,
    the edit's and the transcription's model read from the SDK's multipart form."""
    with handling(http_patches) as t:
        _openai_media_calls(media.url)
    found = attributes(t)
    assert [tokens(a) for a in found] == MEDIA_TOKENS
    assert [a["gen_ai.request.model"] for a in found] == [
        "gpt-image-1", "gpt-image-1", "gpt-image-1", "gpt-4o-mini-tts", "gpt-4o-mini-tts",
        "gpt-4o-transcribe", "gpt-image-1", "gpt-4o-mini-tts",
    ]  # fmt: skip
    assert t.errors() == {"usage_missing": 1}
