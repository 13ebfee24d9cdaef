"""openai ``images.generate``/``images.edit`` (plain and streamed partial images) and
``audio.speech.create`` (audio, and ``stream_format="sse"``), sync and async, through the
real SDK against a server answering in OpenAI's documented shapes (the SDK's own types:
``ImagesResponse``, ``ImageGenCompletedEvent``, ``ImageEditCompletedEvent``, the speech
``speech.audio.done`` event). Token usage exact and priced by genai-prices; a call whose
model reports no usage (DALL-E, plain speech audio) recorded with its usage unknown and
marked missing, never 0; the HTTP layer beneath records nothing more."""

from __future__ import annotations

import asyncio
import json

import pytest

from otel_tokens.capture.http import http_patches
from otel_tokens.capture.sdk import openai as openai_sdk

from ..local_server import LocalServer
from ..telemetry.conftest import handling
from .conftest import price, spans, tokens

openai = pytest.importorskip("openai")

GENERATED = {"total_tokens": 4210, "input_tokens": 50, "output_tokens": 4160,
             "input_tokens_details": {"text_tokens": 50, "image_tokens": 0}}  # fmt: skip
EDITED = {"total_tokens": 1660, "input_tokens": 380, "output_tokens": 1280,
          "input_tokens_details": {"text_tokens": 12, "image_tokens": 368}}  # fmt: skip
SPOKEN = {"input_tokens": 14, "output_tokens": 101, "total_tokens": 115}
DONE = {"b64_json": "ZnVsbA==", "created_at": 2, "size": "1024x1024", "quality": "high",
        "background": "opaque", "output_format": "png"}  # fmt: skip
AUDIO = b"ID3\x04\x00fake-mp3-frames"


def _sse(*events: dict) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def _image_events(kind: str, usage: dict) -> bytes:
    partial = {**DONE, "b64_json": "cGFydA==", "partial_image_index": 0}
    return _sse({**partial, "type": f"{kind}.partial_image"},
                {**partial, "partial_image_index": 1, "type": f"{kind}.partial_image"},
                {**DONE, "type": f"{kind}.completed", "usage": usage})  # fmt: skip


def _answer(path: str, body) -> tuple:
    """OpenAI's answers; a path under ``/stream/`` streams (an edit's form says nothing)."""
    streamed = path.startswith("/stream/") or (isinstance(body, dict) and body.get("stream"))
    if path.endswith("/images/variations"):  # DALL-E 2 only: no usage
        answer = {"created": 1, "data": [{"url": "https://img.test/2.png"}]}
        return 200, "application/json", json.dumps(answer).encode(), {}
    if path.endswith(("/images/generations", "/images/edits")):
        kind = "image_generation" if path.endswith("generations") else "image_edit"
        usage = GENERATED if kind == "image_generation" else EDITED
        if streamed:
            return 200, "text/event-stream", _image_events(kind, usage), {}
        dalle = isinstance(body, dict) and str(body.get("model", "")).startswith("dall-e")
        if isinstance(body, dict) and body.get("prompt") == "untrusted":
            usage = {**usage, "output_tokens": "4160", "input_tokens": True}
        answer = {"created": 1, "data": [{"b64_json": "ZnVsbA=="}], "size": "1024x1024"}
        if dalle:
            answer = {"created": 1, "data": [{"url": "https://img.test/1.png",
                                              "revised_prompt": "a red fox"}]}  # fmt: skip
        else:
            answer.update(usage=usage, quality="high", output_format="png", background="opaque")
        return 200, "application/json", json.dumps(answer).encode(), {}
    if path.endswith("/audio/speech"):
        if body.get("stream_format") == "sse":
            events = [{"type": "speech.audio.delta", "audio": "AAAA"},
                      {"type": "speech.audio.delta", "audio": "BBBB"},
                      {"type": "speech.audio.done", "usage": SPOKEN}]  # fmt: skip
            return (
                200,
                "text/event-stream",
                b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events),
                {},
            )
        return 200, "audio/mpeg", AUDIO, {}
    return 404, "application/json", b'{"error": {"message": "no such path"}}', {}


