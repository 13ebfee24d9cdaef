"""Hand-written posts to OpenAI's billed media endpoints (``/v1/images/generations``,
``/edits``, ``/variations``, ``/v1/audio/speech``, ``/transcriptions``, ``/translations``)
with httpx (sync and async), requests and aiohttp are recorded by the HTTP layer with the
readers the openai SDK capture uses: GPT image tokens with image tokens at image rates,
streamed partial images read once as the program reads them, speech tokens from
``speech.audio.done``; the model from the JSON body or the multipart form; an answer with no
usage (DALL-E, audio bytes, a plain-text translation) recorded as usage unknown, never 0;
what the program reads unchanged."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import httpx
import pytest

from otel_tokens.capture.http import http_patches

from .. import peer
from ..local_server import LocalServer
from ..media.conftest import price
from ..telemetry.conftest import handling
from .conftest import attributes, tokens
from .media_server import AUDIO, GENERATED, MediaServer

requests = pytest.importorskip("requests")
aiohttp = pytest.importorskip("aiohttp")

CLIENTS = ["httpx", "httpx-async", "requests", "aiohttp"]
PNG = ("in.png", b"\x89PNG\r\n\x1a\nfake", "image/png")
WAV = ("in.wav", b"RIFF\x24\x00\x00\x00WAVEfmt fake", "audio/wav")


@pytest.fixture(scope="module")
def server():
    running = MediaServer()
    yield running
    running.close()


@pytest.fixture
def url(server, provider_urls):
    """The server, named as OpenAI's (a user's ``OTEL_TOKENS_PROVIDER_URLS``): priced."""
    return provider_urls(server.url, "openai")


# -- one POST as a program writes it, with each client: every byte it read -------------------
def _httpx(
    url: str, body: dict | None, form: dict | None, file: tuple | None, stream: bool
) -> bytes:
    files = {"file" if file is WAV else "image": file} if file else None
    if not stream:
        return httpx.post(url, json=body, data=form, files=files).content
    with httpx.stream("POST", url, json=body, data=form, files=files) as response:
        return b"".join(response.iter_bytes())


async def _httpx_async(url, body, form, file, stream) -> bytes:
    files = {"file" if file is WAV else "image": file} if file else None
    async with httpx.AsyncClient() as client:
        if not stream:
            return (await client.post(url, json=body, data=form, files=files)).content
        async with client.stream("POST", url, json=body, data=form, files=files) as response:
            return b"".join([chunk async for chunk in response.aiter_bytes()])


def _requests(url, body, form, file, stream) -> bytes:
    files = {"file" if file is WAV else "image": file} if file else None
    response = requests.post(url, json=body, data=form, files=files, stream=stream)
    return b"".join(response.iter_content(64)) if stream else response.content


async def _aiohttp(url, body, form, file, stream) -> bytes:
    data = None
    if form is not None:
        data = aiohttp.FormData(form)
        if file:
            name, content, kind = file
            data.add_field("file" if file is WAV else "image", content, filename=name,
                           content_type=kind)  # fmt: skip
    async with aiohttp.ClientSession() as session:
        async with session.post(url, json=body, data=data) as response:
            if not stream:
                return await response.read()
            return b"".join([chunk async for chunk in response.content.iter_chunked(64)])


def send(client: str, url: str, body: dict | None = None, form: dict | None = None,
         file: tuple | None = None, stream: bool = False) -> bytes:  # fmt: skip
    """A JSON body, or a multipart form (text fields and one file)."""
    if client == "httpx":
        return _httpx(url, body, form, file, stream)
    if client == "requests":
        return _requests(url, body, form, file, stream)
    run = _httpx_async if client == "httpx-async" else _aiohttp
    return asyncio.run(run(url, body, form, file, stream))


# -- images --------------------------------------------------------------------------------
@pytest.mark.parametrize("client", CLIENTS)
def test_images_are_recorded_with_image_tokens_at_image_rates(url, client):
    with handling(http_patches) as t:
        made = send(
            client, url + "/v1/images/generations", {"model": "gpt-image-1", "prompt": "a fox"}
        )
        edited = send(client, url + "/v1/images/edits", form={"model": "gpt-image-1",
                      "prompt": "make it blue"}, file=PNG)  # fmt: skip
    assert b'"b64_json": "ZnVsbA=="' in made and b'"b64_json": "ZnVsbA=="' in edited
    generate, edit = attributes(t)
    assert tokens(generate) == (50, 4160) and tokens(edit) == (380, 1280)
    for attrs in (generate, edit):
        assert attrs["gen_ai.request.model"] == "gpt-image-1"  # the edit's: from its form
        assert attrs["gen_ai.operation.name"] == "generate_content"
        assert attrs["gen_ai.provider.name"] == "openai"
    assert generate["otel_tokens.cost.usd"] == pytest.approx(
        price("gpt-image-1", input_tokens=50, output_tokens=4160)
    )
    # the edit's 368 image input tokens at the model's image rate (above its text rate)
    assert edit["otel_tokens.cost.usd"] == pytest.approx(
        price("gpt-image-1", input_tokens=380, input_image_tokens=368, output_tokens=1280)
    )
    assert edit["otel_tokens.cost.usd"] > price("gpt-image-1", input_tokens=380, output_tokens=1280)
    assert t.errors() == {}


@pytest.mark.parametrize("client", CLIENTS)
def test_dall_e_is_recorded_with_its_usage_unknown_never_zero(url, client):
    with handling(http_patches) as t:
        send(client, url + "/v1/images/generations", {"model": "dall-e-3", "prompt": "a fox"})
        send(client, url + "/v1/images/variations", form={"model": "dall-e-2"}, file=PNG)
    found = attributes(t)
    assert [a["gen_ai.request.model"] for a in found] == ["dall-e-3", "dall-e-2"]
    assert all(tokens(a) == (None, None) and "otel_tokens.cost.usd" not in a for a in found)
    assert t.errors() == {"usage_missing": 2}


def test_usage_that_is_not_token_counts_is_unusable_and_the_answer_passes(url):
    """As sent: a string and a boolean where counts belong (the SDK would coerce them)."""
    with handling(http_patches) as t:
        made = httpx.post(url + "/v1/images/generations", json={"model": "gpt-image-1",
                          "prompt": "untrusted"}).json()  # fmt: skip
    assert made["usage"]["output_tokens"] == "4160"  # passed through as sent
    (attrs,) = attributes(t)
    assert tokens(attrs) == (None, None) and "otel_tokens.cost.usd" not in attrs
    assert t.errors() == {"usage_invalid": 1}


@pytest.mark.parametrize("client", CLIENTS)
def test_streamed_partial_images_are_recorded_once(server, url, client):
    generation = {
        "model": "gpt-image-1-mini",
        "prompt": "a fox",
        "stream": True,
        "partial_images": 2,
    }
    unrecorded = send(client, url + "/v1/images/generations", generation, stream=True)
    with handling(http_patches) as t:
        made = send(client, url + "/v1/images/generations", generation, stream=True)
        edited = send(client, url + "/stream/v1/images/edits", form={"model": "gpt-image-1",
                      "prompt": "blue", "stream": "true"}, file=PNG, stream=True)  # fmt: skip
    assert made == unrecorded  # every byte the program read, as without instrumentation
    assert made.count(b"image_generation.partial_image") == 4  # event: and type, twice
    assert edited.count(b"image_edit.completed") == 2
    generate, edit = attributes(t)
    assert generate["gen_ai.request.model"] == "gpt-image-1-mini"
    assert tokens(generate) == (50, 4160) and tokens(edit) == (380, 1280)
    assert edit["otel_tokens.cost.usd"] == pytest.approx(
        price("gpt-image-1", input_tokens=380, input_image_tokens=368, output_tokens=1280)
    )
    assert t.errors() == {}


def test_a_stream_is_read_as_the_program_reads_it(url):
    """The call ends when the program has read the completed event, not before."""
    generation = {"model": "gpt-image-1", "prompt": "a fox", "stream": True}
    with handling(http_patches) as t:
        with httpx.stream("POST", url + "/v1/images/generations", json=generation) as response:
            lines = response.iter_lines()
            first = [next(lines) for _ in range(3)]  # the first partial image's event
            ended_early = list(t.finished())
            rest = list(lines)
    assert first[0] == "event: image_generation.partial_image" and ended_early == []
    assert any("image_generation.completed" in line for line in rest)
    assert [tokens(a) for a in attributes(t)] == [
        (GENERATED["input_tokens"], GENERATED["output_tokens"])
    ]


# -- audio ---------------------------------------------------------------------------------
@pytest.mark.parametrize("client", CLIENTS)
def test_speech_tokens_from_its_events_and_unknown_for_audio(url, client):
    speech = {"model": "gpt-4o-mini-tts", "voice": "coral", "input": "Hello there"}
    with handling(http_patches) as t:
        audio = send(client, url + "/v1/audio/speech", speech)
        events = send(client, url + "/v1/audio/speech", {**speech, "stream_format": "sse"},
                      stream=True)  # fmt: skip
    assert audio == AUDIO  # passed through unchanged, never read
    assert b"speech.audio.done" in events
    plain, streamed = attributes(t)
    assert tokens(plain) == (None, None) and "otel_tokens.cost.usd" not in plain
    assert tokens(streamed) == (14, 101)
    assert streamed["otel_tokens.cost.usd"] == pytest.approx(
        price("gpt-4o-mini-tts", input_tokens=14, output_tokens=101)
    )
    assert t.errors() == {"usage_missing": 1}  # the audio's: no parse fault


@pytest.mark.parametrize("client", CLIENTS)
def test_tts_1_audio_is_billed_per_input_character(url, client):
    """tts-1 and tts-1-hd are priced per input character: the audio's call is billed by the
    length of ``input`` (12 characters, 21 bytes), read whole or streamed; an ``input`` that
    is not a string counts none (unknown, no crash); the text is recorded nowhere."""
    said = "Grüße, 世界 👋!"
    speech = {"model": "tts-1", "voice": "coral", "input": said}
    with handling(http_patches) as t:
        bodies = [
            send(client, url + "/v1/audio/speech", speech),
            send(client, url + "/v1/audio/speech", {**speech, "model": "tts-1-hd"}, stream=True),
            send(client, url + "/v1/audio/speech", {**speech, "input": {"text": said}}),
        ]
    assert bodies == [AUDIO] * 3  # passed through unchanged, never read
    plain, streamed, wrong = attributes(t)
    for attrs, model in ((plain, "tts-1"), (streamed, "tts-1-hd")):
        assert attrs["gen_ai.request.model"] == model and tokens(attrs) == (None, None)
        assert attrs["otel_tokens.cost.usd"] == pytest.approx(price(model, input_characters=12))
    assert tokens(wrong) == (None, None) and "otel_tokens.cost.usd" not in wrong
    assert t.errors() == {"usage_missing": 1}  # the input that is not a string: nothing else
    assert not any(said in str(value) for attrs in attributes(t) for value in attrs.values())


@pytest.mark.parametrize("client", CLIENTS)
def test_transcriptions_are_recorded_from_the_form_and_its_answer(url, client):
    form = {"model": "gpt-4o-transcribe", "response_format": "json"}
    with handling(http_patches) as t:
        send(client, url + "/v1/audio/transcriptions", form=form, file=WAV)
        streamed = send(client, url + "/stream/v1/audio/transcriptions",
                        form={**form, "stream": "true"}, file=WAV, stream=True)  # fmt: skip
        text = send(client, url + "/v1/audio/translations", form={"model": "whisper-1",
                    "response_format": "text"}, file=WAV)  # fmt: skip
    assert b"transcript.text.done" in streamed and text == b"Hello there\n"
    plain, stream, translated = attributes(t)
    for attrs in (plain, stream):
        assert attrs["gen_ai.request.model"] == "gpt-4o-transcribe"
        assert attrs["gen_ai.operation.name"] == "transcription"
        assert tokens(attrs) == (40, 9)
        assert attrs["otel_tokens.cost.usd"] == pytest.approx(
            price("gpt-4o-transcribe", input_tokens=40, input_audio_tokens=40, output_tokens=9)
        )
    assert translated["gen_ai.request.model"] == "whisper-1" and tokens(translated) == (None, None)
    assert t.errors() == {"usage_missing": 1}  # the plain-text translation's: no parse fault


# -- recorded traffic ------------------------------------------------------------------------
#: a voice pipeline's real traffic (the openai Agents SDK): a transcription sent as the openai
#: SDK built its multipart form, its gzip-compressed answer; speech answered as raw PCM audio
VOICE = "logfire/tests__otel_integrations__test_openai_agents__test_voice_pipeline.yaml"
#: a real DALL-E 2 generation: an answer without usage
DALL_E = "logfire/tests__otel_integrations__test_openai__test_images_version_latest_only.yaml"


def _recorded(name: str) -> list[dict]:
    """The interactions of one recorded file, bodies as recorded (bytes stay bytes)."""
    import yaml

    path = peer.require() / name
    return yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))[
        "interactions"
    ]


def _replayed(interactions: list[dict]) -> LocalServer:
    """A server answering each recorded path with its recorded answer, bytes as sent."""
    answers = {}
    for item in interactions:
        response = item["response"]
        headers = {k.lower(): v[0] for k, v in response["headers"].items()}
        body = response["body"]["string"]
        extra = (
            {"content-encoding": headers["content-encoding"]}
            if "content-encoding" in headers
            else {}
        )
        answers[urlsplit(item["request"]["uri"]).path] = (
            200,
            headers["content-type"],
            body if isinstance(body, bytes) else body.encode(),
            extra,
        )
    return LocalServer(lambda path, body: (*answers[path][:3], dict(answers[path][3])))


def _resend(client: str, url: str, request: dict) -> bytes:
    """The recorded request's bytes, sent again as they were (its content type too)."""
    body = request["body"]
    content = body if isinstance(body, bytes) else body.encode()
    recorded = {k.lower(): v[0] for k, v in request["headers"].items()}
    headers = {"content-type": recorded["content-type"]}
    if client == "httpx":
        return httpx.post(url, content=content, headers=headers).content
    if client == "requests":
        return requests.post(url, data=content, headers=headers).content

    async def run() -> bytes:
        if client == "httpx-async":
            async with httpx.AsyncClient() as http:
                return (await http.post(url, content=content, headers=headers)).content
        async with aiohttp.ClientSession() as session:
            async with session.post(url, data=content, headers=headers) as response:
                return await response.read()

    return asyncio.run(run())


