"""The OpenAI Agents SDK voice pipeline's streamed speech-to-text session (``agents.voice``:
``OpenAISTTModel.create_session``) opens its own websocket to the Realtime API: through the
real SDK against the local server (a transcription session, server VAD), each transcribed
turn is one ``transcription`` call, once, at the transcription model's rates, under the
agent current when the session connected; the program gets the same transcripts."""

from __future__ import annotations

import asyncio

import pytest

openai = pytest.importorskip("openai")
pytest.importorskip("websockets")
np = pytest.importorskip("numpy")
pytest.importorskip("agents.voice")

import genai_prices
from agents import set_tracing_disabled
from agents.voice import (
    OpenAISTTModel,
    OpenAITTSModel,
    StreamedAudioInput,
    STTModelSettings,
    VoicePipeline,
    VoiceWorkflowBase,
)

import otel_tokens
from otel_tokens.capture.sdk import openai_patches

from ..telemetry.conftest import handling
from .realtime_server import RealtimeServer

TRANSCRIBER = "gpt-4o-transcribe"


def heard(audio: int, text: int, output: int) -> dict:
    """A completed transcription's ``usage`` as the API sends it (``type: tokens``)."""
    return {"type": "tokens", "total_tokens": audio + text + output,
            "input_tokens": audio + text, "output_tokens": output,
            "input_token_details": {"text_tokens": text, "audio_tokens": audio}}  # fmt: skip


#: three turns: (transcript, usage); the second had a prompt (text input tokens)
TURNS = [("Hello there.", heard(17, 0, 9)), ("Book me a table for two.", heard(52, 11, 14)),
         ("Thanks!", heard(8, 0, 3))]  # fmt: skip


@pytest.fixture
def server():
    s = RealtimeServer()
    set_tracing_disabled(True)  # the SDK's own traces would be exported to OpenAI
    yield s
    set_tracing_disabled(False)
    s.close()


async def open_session(server: RealtimeServer, model: str = TRANSCRIBER) -> tuple:
    """A streamed STT session (not connected until its turns are read) and its audio input."""
    client = openai.AsyncOpenAI(api_key="sk-test", base_url="https://api.openai.com/v1",
                                websocket_base_url=server.url)  # fmt: skip
    audio = StreamedAudioInput()
    session = await OpenAISTTModel(model, client).create_session(
        audio, STTModelSettings(), False, False)  # fmt: skip
    return audio, session


async def speak(audio: StreamedAudioInput, turns: int, end: bool = True) -> None:
    """``turns`` chunks of audio, each a turn (server VAD), then the end of the input."""
    for _ in range(turns):
        await audio.add_audio(np.zeros(2400, dtype=np.int16))
    if end:
        await audio.add_audio(None)


async def transcribe(server: RealtimeServer, turns: int, model: str = TRANSCRIBER) -> list[str]:
    """A streamed STT session of ``turns`` turns; its transcripts."""
    audio, session = await open_session(server, model)
    await speak(audio, turns)
    return [text async for text in session.transcribe_turns()]


def price(used: dict) -> float:
    """genai-prices' price of one transcription's usage at gpt-4o-transcribe's rates."""
    counts = genai_prices.Usage(input_tokens=used["input_tokens"],
                                output_tokens=used["output_tokens"],
                                input_audio_tokens=used["input_token_details"]["audio_tokens"])  # fmt: skip
    return float(genai_prices.calc_price(counts, TRANSCRIBER, provider_id="openai").total_price)


def test_each_transcribed_turn_is_one_call_at_the_transcription_model_s_rates(server):
    server.transcriptions.extend(TURNS)
    with handling(openai_patches) as t, otel_tokens.agent("voice-desk"):
        texts = asyncio.run(transcribe(server, 3))
    assert texts == [text for text, _ in TURNS]
    spans = t.finished()
    assert len(spans) == 3  # one call per turn, none twice
    for span, (_, used) in zip(spans, TURNS):
        attrs = span.attributes
        assert (attrs["gen_ai.operation.name"], attrs["gen_ai.request.model"]) == (
            "transcription", TRANSCRIBER)  # fmt: skip
        assert (attrs["gen_ai.provider.name"], attrs["server.address"]) == ("openai", "127.0.0.1")
        assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (
            used["input_tokens"], used["output_tokens"])  # fmt: skip
        assert attrs["otel_tokens.cost.usd"] == pytest.approx(price(used), rel=1e-9)
        assert attrs["gen_ai.agent.name"] == "voice-desk"
    inputs = t.point("gen_ai.client.token.usage", **{"gen_ai.token.type": "input"})
    assert inputs.sum == 17 + 63 + 8


def test_the_program_gets_the_same_transcripts_as_unrecorded(server):
    server.transcriptions.extend(TURNS * 2)
    with handling(openai_patches) as t:
        traced = asyncio.run(transcribe(server, 3))
    assert len(t.finished()) == 3  # recorded, and ...
    assert asyncio.run(transcribe(server, 3)) == traced  # ... the same as unrecorded


