"""The OpenAI Realtime API through the real ``openai`` client (``client.realtime.connect``,
sync and async) against a local websocket server speaking the documented protocol
(``realtime_server``): each ``response.done`` is one call with its exact usage, priced by
genai-prices at the model's text and audio rates, under the agent current when the session
was opened; the caller gets the same events; a dropped connection ends what was open."""

from __future__ import annotations

import asyncio

import pytest

openai = pytest.importorskip("openai")
pytest.importorskip("websockets")

import genai_prices
from websockets.exceptions import ConnectionClosed

import otel_tokens
from otel_tokens.capture.sdk import openai_patches

from ..telemetry.conftest import handling
from .realtime_server import (
    DOCUMENTED_USAGE,
    MODEL,
    TRANSCRIBER,
    RealtimeServer,
    resources,
    settled,
    usage,
)


@pytest.fixture
def server():
    s = RealtimeServer()
    yield s
    s.close()


@pytest.fixture
def telemetry():
    with handling(openai_patches) as t:
        yield t


def billed(used: dict) -> float:
    """genai-prices' price of one ``response.done`` usage, every token class at its rate."""
    details, spoken = used["input_token_details"], used["output_token_details"]
    cached = details["cached_tokens_details"]
    counts = genai_prices.Usage(
        input_tokens=used["input_tokens"], cache_read_tokens=details["cached_tokens"],
        output_tokens=used["output_tokens"], input_audio_tokens=details["audio_tokens"],
        cache_audio_read_tokens=cached["audio_tokens"], output_audio_tokens=spoken["audio_tokens"],
    )  # fmt: skip
    return float(genai_prices.calc_price(counts, MODEL, provider_id="openai").total_price)


def clients(server: RealtimeServer) -> tuple:
    kwargs = {"api_key": "sk-test", "base_url": "https://api.openai.com/v1",
              "websocket_base_url": server.url}  # fmt: skip
    return openai.OpenAI(**kwargs), openai.AsyncOpenAI(**kwargs)


def talk_sync(server: RealtimeServer, turns: int) -> list:
    """A sync session of ``turns`` responses; every event the caller received."""
    client, _ = clients(server)
    seen = []
    with client.realtime.connect(model="gpt-realtime") as connection:
        seen.append(connection.recv())  # session.created
        for _ in range(turns):
            connection.response.create()
            for event in connection:
                seen.append(event)
                if event.type == "response.done":
                    break
    return seen


async def talk_async(server: RealtimeServer, turns: int) -> list:
    _, client = clients(server)
    seen = []
    async with client.realtime.connect(model="gpt-realtime") as connection:
        seen.append(await connection.recv())
        for _ in range(turns):
            await connection.response.create()
            async for event in connection:
                seen.append(event)
                if event.type == "response.done":
                    break
    return seen


def tokens(attrs) -> tuple:
    return (attrs.get("gen_ai.usage.input_tokens"), attrs.get("gen_ai.usage.output_tokens"),
            attrs.get("gen_ai.usage.cache_read.input_tokens"))  # fmt: skip


def test_each_response_done_is_one_call_with_its_exact_usage_and_bill(telemetry, server):
    with otel_tokens.agent("voice-desk"):
        seen = talk_sync(server, 1)
    (span,) = telemetry.finished()
    attrs = span.attributes
    assert tokens(attrs) == (132, 121, 64)
    assert attrs["gen_ai.response.model"] == MODEL
    assert attrs["gen_ai.request.model"] == "gpt-realtime"
    assert attrs["gen_ai.response.id"] == seen[-1].response.id
    assert attrs["otel_tokens.cost.usd"] == pytest.approx(billed(DOCUMENTED_USAGE), rel=1e-9)
    assert "input_audio_tokens" in attrs["otel_tokens.cost.components"]
    assert "output_audio_tokens" in attrs["otel_tokens.cost.components"]
    assert telemetry.point("gen_ai.client.token.usage", **{"gen_ai.token.type": "input"}).sum == 132
    assert attrs["gen_ai.agent.name"] == "voice-desk"


def test_a_session_of_three_responses_is_three_calls_sync_and_async(telemetry, server):
    sizes = [usage(100 * i, 10 * i, 50 * i, 5 * i, 20 * i, 40 * i) for i in (1, 2, 3)]
    server.usages.extend(sizes)
    talk_sync(server, 3)
    server.usages.extend(sizes)
    asyncio.run(talk_async(server, 3))
    spans = telemetry.finished()
    assert [tokens(s.attributes) for s in spans] == [
        (110 * i, 60 * i, 55 * i) for i in (1, 2, 3)] * 2  # fmt: skip
    for span, used in zip(spans, sizes * 2):
        assert span.attributes["otel_tokens.cost.usd"] == pytest.approx(billed(used), rel=1e-9)


def test_the_session_s_agent_is_the_one_current_when_it_was_opened(telemetry, server):
    """The session is opened under one agent; its responses are read outside it, in another
    task: they are still that agent's."""

    async def main() -> None:
        _, client = clients(server)
        with otel_tokens.agent("concierge", user="u-9"):
            connection = await client.realtime.connect(model="gpt-realtime").enter()

        async def read() -> None:
            await connection.recv()
            await connection.response.create()
            async for event in connection:
                if event.type == "response.done":
                    break

        with otel_tokens.agent("someone-else"):
            await asyncio.create_task(read())
        await connection.close()

    asyncio.run(main())
    (span,) = telemetry.finished()
    assert (span.attributes["gen_ai.agent.name"], span.attributes["user.id"]) == (
        "concierge",
        "u-9",
    )


