"""google-genai Live through the real client (``client.aio.live.connect``) against a local
websocket server speaking the Gemini Live protocol (``live_server``): each turn's
``usage_metadata`` is one call with its exact tokens, priced by genai-prices at the model's
text and audio rates, under the agent current when the session was opened; the caller gets
the same messages; a dropped connection ends the open turn and leaks nothing."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("google.genai")
pytest.importorskip("websockets")

import genai_prices
from google.genai import errors as genai_errors

import otel_tokens
from otel_tokens.capture.sdk import google_genai_patches

from ..telemetry.conftest import handling
from .live_server import CAPTURED, MODEL, LiveServer, usage
from .realtime_server import resources, settled


@pytest.fixture(scope="module")
def server():
    s = LiveServer()
    yield s
    s.close()


@pytest.fixture
def telemetry():
    with handling(google_genai_patches) as t:
        yield t


def billed(meta: dict) -> float:
    """genai-prices' price of one turn's ``usageMetadata``, audio at its own rates."""

    def modality(details: str, name: str) -> int:
        return sum(d["tokenCount"] for d in meta.get(details, ()) if d["modality"] == name)

    thoughts = meta.get("thoughtsTokenCount", 0)
    counts = genai_prices.Usage(
        input_tokens=meta["promptTokenCount"],
        cache_read_tokens=meta.get("cachedContentTokenCount", 0),
        output_tokens=meta["responseTokenCount"] + thoughts, output_reasoning_tokens=thoughts,
        input_audio_tokens=modality("promptTokensDetails", "AUDIO"),
        cache_audio_read_tokens=modality("cacheTokensDetails", "AUDIO"),
        output_audio_tokens=modality("responseTokensDetails", "AUDIO"),
    )  # fmt: skip
    return float(genai_prices.calc_price(counts, MODEL, provider_id="google").total_price)


async def converse(server: LiveServer, turns: int) -> list:
    """A Live session of ``turns`` text turns; every message the caller received."""
    seen = []
    async with server.client().aio.live.connect(
        model=MODEL, config={"response_modalities": ["TEXT"]}
    ) as session:
        for _ in range(turns):
            await session.send_client_content(turns={"role": "user", "parts": [{"text": "Salut"}]},
                                              turn_complete=True)  # fmt: skip
            seen.extend([message async for message in session.receive()])
    return seen


def tokens(attrs) -> tuple:
    return tuple(
        attrs.get(f"gen_ai.usage.{n}")
        for n in (
            "input_tokens",
            "output_tokens",
            "cache_read.input_tokens",
            "reasoning.output_tokens",
        )
    )


def test_each_turn_s_usage_is_one_call_with_its_exact_tokens_and_bill(telemetry, server):
    with otel_tokens.agent("tutor"):
        asyncio.run(converse(server, 1))
    (span,) = telemetry.finished()
    attrs = span.attributes
    assert tokens(attrs) == (522, 178, None, 136)
    assert (attrs["gen_ai.provider.name"], attrs["gen_ai.request.model"]) == ("gcp.gemini", MODEL)
    assert attrs["gen_ai.agent.name"] == "tutor"
    assert attrs["otel_tokens.cost.usd"] == pytest.approx(billed(CAPTURED), rel=1e-9)
    assert set(attrs["otel_tokens.cost.components"]) == {
        "input_audio_tokens",
        "output_audio_tokens",
    }
    assert server.setups[-1]["setup"]["model"] == f"models/{MODEL}"


def test_a_session_of_three_turns_is_three_calls(telemetry, server):
    sizes = [usage(300 * i, 40 * i, 100 * i, 20 * i, 60 * i) for i in (1, 2, 3)]
    server.usages.extend(sizes)
    asyncio.run(converse(server, 3))
    spans = telemetry.finished()
    assert [tokens(s.attributes)[:3] for s in spans] == [
        (340 * i, 80 * i, 100 * i) for i in (1, 2, 3)
    ]
    for span, meta in zip(spans, sizes):
        assert span.attributes["otel_tokens.cost.usd"] == pytest.approx(billed(meta), rel=1e-9)


def test_the_session_s_agent_is_the_one_current_when_it_was_opened(telemetry, server):
    async def main() -> None:
        opening = server.client().aio.live.connect(
            model=MODEL, config={"response_modalities": ["TEXT"]}
        )
        with otel_tokens.agent("opener", user="u-4"):
            session = await opening.__aenter__()

        async def read() -> None:
            await session.send_client_content(turns={"role": "user", "parts": [{"text": "Hi"}]},
                                              turn_complete=True)  # fmt: skip
            [message async for message in session.receive()]

        with otel_tokens.agent("reader"):
            await asyncio.create_task(read())
        await opening.__aexit__(None, None, None)

    asyncio.run(main())
    (span,) = telemetry.finished()
    assert (span.attributes["gen_ai.agent.name"], span.attributes["user.id"]) == ("opener", "u-4")


def test_the_caller_gets_the_same_messages_as_without_instrumentation(server):
    with handling(google_genai_patches) as t:
        traced = [m.model_dump() for m in asyncio.run(converse(server, 1))]
    assert len(t.finished()) == 1  # recorded, and ...
    plain = [m.model_dump() for m in asyncio.run(converse(server, 1))]
    assert traced == plain  # ... the caller saw what it sees unrecorded
    assert traced[-1]["usage_metadata"]["prompt_token_count"] == 522


def test_a_dropped_connection_ends_its_open_turn_and_leaks_nothing(telemetry, server):
    async def dropped() -> None:
        with pytest.raises(genai_errors.APIError):  # the SDK's error for a dropped socket
            await converse(server, 1)

    server.drop_mid_turn = True
    try:
        asyncio.run(dropped())  # warm: the first session loads modules
        before = settled(resources())
        for _ in range(10):
            asyncio.run(dropped())
        threads, fds = settled(before)
    finally:
        server.drop_mid_turn = False
    spans = telemetry.finished()
    assert len(spans) == 11  # every turn begun was ended ...
    assert all(s.status.status_code.name == "ERROR" for s in spans)  # ... as failed
    assert threads <= before[0] + 2 and fds <= before[1] + 2  # 10 sessions leaked none


def test_usage_that_is_not_token_counts_is_counted_and_the_session_goes_on(telemetry, server):
    """A turn whose counts are not counts as sent (``"522"``, which the SDK's object shows as
    522) is recorded as unusable (a ``usage_invalid`` fault); the caller gets the SDK's
    message as ever, and the next turn is recorded as usual."""
    server.usages.extend([{**CAPTURED, "promptTokenCount": "522"}, CAPTURED])
    seen = asyncio.run(converse(server, 2))
    billed_turns = [m.usage_metadata.prompt_token_count for m in seen if m.usage_metadata]
    assert billed_turns == [522, 522]  # the SDK's own reading, unchanged
    first, second = telemetry.finished()
    assert "gen_ai.usage.input_tokens" not in first.attributes
    assert tokens(second.attributes) == (522, 178, None, 136)
    assert telemetry.errors().get("usage_invalid", 0) >= 1