def test_a_dropped_connection_ends_the_session_and_the_error_reaches_the_program(server):
    """The server cuts the connection after the first turn: that turn is recorded, the
    program gets the SDK's own error as unrecorded, and nothing of the session is kept."""
    from otel_tokens.capture.websocket import agents_voice

    server.drop_after_created = True

    async def run(texts: list[str]) -> None:
        audio, session = await open_session(server)
        await speak(audio, 2, end=False)  # the input goes on: the drop ends the session
        async for text in session.transcribe_turns():
            texts.append(text)

    def failure() -> tuple[list[str], str]:
        texts: list[str] = []
        with pytest.raises(Exception) as raised:
            asyncio.run(run(texts))
        return texts, f"{type(raised.value).__name__}: {raised.value}"

    with handling(openai_patches) as t:
        traced = failure()
    assert failure() == traced  # the same transcripts and the same error, unrecorded
    assert traced[0] == ["Hi, can you hear me?"]
    (span,) = t.finished()
    assert span.attributes["gen_ai.usage.input_tokens"] == 17
    assert len(agents_voice._HOOKED) == 0 and t.errors() == {}


def test_uninstrument_stops_reading_a_session_still_open(server):
    """``uninstrument()`` mid-session: the queue gets its own ``put`` back and the
    session's later turns are not recorded; the program still gets every transcript."""
    server.transcriptions.extend(TURNS)

    async def run() -> tuple[list[str], bool]:
        audio, session = await open_session(server)
        await speak(audio, 1, end=False)
        texts, restored = [], False
        async for text in session.transcribe_turns():
            texts.append(text)
            if len(texts) == 1:  # the next turns are spoken after uninstrument()
                openai_patches.uninstall()
                restored = "put" not in vars(session._event_queue)
                await speak(audio, 2)
        return texts, restored

    with handling(openai_patches) as t:
        texts, restored = asyncio.run(run())
    assert texts == [text for text, _ in TURNS] and restored
    assert len(t.finished()) == 1


def test_a_model_billed_by_the_second_is_priced_by_its_seconds(server):
    """whisper-like models report ``{"type": "duration", "seconds": N}``: priced per second."""
    server.transcriptions.append(("Hello there.", {"type": "duration", "seconds": 2.4}))
    with handling(openai_patches) as t:
        assert asyncio.run(transcribe(server, 1, model="whisper-1")) == ["Hello there."]
    attrs = t.span().attributes
    assert (attrs["gen_ai.request.model"], attrs["otel_tokens.cost.components"]) == (
        "whisper-1", ("audio_seconds",))  # fmt: skip
    seconds = genai_prices.Usage(audio_seconds=2.4)
    bill = genai_prices.calc_price(seconds, "whisper-1", provider_id="openai").total_price
    assert attrs["otel_tokens.cost.usd"] == pytest.approx(float(bill))


def test_a_fault_in_reading_is_counted_and_the_program_gets_every_transcript(
    server, monkeypatch):  # fmt: skip
    from otel_tokens.capture.websocket import openai_realtime

    def broken(session, event):
        raise RuntimeError("reader fault")

    monkeypatch.setattr(openai_realtime, "observe", broken)
    server.transcriptions.extend(TURNS)
    with handling(openai_patches) as t:
        assert asyncio.run(transcribe(server, 3)) == [text for text, _ in TURNS]
    assert t.finished() == [] and t.errors().get("internal", 0) >= 1


class Listening(VoiceWorkflowBase):
    """A voice workflow that keeps what it hears, under an agent of its own, and says nothing."""

    def __init__(self) -> None:
        self.heard: list[str] = []

    async def run(self, transcription: str):
        with otel_tokens.agent("booking"):
            self.heard.append(transcription)
        return
        yield


def test_a_voice_pipeline_s_turns_are_the_agent_s_that_ran_the_pipeline(server):
    """Through ``VoicePipeline`` with a ``StreamedAudioInput``: each turn the workflow hears
    is one call, under the agent bound where the pipeline ran (the session's), not the one
    the workflow binds while it handles the turn."""
    server.transcriptions.extend(TURNS)
    client = openai.AsyncOpenAI(api_key="sk-test", base_url="https://api.openai.com/v1",
                                websocket_base_url=server.url)  # fmt: skip
    workflow = Listening()

    async def run() -> None:
        audio = StreamedAudioInput()
        pipeline = VoicePipeline(workflow=workflow, stt_model=OpenAISTTModel(TRANSCRIBER, client),
                                 tts_model=OpenAITTSModel("gpt-4o-mini-tts", client))  # fmt: skip
        with otel_tokens.agent("voice-desk"):
            result = await pipeline.run(audio)
        await speak(audio, 3)
        async for _event in result.stream():
            pass

    with handling(openai_patches) as t:
        asyncio.run(run())
    assert workflow.heard == [text for text, _ in TURNS]
    spans = t.finished()
    assert [s.attributes["gen_ai.usage.input_tokens"] for s in spans] == [17, 63, 8]
    assert {s.attributes["gen_ai.agent.name"] for s in spans} == {"voice-desk"}