@pytest.mark.parametrize("client", CLIENTS)
def test_recorded_voice_pipeline_and_dall_e_traffic(provider_urls, client):
    voice, dall_e = _recorded(VOICE), _recorded(DALL_E)
    transcription, speech, generation = voice[0], voice[2], dall_e[0]
    server = _replayed([transcription, speech, generation])
    try:
        url = provider_urls(server.url, "openai")
        with handling(http_patches) as t:
            heard = _resend(client, url + "/v1/audio/transcriptions", transcription["request"])
            audio = _resend(client, url + "/v1/audio/speech", speech["request"])
            drawn = _resend(client, url + "/v1/images/generations", generation["request"])
    finally:
        server.close()
    assert b'"output_tokens":5' in heard and len(audio) == 504000 and b'"url"' in drawn
    heard_attrs, spoken, dalle = attributes(t)
    # the model read from the recorded multipart form (its file part never read)
    assert heard_attrs["gen_ai.request.model"] == "gpt-4o-transcribe"
    assert tokens(heard_attrs) == (1, 5)
    assert heard_attrs["otel_tokens.cost.usd"] == pytest.approx(
        price("gpt-4o-transcribe", input_tokens=1, input_audio_tokens=1, output_tokens=5)
    )
    assert spoken["gen_ai.request.model"] == "gpt-4o-mini-tts" and tokens(spoken) == (None, None)
    assert dalle["gen_ai.request.model"] == "dall-e-2" and tokens(dalle) == (None, None)
    assert t.errors() == {"usage_missing": 2}  # the audio's and DALL-E's: nothing else
