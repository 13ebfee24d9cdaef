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
from agents.voice import OpenAISTTModel, StreamedAudioInput, STTModelSettings

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


async def transcribe(server: RealtimeServer, turns: int) -> list[str]:
    """A streamed STT session of ``turns`` chunks of audio, each a turn; its transcripts."""
    client = openai.AsyncOpenAI(api_key="sk-test", base_url="https://api.openai.com/v1",
                                websocket_base_url=server.url)  # fmt: skip
    audio = StreamedAudioInput()
    session = await OpenAISTTModel(TRANSCRIBER, client).create_session(
        audio, STTModelSettings(), False, False)  # fmt: skip
    for _ in range(turns):
        await audio.add_audio(np.zeros(2400, dtype=np.int16))
    await audio.add_audio(None)  # the end of the input
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