@pytest.fixture(scope="module")
def server():
    running = LocalServer(_answer)
    yield running
    running.close()


@pytest.fixture
def url(server, provider_urls):
    return provider_urls(server.url, "openai")


PNG = ("in.png", b"\x89PNG\r\n\x1a\nfake", "image/png")


def test_image_generation_and_edit_are_recorded_exactly_and_priced(url):
    with handling(openai_sdk) as t:
        client = openai.OpenAI(api_key="test", base_url=url + "/v1", max_retries=0)
        made = client.images.generate(model="gpt-image-1", prompt="a red fox")
        edited = client.images.edit(model="gpt-image-1", image=PNG, prompt="make it blue")
    assert made.data[0].b64_json == edited.data[0].b64_json == "ZnVsbA=="  # passed through
    generate, edit = spans(t)
    assert tokens(generate) == (50, 4160) and tokens(edit) == (380, 1280)
    assert generate["gen_ai.request.model"] == "gpt-image-1"
    assert generate["otel_tokens.cost.usd"] == pytest.approx(
        price("gpt-image-1", input_tokens=50, output_tokens=4160)
    )
    # image input tokens at the model's image rate (twice its text rate)
    assert edit["otel_tokens.cost.usd"] == pytest.approx(
        price("gpt-image-1", input_tokens=380, input_image_tokens=368, output_tokens=1280)
    )
    assert edit["otel_tokens.cost.usd"] > price("gpt-image-1", input_tokens=380, output_tokens=1280)
    assert t.errors() == {} and t.points("otel_tokens.usage.missing") == []


def test_streamed_partial_images_are_recorded_once_and_pass_unchanged(url):
    async def run_async() -> list[str]:
        aclient = openai.AsyncOpenAI(api_key="test", base_url=url + "/stream/v1", max_retries=0)
        stream = await aclient.images.edit(model="gpt-image-1", image=PNG, prompt="blue",
                                           stream=True, partial_images=2)  # fmt: skip
        return [event.type async for event in stream]

    with handling(openai_sdk) as t:
        client = openai.OpenAI(api_key="test", base_url=url + "/v1", max_retries=0)
        stream = client.images.generate(model="gpt-image-1-mini", prompt="a fox", stream=True,
                                        partial_images=2)  # fmt: skip
        events = [(e.type, e.b64_json) for e in stream]
        async_types = asyncio.run(run_async())
    assert events == [("image_generation.partial_image", "cGFydA==")] * 2 + [
        ("image_generation.completed", "ZnVsbA==")
    ]
    assert async_types == ["image_edit.partial_image"] * 2 + ["image_edit.completed"]
    generate, edit = spans(t)
    assert tokens(generate) == (50, 4160) and tokens(edit) == (380, 1280)
    assert generate["otel_tokens.cost.usd"] == pytest.approx(
        price("gpt-image-1-mini", input_tokens=50, output_tokens=4160)
    )
    assert edit["otel_tokens.cost.usd"] == pytest.approx(
        price("gpt-image-1", input_tokens=380, input_image_tokens=368, output_tokens=1280)
    )
    assert t.point("otel_tokens.tokens", gen_ai__token__type="output",
                   gen_ai__request__model="gpt-image-1-mini").value == 4160  # fmt: skip


def test_dall_e_is_recorded_with_its_usage_unknown_never_zero(url):
    async def run_async() -> None:
        aclient = openai.AsyncOpenAI(api_key="test", base_url=url + "/v1", max_retries=0)
        await aclient.images.generate(model="dall-e-2", prompt="a fox")
        await aclient.images.create_variation(model="dall-e-2", image=PNG)

    with handling(openai_sdk) as t:
        client = openai.OpenAI(api_key="test", base_url=url + "/v1", max_retries=0)
        made = client.images.generate(model="dall-e-3", prompt="a fox")
        asyncio.run(run_async())
    assert made.data[0].url == "https://img.test/1.png"
    found = spans(t)
    assert [a["gen_ai.request.model"] for a in found] == ["dall-e-3", "dall-e-2", "dall-e-2"]
    assert all("gen_ai.usage.input_tokens" not in a and "otel_tokens.cost.usd" not in a
               for a in found)  # fmt: skip
    assert t.point("otel_tokens.usage.missing", gen_ai__request__model="dall-e-3").value == 1
    assert t.errors() == {"usage_missing": 3}


