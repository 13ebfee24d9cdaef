"""Anthropic streams: every ending, sync and async, for ``messages.create(stream=True)`` and
the ``messages.stream()`` manager; the proxies cannot be told from the SDK's own objects;
patching is reversible and idempotent; content stays out of telemetry."""

from __future__ import annotations

import asyncio
import gc
import json

import pytest

import otel_tokens
from otel_tokens.capture.sdk import anthropic as anthropic_sdk
from otel_tokens.handler import set_handler

from .. import cassettes
from ..telemetry.conftest import handling, make_telemetry
from .replay import anthropic_client

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

RECORDED = "anthropic/test_prompt_caching__test_anthropic_prompt_caching_stream_legacy.yaml"
MODEL = "claude-3-5-haiku-20241022"
PROMPT = "Tell me a joke about OpenTelemetry"
APIS = ["create", "manager"]


@pytest.fixture
def telemetry():
    with handling(anthropic_sdk) as t:
        yield t


def sse(*events: dict) -> str:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


START = {"type": "message_start", "message": {
    "id": "msg_synthetic", "type": "message", "role": "assistant", "model": MODEL, "content": [],
    "stop_reason": None, "stop_sequence": None,
    "usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "cache_creation_input_tokens": 2,
              "output_tokens": 1},
}}  # fmt: skip
BLOCK = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
HELLO = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello there, "}}
WORLD = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "observability world"}}
DELTA = {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
         "usage": {"output_tokens": 9}}  # fmt: skip
ERROR = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
FULL = (START, BLOCK, {"type": "ping"}, HELLO, WORLD, {"type": "content_block_stop", "index": 0}, DELTA,
        {"type": "message_stop"})  # fmt: skip


def served(body: str) -> cassettes.Interaction:
    return cassettes.Interaction(
        cassette="synthetic", index=0, method="POST", uri="https://api.anthropic.com/v1/messages",
        request_body=None, status=200, response_headers={"request-id": ["req_1"]},
        response_text=body,
    )  # fmt: skip


KWARGS = dict(model=MODEL, max_tokens=100, messages=[{"role": "user", "content": PROMPT}])


def open_sync(api: str, body: str = sse(*FULL)):
    """(stream, context manager the caller would use)."""
    client, _ = anthropic_client([served(body)])
    if api == "create":
        stream = client.messages.create(**KWARGS, stream=True)
        return stream, stream
    manager = client.messages.stream(**KWARGS)
    return manager.__enter__(), manager


async def open_async(api: str, body: str = sse(*FULL)):
    client, _ = anthropic_client([served(body)], is_async=True)
    if api == "create":
        stream = await client.messages.create(**KWARGS, stream=True)
        return stream, stream
    manager = client.messages.stream(**KWARGS)
    return await manager.__aenter__(), manager


def until_text(stream) -> list:
    seen = []
    for event in stream:
        seen.append(event)
        if event.type == "content_block_delta":
            return seen
    raise AssertionError("no text arrived")


async def until_text_async(stream) -> list:
    seen = []
    async for event in stream:
        seen.append(event)
        if event.type == "content_block_delta":
            return seen
    raise AssertionError("no text arrived")


def only_span(t):
    (span,) = t.finished()
    return dict(span.attributes), span


