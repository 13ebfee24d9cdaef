"""OpenAI streams: every ending, transparency to the caller, include_usage injection; raw
responses, Azure clients, patch identity, and concurrency."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import json
import threading

import pytest

import otel_tokens
from otel_tokens.capture.sdk import openai as openai_sdk

from .. import cassettes
from ..telemetry.conftest import handling
from .replay import openai_client

STREAM_WITH_USAGE = "openai-openllmetry/test_streaming_with_api_usage__test_streaming_with_api_usage_and_events.yaml"
STREAM = "openai-v2/test_chat_completion_streaming.yaml"  # the caller asked for usage
STREAM_WITHOUT_USAGE = "openai-openllmetry/test_chat__test_chat_streaming_with_events_with_content.yaml"
PLAIN = "openai-v2/test_chat_completion_with_content.yaml"


@pytest.fixture
def telemetry():
    cassettes.require()
    with handling(openai_sdk) as t:
        yield t


def recorded(name: str, index: int = 0) -> cassettes.Interaction:
    return cassettes.load(cassettes.CASSETTES / name)[index]


def stream_call(name: str | cassettes.Interaction = STREAM, *, is_async: bool = False, **extra):
    it = recorded(name) if isinstance(name, str) else name
    client, replay = openai_client([it], is_async=is_async)
    base = it.uri.rsplit("/chat/completions", 1)[0]
    client = client.with_options(base_url=base)
    body = {**it.request_body, **extra}
    return client.chat.completions.create(**body), it, replay


def only_span(t):
    (span,) = t.finished()
    return span


# -- every ending, sync ------------------------------------------------------------------
def test_exhausted(telemetry):
    with otel_tokens.agent("a") as entry:
        stream, it, _ = stream_call()
        assert entry.state.status == "streaming" and entry.state.current_estimate is not None
        chunks = list(stream)
    assert len(chunks) == len(it.sse_events())
    span = only_span(telemetry)
    assert span.attributes["otel_tokens.stream.end"] == "exhausted"
    assert entry.state.status == "idle" and entry.state.current_estimate is None
    assert entry.state.turn_count == 1


def test_closed_early_keeps_what_arrived(telemetry):
    with otel_tokens.agent("a") as entry:
        stream, _, _ = stream_call()
        first = next(stream)
        stream.close()
        stream.close()  # idempotent, one end
    assert first.choices is not None
    span = only_span(telemetry)
    assert span.attributes["otel_tokens.stream.end"] == "closed"
    assert span.attributes["otel_tokens.usage.source"] == "estimated"
    assert span.attributes["gen_ai.usage.output_tokens"] == 0  # nothing but the role arrived
    assert telemetry.errors() == {}
    assert entry.state.current_estimate is None and entry.state.turn_count == 1


def test_context_exited_early(telemetry):
    with otel_tokens.agent("a") as entry:
        stream, _, _ = stream_call()
        with stream as s:
            assert s is stream
            next(s)
    assert only_span(telemetry).attributes["otel_tokens.stream.end"] == "exited"
    assert entry.state.current_estimate is None


def test_abandoned_stream_ends_when_collected(telemetry):
    with otel_tokens.agent("a") as entry:
        stream, _, _ = stream_call()
        next(stream)
        del stream
        gc.collect()
    span = only_span(telemetry)
    assert span.attributes["otel_tokens.stream.end"] == "abandoned"
    assert entry.state.current_estimate is None and entry.state.status == "idle"


class Broken(Exception):
    pass


def failing_after(items, n: int):
    """The SDK stream's own iterator, failing after ``n`` items (a connection reset)."""
    for i, item in enumerate(items):
        if i == n:
            raise Broken("connection reset")
        yield item


async def afailing_after(items, n: int):
    i = 0
    async for item in items:
        if i == n:
            raise Broken("connection reset")
        i += 1
        yield item


@pytest.mark.parametrize("how", ["next", "loop"])
def test_exception_mid_stream_fails_the_call_and_passes_through(telemetry, how):
    with otel_tokens.agent("a") as entry:
        stream, _, _ = stream_call()
        stream.__wrapped__._iterator = failing_after(stream.__wrapped__._iterator, 2)
        seen = []
        with pytest.raises(Broken, match="connection reset"):
            if how == "next":  # the proxy's __next__
                while True:
                    seen.append(next(stream))
            for chunk in stream:  # a for loop: the proxy's generator
                seen.append(chunk)
    assert len(seen) == 2
    span = only_span(telemetry)
    assert span.attributes["error.type"].endswith("Broken")
    assert span.attributes["otel_tokens.stream.end"] == "error"
    assert entry.state.turn_count == 0 and entry.state.current_estimate is None