def test_usage_that_is_not_token_counts_is_unusable_and_the_answer_passes(url):
    with handling(openai_sdk) as t:
        client = openai.OpenAI(api_key="test", base_url=url + "/v1", max_retries=0)
        made = client.images.generate(model="gpt-image-1", prompt="untrusted")
    assert (made.usage.input_tokens, made.usage.output_tokens) == (1, 4160)  # the SDK coerced them
    (attrs,) = spans(t)
    assert tokens(attrs) == (None, None) and "otel_tokens.cost.usd" not in attrs
    assert t.errors() == {"usage_invalid": 1}


def test_speech_tokens_from_its_events_and_unknown_for_plain_audio(url):
    async def run_async() -> bytes:
        aclient = openai.AsyncOpenAI(api_key="test", base_url=url + "/v1", max_retries=0)
        got = await aclient.audio.speech.create(model="gpt-4o-mini-tts", voice="coral",
                                                input="Hello there", stream_format="sse")  # fmt: skip
        return got.content

    with handling(openai_sdk) as t:
        client = openai.OpenAI(api_key="test", base_url=url + "/v1", max_retries=0)
        audio = client.audio.speech.create(model="gpt-4o-mini-tts", voice="coral", input="Hi")
        events = client.audio.speech.create(model="gpt-4o-mini-tts", voice="coral",
                                            input="Hello there", stream_format="sse")  # fmt: skip
        async_body = asyncio.run(run_async())
    assert audio.content == AUDIO  # passed through unchanged
    assert events.content == async_body and b"speech.audio.done" in async_body
    plain, sync_sse, async_sse = spans(t)
    assert tokens(plain) == (None, None) and "otel_tokens.cost.usd" not in plain
    assert t.errors() == {"usage_missing": 1}
    for attrs in (sync_sse, async_sse):
        assert tokens(attrs) == (14, 101)
        assert attrs["otel_tokens.cost.usd"] == pytest.approx(
            price("gpt-4o-mini-tts", input_tokens=14, output_tokens=101)
        )


def test_speech_through_raw_and_streaming_responses(url):
    """The events read as the program reads them; audio passed through unread."""
    speech = {"model": "gpt-4o-mini-tts", "voice": "coral", "input": "Hello there"}

    async def run_async() -> bytes:
        aclient = openai.AsyncOpenAI(api_key="test", base_url=url + "/v1", max_retries=0)
        async with aclient.audio.speech.with_streaming_response.create(
            **speech, stream_format="sse"
        ) as response:
            return b"".join([chunk async for chunk in response.iter_bytes()])

    with handling(openai_sdk) as t:
        client = openai.OpenAI(api_key="test", base_url=url + "/v1", max_retries=0)
        raw = client.audio.speech.with_raw_response.create(**speech, stream_format="sse")
        parsed = raw.parse().content
        read = client.audio.speech.with_raw_response.create(**speech, stream_format="sse").content
        with client.audio.speech.with_streaming_response.create(
            **speech, stream_format="sse"
        ) as response:
            lines = list(response.iter_lines())
        async_body = asyncio.run(run_async())
        with client.audio.speech.with_streaming_response.create(**speech) as response:
            audio = response.read()
    assert parsed == read == async_body and b"speech.audio.done" in parsed
    assert any("speech.audio.done" in line for line in lines)
    assert audio == AUDIO  # passed through unchanged
    *events, plain = spans(t)
    assert [tokens(a) for a in events] == [(14, 101)] * 4
    assert tokens(plain) == (None, None)
    assert t.errors() == {"usage_missing": 1}  # the audio's; nothing else went wrong


#: characters beyond ASCII: billed per character (12), not per UTF-8 byte (21)
SAID = "Grüße, 世界 👋!"