def test_the_caller_gets_the_same_events_as_without_instrumentation(server):
    server.usages.extend([usage(10, 1, 0, 0, 2, 3)] * 2)
    with handling(openai_patches) as t:
        traced = [e.to_dict() for e in talk_sync(server, 1)]
    assert len(t.finished()) == 1  # recorded, and ...
    plain = [e.to_dict() for e in talk_sync(server, 1)]
    for event in traced + plain:  # ids differ between sessions, the rest must not
        event.pop("event_id", None)
        event.get("response", {}).pop("id", None)
        event.pop("response_id", None)
    assert traced == plain  # ... the caller saw what it sees unrecorded
    assert [e["type"] for e in traced] == [
        "session.created",
        "response.created",
        "response.output_text.delta",
        "response.done",
    ]


def test_a_dropped_connection_ends_its_open_response_and_leaks_nothing(telemetry, server):
    client, _ = clients(server)
    server.drop_after_created = True

    def dropped_session() -> None:
        with client.realtime.connect(model="gpt-realtime") as connection:
            connection.recv()
            connection.response.create()
            with pytest.raises(ConnectionClosed):
                for _event in connection:
                    pass

    dropped_session()  # warm: the first session loads modules
    before = settled(resources())
    for _ in range(20):
        dropped_session()
    threads, fds = settled(before)
    spans = telemetry.finished()
    assert len(spans) == 21  # every response begun was ended ...
    assert all(s.status.status_code.name == "ERROR" for s in spans)  # ... as failed
    assert threads <= before[0] + 2 and fds <= before[1] + 2  # 20 sessions leaked none


def test_input_audio_transcription_is_billed_apart_by_its_own_model(telemetry, server):
    """The Realtime API bills the transcription of input audio apart, at the transcription
    model's rates: one ``transcription`` call per transcribed item, beside the responses."""
    client, _ = clients(server)
    with (
        otel_tokens.agent("voice-desk"),
        client.realtime.connect(model="gpt-realtime") as connection,
    ):
        connection.recv()  # session.created: names the transcription model
        connection.input_audio_buffer.append(audio="AAAA")
        connection.input_audio_buffer.commit()
        connection.response.create()
        for event in connection:
            if event.type == "response.done":
                break
    transcription, response = telemetry.finished()
    attrs = transcription.attributes
    assert (attrs["gen_ai.operation.name"], attrs["gen_ai.request.model"]) == (
        "transcription",
        TRANSCRIBER,
    )
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (17, 9)
    heard = genai_prices.Usage(input_tokens=17, output_tokens=9, input_audio_tokens=17)
    assert attrs["otel_tokens.cost.usd"] == pytest.approx(
        float(genai_prices.calc_price(heard, TRANSCRIBER, provider_id="openai").total_price),
        rel=1e-9,
    )
    assert attrs["gen_ai.agent.name"] == "voice-desk"
    assert tokens(response.attributes) == (132, 121, 64)


def test_responses_that_never_finish_are_bounded_and_end_with_the_connection(telemetry, server):
    """A server that starts responses and never bills them: at most 16 stay open in the
    session (the oldest ends, failed, past that), and the rest end when it closes."""
    from otel_tokens.capture.websocket.session import MAX_OPEN, session_of

    server.never_done = True
    client, _ = clients(server)
    with client.realtime.connect(model="gpt-realtime") as connection:
        connection.recv()
        for _ in range(MAX_OPEN + 4):
            connection.response.create()
            assert connection.recv().type == "response.created"
        assert session_of(connection).open_count == MAX_OPEN
        evicted = telemetry.finished()
        assert len(evicted) == 4
    spans = telemetry.finished()
    assert len(spans) == MAX_OPEN + 4 and session_of(connection).open_count == 0
    assert {s.attributes["error.type"] for s in spans} == {"response_not_done", "connection_closed"}


def test_usage_that_is_not_token_counts_is_counted_and_the_session_goes_on(telemetry, server):
    """A ``response.done`` whose counts are not counts as sent (``"132"``, which the SDK's
    object shows as 132; 10 kB of text) is recorded as unusable (a ``usage_invalid``
    fault), the caller gets the SDK's object as ever, and the session's next response is
    recorded as usual."""
    junk = {"input_tokens": "132", "output_tokens": 121, "total_tokens": "x" * 10_000,
            "input_token_details": {"audio_tokens": "\x00" * 10}}  # fmt: skip
    server.usages.extend([junk, DOCUMENTED_USAGE])
    seen = talk_sync(server, 2)
    done = [e.response.usage.input_tokens for e in seen if e.type == "response.done"]
    assert done == [132, 132]  # the SDK's own reading, unchanged
    first, second = telemetry.finished()
    assert "gen_ai.usage.input_tokens" not in first.attributes
    assert tokens(second.attributes) == (132, 121, 64)
    assert telemetry.errors().get("usage_invalid", 0) >= 1