def test_loop_left_early_is_not_an_ending_and_reading_resumes(telemetry):
    with otel_tokens.agent("a") as entry:
        stream, it, _ = stream_call()
        first = []
        for chunk in stream:
            first.append(chunk)
            if len(first) == 2:
                break
        assert telemetry.finished() == []  # leaving a loop ends nothing: the stream is open
        assert entry.state.status == "streaming"
        rest = list(stream)  # a new loop goes on where the first stopped, as unwrapped
    assert len(first) + len(rest) == len(it.sse_events())
    assert [c.id for c in first + rest] == [e["id"] for e in it.sse_events()]
    span = only_span(telemetry)
    assert span.attributes["otel_tokens.stream.end"] == "exhausted"
    assert span.attributes["gen_ai.usage.output_tokens"] == it.sse_events()[-1]["usage"]["completion_tokens"]
    assert entry.state.turn_count == 1 and entry.state.current_estimate is None


def test_async_exception_mid_loop_and_loop_left_early(telemetry):
    async def main():
        with otel_tokens.agent("a") as entry:
            s1, _, _ = stream_call(is_async=True)
            s1 = await s1
            s1.__wrapped__._iterator = afailing_after(s1.__wrapped__._iterator, 2)
            seen = []
            with pytest.raises(Broken, match="connection reset"):
                async for chunk in s1:
                    seen.append(chunk)
            assert len(seen) == 2
            s2, it, _ = stream_call(is_async=True)
            s2 = await s2
            first = []
            async for chunk in s2:
                first.append(chunk)
                if len(first) == 2:
                    break
            gc.collect()
            for _ in range(3):  # let asyncio finalize the loop's dropped generator
                await asyncio.sleep(0)
            assert len(telemetry.finished()) == 1  # only s1's: leaving s2's loop ends nothing
            rest = [c async for c in s2]
            assert len(first) + len(rest) == len(it.sse_events())
            return entry

    entry = asyncio.run(main())
    failed, exhausted = telemetry.finished()
    assert failed.attributes["otel_tokens.stream.end"] == "error"
    assert failed.attributes["error.type"].endswith("Broken")
    assert exhausted.attributes["otel_tokens.stream.end"] == "exhausted"
    assert entry.state.turn_count == 1 and entry.state.current_estimate is None


# -- every ending, async -----------------------------------------------------------------
def test_async_endings(telemetry):
    async def main():
        with otel_tokens.agent("a") as entry:
            s1, it, _ = stream_call(is_async=True)
            s1 = await s1
            chunks = [c async for c in s1]
            assert len(chunks) == len(it.sse_events())
            s2, _, _ = stream_call(is_async=True)
            s2 = await s2
            await s2.__anext__()
            await s2.close()
            s3, _, _ = stream_call(is_async=True)
            async with await s3 as s:
                await s.__anext__()
            s4, _, _ = stream_call(is_async=True)
            s4 = await s4
            await s4.__anext__()
            del s4
            gc.collect()
            return entry

    entry = asyncio.run(main())
    ends = sorted(s.attributes["otel_tokens.stream.end"] for s in telemetry.finished())
    assert ends == ["abandoned", "closed", "exhausted", "exited"]
    assert entry.state.current_estimate is None and entry.state.turn_count == 4


# -- transparency and include_usage ------------------------------------------------------
def test_proxy_is_transparent(telemetry):
    import openai

    stream, _, _ = stream_call()
    assert isinstance(stream, openai.Stream)  # wrapt proxies pass isinstance
    assert stream.response.status_code == 200  # attributes pass through
    # iter() gives what the original's gives (a generator over the same stream), unread
    assert type(iter(stream)) is type(iter(stream.__wrapped__))
    list(stream)


def test_include_usage_injection_is_invisible(telemetry, monkeypatch):
    it = recorded(STREAM)
    events = it.sse_events()
    assert events[-1]["usage"] and not events[-1]["choices"]  # a usage-only last chunk
    # the same recorded traffic, but as if the caller had not asked for usage
    monkeypatch.setenv("OTEL_TOKENS_OPENAI_INCLUDE_USAGE", "true")
    otel_tokens.settings.reload()
    client, replay = openai_client([it])
    body = {k: v for k, v in it.request_body.items() if k != "stream_options"}
    chunks = list(client.chat.completions.create(**body))
    assert replay.sent_json()["stream_options"] == {"include_usage": True}  # we asked for it
    assert len(chunks) == len(events) - 1  # ... and hid the usage-only chunk
    assert all(chunk.choices for chunk in chunks)  # caller code reading choices[0] works
    usage = events[-1]["usage"]
    span = only_span(telemetry)
    assert span.attributes["gen_ai.usage.input_tokens"] == usage["prompt_tokens"]
    assert span.attributes["otel_tokens.usage.source"] == "reported"