def _billed_per_character(attrs: dict, model: str) -> None:
    """The call of ``model`` billed by the characters of :data:`SAID` at genai-prices' rate;
    its tokens unknown, never 0."""
    assert tokens(attrs) == (None, None)
    assert attrs["otel_tokens.cost.usd"] == pytest.approx(price(model, input_characters=len(SAID)))
    assert attrs["otel_tokens.cost.components"] == ("input_characters",)


def test_tts_1_audio_is_billed_per_input_character(url):
    """tts-1 and tts-1-hd are priced per input character: their audio, plain, raw or streamed,
    sync or async, is billed by the length of ``input``; gpt-4o-mini-tts (priced per token)
    stays unknown, never priced from characters; the text is recorded nowhere."""
    speech = {"voice": "coral", "input": SAID}

    async def run_async() -> list[bytes]:
        aclient = openai.AsyncOpenAI(api_key="test", base_url=url + "/v1", max_retries=0)
        plain = await aclient.audio.speech.create(model="tts-1", **speech)
        async with aclient.audio.speech.with_streaming_response.create(
            model="tts-1", **speech
        ) as response:
            return [plain.content, await response.read()]

    with handling(openai_sdk) as t:
        client = openai.OpenAI(api_key="test", base_url=url + "/v1", max_retries=0)
        bodies = [client.audio.speech.create(model=m, **speech).content
                  for m in ("tts-1", "tts-1-hd")]  # fmt: skip
        bodies.append(client.audio.speech.with_raw_response.create(model="tts-1", **speech).content)
        with client.audio.speech.with_streaming_response.create(model="tts-1", **speech) as got:
            bodies.append(got.read())
        bodies += asyncio.run(run_async())
        client.audio.speech.create(model="gpt-4o-mini-tts", **speech)
    assert bodies == [AUDIO] * 6  # passed through unchanged
    *billed, token_priced = spans(t)
    models = ["tts-1", "tts-1-hd", "tts-1", "tts-1", "tts-1", "tts-1"]
    for attrs, model in zip(billed, models, strict=True):
        assert attrs["gen_ai.request.model"] == model
        _billed_per_character(attrs, model)
    assert billed[1]["otel_tokens.cost.usd"] > billed[0]["otel_tokens.cost.usd"] > 0  # hd: its own
    assert tokens(token_priced) == (None, None) and "otel_tokens.cost.usd" not in token_priced
    assert t.errors() == {"usage_missing": 1}  # gpt-4o-mini-tts's alone
    assert not any(SAID in str(value) for attrs in spans(t) for value in attrs.values())


def test_speech_input_that_is_not_a_string_is_unknown(url):
    """An ``input`` the program got wrong (not a string): no characters counted, no crash;
    the call recorded with its usage unknown, as any plain audio."""
    with handling(openai_sdk) as t:
        client = openai.OpenAI(api_key="test", base_url=url + "/v1", max_retries=0)
        audio = client.audio.speech.create(model="tts-1", voice="coral", input=["not", "text"])
    assert audio.content == AUDIO
    (attrs,) = spans(t)
    assert tokens(attrs) == (None, None) and "otel_tokens.cost.usd" not in attrs
    assert t.errors() == {"usage_missing": 1}


@pytest.mark.parametrize("order", ["http-first", "sdk-first"])
def test_no_double_count_with_the_http_layer(url, order):
    patches = (http_patches, openai_sdk) if order == "http-first" else (openai_sdk, http_patches)
    with handling(*patches) as t:
        client = openai.OpenAI(api_key="test", base_url=url + "/v1", max_retries=0)
        client.images.generate(model="gpt-image-1", prompt="a fox")
        list(client.images.generate(model="gpt-image-1", prompt="a fox", stream=True))
        client.audio.speech.create(model="gpt-4o-mini-tts", voice="coral", input="Hi",
                                   stream_format="sse")  # fmt: skip
    assert [tokens(a) for a in spans(t)] == [(50, 4160), (50, 4160), (14, 101)]