def assert_complete(t, end: str) -> None:
    attrs, _ = only_span(t)
    assert attrs["otel_tokens.stream.end"] == end
    assert attrs["otel_tokens.usage.source"] == "reported"
    assert attrs["gen_ai.usage.input_tokens"] == 17
    assert attrs["gen_ai.usage.cache_read.input_tokens"] == 5
    assert attrs["gen_ai.usage.cache_write.input_tokens"] == 2
    assert attrs["gen_ai.usage.output_tokens"] == 9
    assert attrs["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert attrs["gen_ai.response.id"] == "msg_synthetic"
    assert t.errors() == {}


def assert_partial(t, end: str) -> dict:
    """Ended before message_delta: input side kept, output estimated from the text seen."""
    attrs, _ = only_span(t)
    assert attrs["otel_tokens.stream.end"] == end
    assert attrs["gen_ai.usage.input_tokens"] == 17
    assert attrs["gen_ai.usage.cache_read.input_tokens"] == 5
    assert attrs["gen_ai.usage.cache_write.input_tokens"] == 2
    assert attrs["otel_tokens.usage.source"] == "estimated"
    assert 1 <= attrs["gen_ai.usage.output_tokens"] <= 8  # "Hello there, " only, not message_start's placeholder
    assert attrs["gen_ai.response.id"] == "msg_synthetic"
    points = {p.attributes["gen_ai.token.type"]: p.value for p in t.points("otel_tokens.tokens")}
    assert points["input"] == 17 and points["output"] == attrs["gen_ai.usage.output_tokens"]
    return attrs


# -- every ending, sync ------------------------------------------------------------------
@pytest.mark.parametrize("api", APIS)
def test_exhausted(telemetry, api):
    with otel_tokens.agent("a") as entry:
        stream, manager = open_sync(api)
        assert entry.state.status == "streaming" and entry.state.current_estimate is not None
        events = list(stream)
        assert entry.state.status == "idle" and entry.state.current_estimate is None
        if api == "manager":
            manager.__exit__(None, None, None)  # ends nothing twice
    assert events[0].type == "message_start"
    assert_complete(telemetry, "exhausted")
    assert entry.state.turn_count == 1 and entry.state.max_observed_input_tokens == 17


@pytest.mark.parametrize("api", APIS)
def test_closed_early(telemetry, api):
    with otel_tokens.agent("a") as entry:
        stream, _ = open_sync(api)
        until_text(stream)
        stream.close()
        stream.close()
    assert_partial(telemetry, "closed")
    assert entry.state.current_estimate is None and entry.state.status == "idle"
    assert telemetry.errors() == {}


def test_context_exited_early_create(telemetry):
    client, _ = anthropic_client([served(sse(*FULL))])
    with otel_tokens.agent("a") as entry:
        with client.messages.create(**KWARGS, stream=True) as stream:
            until_text(stream)
    assert_partial(telemetry, "exited")
    assert entry.state.current_estimate is None


def test_context_exited_early_manager(telemetry):
    client, _ = anthropic_client([served(sse(*FULL))])
    with otel_tokens.agent("a") as entry:
        with client.messages.stream(**KWARGS) as stream:
            until_text(stream)
    assert_partial(telemetry, "exited")
    assert entry.state.current_estimate is None


@pytest.mark.parametrize("api", APIS)
def test_error_event_mid_stream(telemetry, api):
    import anthropic

    with otel_tokens.agent("a") as entry:
        stream, _ = open_sync(api, sse(START, BLOCK, HELLO, ERROR))
        with pytest.raises(anthropic.APIStatusError):
            for _ in stream:
                pass
        assert entry.state.current_estimate is None and entry.state.status == "idle"
    attrs, span = only_span(telemetry)
    assert attrs["otel_tokens.stream.end"] == "error"
    assert attrs["error.type"].startswith("anthropic.")
    assert span.status.status_code.name == "ERROR"
    assert attrs["gen_ai.usage.input_tokens"] == 17  # billed input kept
    assert attrs["otel_tokens.usage.source"] == "estimated"
    assert entry.state.turn_count == 0


def test_caller_exception_in_manager_block(telemetry):
    client, _ = anthropic_client([served(sse(*FULL))])
    with otel_tokens.agent("a") as entry:
        with pytest.raises(KeyError):
            with client.messages.stream(**KWARGS) as stream:
                until_text(stream)
                raise KeyError("caller")
    attrs, _ = only_span(telemetry)
    assert attrs["otel_tokens.stream.end"] == "error" and attrs["error.type"] == "KeyError"
    assert attrs["gen_ai.usage.input_tokens"] == 17
    assert entry.state.current_estimate is None and entry.state.status == "idle"


@pytest.mark.parametrize("api", APIS)
def test_abandoned_and_collected(telemetry, api):
    with otel_tokens.agent("a") as entry:
        stream, manager = open_sync(api)
        until_text(stream)
        assert telemetry.finished() == []
        del stream, manager
        gc.collect()
    assert_partial(telemetry, "abandoned")
    assert entry.state.current_estimate is None and entry.state.status == "idle"


def test_abandoned_unread(telemetry):
    with otel_tokens.agent("a") as entry:
        stream, _ = open_sync("create")
        del stream, _
        gc.collect()
    attrs, _span = only_span(telemetry)
    assert attrs["otel_tokens.stream.end"] == "abandoned"
    assert "gen_ai.usage.input_tokens" not in attrs  # nothing arrived, nothing invented
    assert entry.state.current_estimate is None


# -- every ending, async -----------------------------------------------------------------
@pytest.mark.parametrize("api", APIS)
def test_async_exhausted(telemetry, api):
    async def run():
        with otel_tokens.agent("a") as entry:
            stream, manager = await open_async(api)
            assert entry.state.status == "streaming"
            events = [e async for e in stream]
            if api == "manager":
                await manager.__aexit__(None, None, None)
        return entry, events

    entry, events = asyncio.run(run())
    assert events[-1].type == "message_stop"
    assert_complete(telemetry, "exhausted")
    assert entry.state.current_estimate is None and entry.state.turn_count == 1


@pytest.mark.parametrize("api", APIS)
def test_async_closed_early(telemetry, api):
    async def run():
        with otel_tokens.agent("a") as entry:
            stream, _ = await open_async(api)
            await until_text_async(stream)
            await stream.close()
            await stream.close()
        return entry

    entry = asyncio.run(run())
    assert_partial(telemetry, "closed")
    assert entry.state.current_estimate is None


def test_async_context_exited_early(telemetry):
    async def run():
        client, _ = anthropic_client([served(sse(*FULL))], is_async=True)
        async with await client.messages.create(**KWARGS, stream=True) as stream:
            await until_text_async(stream)
        client2, _ = anthropic_client([served(sse(*FULL))], is_async=True)
        async with client2.messages.stream(**KWARGS) as stream:
            await until_text_async(stream)

    asyncio.run(run())
    ends = [s.attributes["otel_tokens.stream.end"] for s in telemetry.finished()]
    assert ends == ["exited", "exited"]
    assert all(s.attributes["gen_ai.usage.input_tokens"] == 17 for s in telemetry.finished())


@pytest.mark.parametrize("api", APIS)
def test_async_error_event_mid_stream(telemetry, api):
    import anthropic

    async def run():
        stream, _ = await open_async(api, sse(START, BLOCK, HELLO, ERROR))
        with pytest.raises(anthropic.APIStatusError):
            async for _ in stream:
                pass

    asyncio.run(run())
    attrs, _ = only_span(telemetry)
    assert attrs["otel_tokens.stream.end"] == "error" and attrs["error.type"].startswith("anthropic.")
    assert attrs["gen_ai.usage.input_tokens"] == 17


def test_async_caller_exception_in_manager_block(telemetry):
    async def run():
        client, _ = anthropic_client([served(sse(*FULL))], is_async=True)
        with pytest.raises(KeyError):
            async with client.messages.stream(**KWARGS) as stream:
                await until_text_async(stream)
                raise KeyError("caller")

    asyncio.run(run())
    attrs, _ = only_span(telemetry)
    assert attrs["otel_tokens.stream.end"] == "error" and attrs["error.type"] == "KeyError"


@pytest.mark.parametrize("api", APIS)
def test_async_abandoned_and_collected(telemetry, api):
    async def run():
        with otel_tokens.agent("a") as entry:
            stream, manager = await open_async(api)
            await until_text_async(stream)
            del stream, manager
            gc.collect()
            await asyncio.sleep(0)
        return entry

    entry = asyncio.run(run())
    gc.collect()
    assert_partial(telemetry, "abandoned")
    assert entry.state.current_estimate is None


# -- the caller cannot tell the difference -------------------------------------------------
def test_stream_is_transparent(telemetry):
    import anthropic

    stream, _ = open_sync("create")
    assert isinstance(stream, anthropic.Stream)
    assert stream.response.headers["request-id"] == "req_1"
    # iter() gives what the original's gives (a generator over the same stream), unread
    assert type(iter(stream)) is type(iter(stream.__wrapped__))
    with stream as entered:
        assert entered is stream
        assert [e.type for e in entered][:2] == ["message_start", "content_block_start"]
    assert telemetry.finished()[0].attributes["otel_tokens.stream.end"] == "exhausted"


def test_async_stream_is_transparent(telemetry):
    import anthropic

    async def run():
        stream, _ = await open_async("create")
        assert isinstance(stream, anthropic.AsyncStream)
        assert stream.response.headers["request-id"] == "req_1"
        async with stream as entered:
            assert entered is stream
            return [e.type async for e in entered]

    assert asyncio.run(run())[-1] == "message_stop"
    assert len(telemetry.finished()) == 1


@pytest.mark.parametrize("helper", ["text_stream", "get_final_message", "get_final_text", "until_done"])
def test_manager_helpers(telemetry, helper):
    from anthropic.lib.streaming import MessageStream, MessageStreamManager

    client, _ = anthropic_client([served(sse(*FULL))])
    manager = client.messages.stream(**KWARGS)
    assert isinstance(manager, MessageStreamManager)
    with manager as stream:
        assert type(stream) is MessageStream
        assert stream.request_id == "req_1"
        if helper == "text_stream":
            assert "".join(stream.text_stream) == "Hello there, observability world"
        elif helper == "get_final_message":
            message = stream.get_final_message()
            assert message.usage.output_tokens == 9 and message.usage.input_tokens == 10
        elif helper == "get_final_text":
            assert stream.get_final_text() == "Hello there, observability world"
        else:
            stream.until_done()
        assert len(telemetry.finished()) == 1  # accounted as soon as the stream ran out
    assert_complete(telemetry, "exhausted")


@pytest.mark.parametrize("helper", ["text_stream", "get_final_message", "until_done"])
def test_async_manager_helpers(telemetry, helper):
    from anthropic.lib.streaming import AsyncMessageStream, AsyncMessageStreamManager

    async def run():
        client, _ = anthropic_client([served(sse(*FULL))], is_async=True)
        manager = client.messages.stream(**KWARGS)
        assert isinstance(manager, AsyncMessageStreamManager)
        async with manager as stream:
            assert type(stream) is AsyncMessageStream
            if helper == "text_stream":
                return "".join([t async for t in stream.text_stream])
            if helper == "get_final_message":
                return (await stream.get_final_message()).content[0].text
            await stream.until_done()
            return "done"

    assert asyncio.run(run()) in ("Hello there, observability world", "done")
    assert_complete(telemetry, "exhausted")


def test_manager_never_entered_sends_nothing(telemetry):
    client, replay = anthropic_client([served(sse(*FULL))])
    manager = client.messages.stream(**KWARGS)
    del manager
    gc.collect()
    assert replay.sent == [] and telemetry.finished() == []


def test_recorded_stream_through_manager_and_create(telemetry):
    cassettes.require()
    its = cassettes.load(cassettes.CASSETTES / RECORDED)
    client, _ = anthropic_client(its)
    body = {k: v for k, v in its[0].request_body.items() if k != "stream"}
    with client.messages.stream(**body) as stream:
        first = stream.get_final_message()
    body2 = {k: v for k, v in its[1].request_body.items() if k != "stream"}
    second = list(client.messages.create(**body2, stream=True))
    spans = telemetry.finished()
    assert [s.attributes["gen_ai.response.id"] for s in spans] == [first.id, second[0].message.id]
    u = first.usage
    assert spans[0].attributes["gen_ai.usage.input_tokens"] == (
        u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens)


# -- content stays out -------------------------------------------------------------------
@pytest.mark.parametrize("api", APIS)
def test_no_content_recorded(telemetry, api, monkeypatch):
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    stream, _ = open_sync(api)
    list(stream)
    for span in telemetry.finished():
        values = [str(v) for v in span.attributes.values()] + [e.name for e in span.events]
        assert not any(PROMPT in v or "observability world" in v for v in values)


# -- patching ------------------------------------------------------------------------------
def _methods():
    from anthropic.resources.beta.messages import AsyncMessages as BetaAsync, Messages as Beta
    from anthropic.resources.messages import AsyncMessages, Messages

    return [(cls, name) for cls in (Messages, AsyncMessages, Beta, BetaAsync)
            for name in ("create", "parse", "stream") if name in vars(cls)]  # fmt: skip


def test_uninstall_restores_and_install_twice_wraps_once():
    anthropic_sdk.uninstall()
    originals = {(cls, name): vars(cls)[name] for cls, name in _methods()}
    assert len(originals) >= 8  # create and stream, sync and async, stable and beta
    try:
        assert anthropic_sdk.install() is True
        assert anthropic_sdk.install() is True
        for (cls, name), original in originals.items():
            current = vars(cls)[name]
            assert current is not original
            assert current.__wrapped__ is original  # one layer, not two
        anthropic_sdk.uninstall()
        for (cls, name), original in originals.items():
            assert vars(cls)[name] is original
        anthropic_sdk.uninstall()  # idempotent
        for (cls, name), original in originals.items():
            assert vars(cls)[name] is original
    finally:
        anthropic_sdk.uninstall()


def test_uninstalled_calls_make_no_span():
    t = make_telemetry()
    previous = set_handler(t.handler)
    try:
        anthropic_sdk.uninstall()
        stream, _ = open_sync("create")
        list(stream)
        assert t.finished() == []
    finally:
        set_handler(previous)


def test_registered_and_entry_point():
    from otel_tokens.capture import BACKENDS as REGISTRY
    from otel_tokens.capture.sdk import anthropic_patches
    from otel_tokens.entry_points import AnthropicInstrumentor

    assert REGISTRY["anthropic"] == "otel_tokens.capture.sdk.anthropic_patches"
    assert anthropic_sdk.install is anthropic_patches.install  # the same patches either way
    assert AnthropicInstrumentor.name == "anthropic"
    assert list(AnthropicInstrumentor().instrumentation_dependencies()) == list(anthropic_sdk.DEPENDENCIES)


# -- threads and asyncio ------------------------------------------------------------------
def test_threads_and_tasks_one_span_each_exact_totals(telemetry):
    import threading

    per_thread, threads, tasks = 5, 8, 200
    body = sse(*FULL)

    def worker():
        for _ in range(per_thread):
            client, _ = anthropic_client([served(body)])
            list(client.messages.create(**KWARGS, stream=True))

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()

    async def many():
        async def one():
            client, _ = anthropic_client([served(body)], is_async=True)
            async with client.messages.stream(**KWARGS) as stream:
                await stream.get_final_message()

        await asyncio.gather(*(one() for _ in range(tasks)))

    asyncio.run(many())
    calls = per_thread * threads + tasks
    spans = telemetry.finished()
    assert len(spans) == calls and len({s.context.span_id for s in spans}) == calls
    totals = {p.attributes["gen_ai.token.type"]: p.value for p in telemetry.points("otel_tokens.tokens")}
    assert totals == {"input": 17 * calls, "output": 9 * calls, "cache_read": 5 * calls,
                      "cache_write": 2 * calls}  # fmt: skip
    assert telemetry.errors() == {}