def test_callers_own_include_usage_is_left_alone(telemetry, monkeypatch):
    monkeypatch.setenv("OTEL_TOKENS_OPENAI_INCLUDE_USAGE", "true")
    otel_tokens.settings.reload()
    it = recorded(STREAM_WITH_USAGE)
    client, replay = openai_client([it])
    client = client.with_options(base_url=it.uri.rsplit("/chat/completions", 1)[0])
    chunks = list(client.chat.completions.create(**it.request_body))
    assert len(chunks) == len(it.sse_events())  # the caller asked: nothing hidden


def test_no_injection_without_opt_in(telemetry):
    stream, _, replay = stream_call(STREAM_WITHOUT_USAGE)
    list(stream)
    assert "stream_options" not in replay.sent_json()
    span = only_span(telemetry)
    assert span.attributes["otel_tokens.usage.source"] == "estimated"  # output from the text
    assert span.attributes["gen_ai.usage.output_tokens"] > 0
    assert telemetry.errors() == {}  # a stream without usage is normal, not a fault


# -- raw responses, Azure ----------------------------------------------------------------
def test_with_raw_response(telemetry):
    it = recorded(PLAIN)
    client, _ = openai_client([it])
    raw = client.chat.completions.with_raw_response.create(**it.request_body)
    completion = raw.parse()
    assert completion.usage.prompt_tokens == only_span(telemetry).attributes["gen_ai.usage.input_tokens"]


def test_azure_client(telemetry):
    it = recorded(PLAIN)
    client, replay = openai_client([it], azure=True)
    client.chat.completions.create(**it.request_body)
    span = only_span(telemetry)
    assert span.attributes["gen_ai.provider.name"] == "azure.ai.openai"
    assert span.attributes["server.address"] == "example-resource.openai.azure.com"


def test_server_address_follows_a_changed_base_url(telemetry):
    """server.address/port are cached per base URL object: a client given a new base URL
    reports the new server at once, the old one stays right for clients that keep it."""
    first, second = recorded(PLAIN), recorded(PLAIN)
    client, _ = openai_client([first, second])
    client.chat.completions.create(**first.request_body)
    client.base_url = "http://proxy.internal:8081/v1"
    client.chat.completions.create(**second.request_body)
    spans = telemetry.finished()
    assert [(s.attributes["server.address"], s.attributes["server.port"]) for s in spans] == [
        ("api.openai.com", 443), ("proxy.internal", 8081)
    ]


# -- patch identity ----------------------------------------------------------------------
def test_uninstall_restores_originals_and_install_is_idempotent():
    from openai.resources.chat.completions import AsyncCompletions, Completions
    from openai.resources.embeddings import Embeddings

    originals = (vars(Completions)["create"], vars(AsyncCompletions)["create"],
                 vars(Embeddings)["create"])  # fmt: skip
    openai_sdk.install()
    openai_sdk.install()
    wrapped = vars(Completions)["create"]
    assert wrapped is not originals[0] and wrapped.__wrapped__ is originals[0]  # wrapped once
    openai_sdk.uninstall()
    assert (vars(Completions)["create"], vars(AsyncCompletions)["create"],
            vars(Embeddings)["create"]) == originals  # fmt: skip
    assert vars(Completions)["create"] is originals[0]


# -- concurrency -------------------------------------------------------------------------
def test_threads_and_tasks_one_span_per_call_exact_totals(telemetry):
    it = recorded(PLAIN)
    usage = it.response_json()["usage"]
    per_thread, threads_n, tasks_n = 25, 8, 200

    def thread_work():
        client, _ = openai_client([it] * per_thread)
        with otel_tokens.agent("busy"):  # threads do not inherit a binding: bind here
            for _ in range(per_thread):
                client.chat.completions.create(**it.request_body)

    with otel_tokens.agent("busy") as entry:
        threads = [threading.Thread(target=thread_work) for _ in range(threads_n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

        async def tasks():
            client, _ = openai_client([it] * tasks_n, is_async=True)
            await asyncio.gather(*(client.chat.completions.create(**it.request_body)
                                   for _ in range(tasks_n)))  # fmt: skip

        asyncio.run(tasks())
    calls = threads_n * per_thread + tasks_n
    spans = telemetry.finished()
    assert len(spans) == calls
    assert len({s.context.span_id for s in spans}) == calls
    totals = entry.ledger.cumulative
    assert totals.requests == calls
    assert totals.input_tokens == calls * usage["prompt_tokens"]
    assert totals.output_tokens == calls * usage["completion_tokens"]
    assert entry.state.turn_count == calls


# -- a chat stream read where its chunks are made, as read in the proxy ---------------------
_READ = ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "otel_tokens.usage.source",
         "gen_ai.response.finish_reasons", "gen_ai.response.model", "gen_ai.response.id",
         "otel_tokens.stream.end")  # fmt: skip


def _read_by(name: str | cassettes.Interaction, how: str, made: bool, monkeypatch) -> dict:
    """What a stream's span says, its chunks read where made (``made``) or in the proxy;
    ``held``: the most decoded chunks kept unread at once while the caller read them."""
    from otel_tokens.capture.sent import SentStream

    with monkeypatch.context() as m:
        if not made:
            m.setattr(openai_sdk.ChatAccumulator, "reads_made", False)
            m.setattr(openai_sdk.ChatAccumulator, "reader", SentStream.reader)
        with handling(openai_sdk) as t:
            plain, _ = openai_client([recorded(PLAIN)])
            plain.chat.completions.create(**recorded(PLAIN).request_body)  # the hook, loaded
            held, chunks = [], []
            if how == "async":
                async def drain():
                    stream = await stream_call(name, is_async=True)[0]
                    assert stream._self_observer.made is made
                    async for chunk in stream:
                        chunks.append(chunk)
                        held.append(len(stream._self_observer.acc.made_data))

                asyncio.run(drain())
            else:
                stream, _, _ = stream_call(name)
                assert stream._self_observer.made is made
                source = iter(stream) if how == "loop" else stream  # a loop's generator, or next()
                while (chunk := next(source, None)) is not None:
                    chunks.append(chunk)
                    held.append(len(stream._self_observer.acc.made_data))
            span = t.finished()[-1]
    assert chunks
    return ({key: span.attributes.get(key) for key in _READ}
            | {"chunks": len(chunks), "texts": [_said(c) for c in chunks], "held": max(held)})


def _said(chunk) -> list:
    """What a chunk object says to its caller: each choice's text, tool-call arguments and
    finish reason, and its usage."""
    usage = chunk.usage.completion_tokens if chunk.usage is not None else None
    return [(c.delta.content, [t.function.arguments for t in c.delta.tool_calls or ()],
             c.finish_reason) for c in chunk.choices] + [usage]


def _lengthened(name: str, times: int, running_usage: bool = False) -> cassettes.Interaction:
    """A recorded chat stream, longer: its middle chunks (after the first, before those with
    a finish reason or usage) repeated ``times`` times, the real chunk shapes kept;
    ``running_usage``: each middle chunk carries the final usage too (as vLLM's
    ``continuous_usage_stats`` sends)."""
    it = recorded(name)
    events = it.sse_events()
    end = next(i for i, e in enumerate(events)
               if e.get("usage") or any(c.get("finish_reason") for c in e["choices"]))
    middle = events[1:end] * times
    if running_usage:
        usage = next((e["usage"] for e in events if e.get("usage")), None)
        middle = [{**e, "usage": usage} for e in middle]
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events[:1] + middle + events[end:])
    return dataclasses.replace(it, response_text=body + "data: [DONE]\n\n")


@pytest.mark.parametrize("how", ["loop", "next", "async"])
@pytest.mark.parametrize("name", [STREAM, STREAM_WITHOUT_USAGE])
def test_chunks_read_where_made_say_what_the_proxy_reads(name, how, monkeypatch):
    """A chat stream's chunks read from their decoded events, where the client makes them,
    give the span the proxy's reading of the chunk objects gives (usage, the output
    estimated from the text when none came, finish reasons, model, id, ending)."""
    cassettes.require()
    made, by_proxy = (_read_by(name, how, m, monkeypatch) for m in (True, False))
    assert made.pop("held") >= 1 and by_proxy.pop("held") == 0  # (read at the end)
    assert made == by_proxy
    assert made["gen_ai.usage.output_tokens"] and made["gen_ai.response.finish_reasons"]


TOOL_STREAM = "openai-openllmetry/test_functions__test_open_ai_function_calls_tools_streaming_parallel.yaml"


@pytest.mark.parametrize("how", ["loop", "next", "async"])
@pytest.mark.parametrize("name,running", [(STREAM, False), (STREAM_WITHOUT_USAGE, False),
                                          (TOOL_STREAM, False), (STREAM, True)])  # fmt: skip
def test_long_streams_read_where_made_in_batches(name, running, how, monkeypatch):
    """A stream of hundreds of chunks (recorded chunks repeated; tool calls; usage in every
    chunk) read where its chunks are made gives the span the proxy's reading gives, and the
    caller the same chunks; at most ``BATCH`` + 1 decoded chunks are kept unread at a time."""
    from otel_tokens.capture.stream import BATCH

    cassettes.require()
    long = _lengthened(name, 40, running_usage=running)
    made = _read_by(long, how, True, monkeypatch)
    by_proxy = _read_by(long, how, False, monkeypatch)
    assert made["chunks"] > 3 * BATCH
    assert made.pop("held") <= BATCH + 1 and by_proxy.pop("held") == 0  # (+ the first)
    assert made == by_proxy
    assert made["gen_ai.usage.output_tokens"] and made["gen_ai.response.finish_reasons"]
