"""Anthropic Message Batches results read through the real ``anthropic`` client
(``messages.batches.results``, beta too, sync and async): each succeeded row one call at batch
prices, recorded as the caller's iteration reaches it, under the agent that reads it, never
twice when read again; errored, canceled and expired rows not billed."""

from __future__ import annotations

import asyncio

import anthropic
import genai_prices
import openai
import pytest

import otel_tokens
from otel_tokens.capture.sdk import anthropic_patches
from otel_tokens.capture.http import http_patches
from otel_tokens.capture.sdk import openai_patches

from ..telemetry.conftest import handling
from .conftest import spans
from .server import chat_line, ended, errored, succeeded

ROWS = [
    succeeded(1, "claude-haiku-4-5", 900, 120, read=2000, write=300),
    errored(2),
    ended(3, "canceled"),
    succeeded(4, "claude-haiku-4-5", 40, 9),
    ended(5, "expired"),
]


def batch_price(**tokens: int) -> float:
    usage = genai_prices.Usage(**tokens)
    return float(
        genai_prices.calc_price(
            usage,
            "claude-haiku-4-5",
            provider_id="anthropic",
            price_context={"processing": "batch"},
        ).total_price
    )


def client(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=0)


def assert_rows(t, agent: str) -> None:
    first, second = spans(t)
    assert first["gen_ai.usage.input_tokens"] == 900 + 2000 + 300  # cache classes included
    assert (first["gen_ai.usage.output_tokens"], first["gen_ai.response.id"]) == (120, "msg_01")
    assert first["gen_ai.provider.name"] == "anthropic" and first["gen_ai.operation.name"] == "chat"
    assert first["otel_tokens.cost.usd"] == pytest.approx(
        batch_price(
            input_tokens=900 + 2000 + 300,
            cache_read_tokens=2000,
            cache_write_tokens=300,
            output_tokens=120,
        ),
        rel=1e-9,
    )
    assert first["otel_tokens.cost.usd"] < float(
        genai_prices.calc_price(
            genai_prices.Usage(
                input_tokens=3200, cache_read_tokens=2000, cache_write_tokens=300, output_tokens=120
            ),
            "claude-haiku-4-5",
            provider_id="anthropic",
        ).total_price
    )
    assert second["otel_tokens.cost.usd"] == pytest.approx(
        batch_price(input_tokens=40, output_tokens=9), rel=1e-9
    )
    assert {s["gen_ai.agent.name"] for s in (first, second)} == {agent}


def test_succeeded_rows_are_billed_at_batch_prices_as_the_caller_reads(telemetry, server, named):
    server.batch("msgbatch_1", ROWS)
    with otel_tokens.agent("reviewer") as entry:
        results = client(server.anthropic_url).messages.batches.results("msgbatch_1")
        assert spans(telemetry) == []  # nothing read yet: nothing recorded
        first = next(results)
        assert first.custom_id == "request-1" and len(spans(telemetry)) == 1  # lazily, row by row
        rest = list(results)
    assert [r.result.type for r in rest] == ["errored", "canceled", "succeeded", "expired"]
    assert type(results).__name__ == "JSONLDecoder"  # the SDK's own decoder, handed back
    assert_rows(telemetry, "reviewer")
    assert [r.request_id for r in entry.ledger.history()] == ["msg_01", "msg_04"]
    assert telemetry.errors() == {} and telemetry.points("otel_tokens.usage.missing") == []


def test_read_again_is_not_counted_twice_whole_or_in_part(telemetry, server, named):
    server.batch("msgbatch_2", [succeeded(n, "claude-haiku-4-5", 10 * n, n) for n in range(6, 9)])
    messages = client(server.anthropic_url).messages
    with otel_tokens.agent("cron") as entry:
        partly = messages.batches.results("msgbatch_2")
        next(partly)  # one row read, then dropped
        assert len(spans(telemetry)) == 1
        assert len(list(messages.batches.results("msgbatch_2"))) == 3  # the rest, once
        assert len(list(messages.batches.results("msgbatch_2"))) == 3  # read whole again: none
        assert (
            len(list(client(server.anthropic_url).beta.messages.batches.results("msgbatch_2"))) == 3
        )
    assert [s["gen_ai.usage.input_tokens"] for s in spans(telemetry)] == [60, 70, 80]
    assert entry.ledger.cumulative.input_tokens == 60 + 70 + 80


def test_async_and_beta(telemetry, server, named):
    server.batch("msgbatch_3", ROWS)

    async def read() -> list:
        async_client = anthropic.AsyncAnthropic(base_url=server.anthropic_url, api_key="k")
        with otel_tokens.agent("async-reader"):
            results = await async_client.beta.messages.batches.results("msgbatch_3")
            return [row.custom_id async for row in results]

    assert asyncio.run(read()) == [f"request-{n}" for n in range(1, 6)]
    assert_rows(telemetry, "async-reader")


def test_results_read_whole_are_remembered_beyond_the_response_ids_kept(
    telemetry, server, named, monkeypatch
):
    monkeypatch.setattr("otel_tokens.account.settle._ONCE_KEYS_MAX", 2)
    server.batch("msgbatch_big", [succeeded(n, "claude-haiku-4-5", n, 1) for n in range(30, 35)])
    batches = client(server.anthropic_url).messages.batches
    for _ in range(3):
        assert len(list(batches.results("msgbatch_big"))) == 5
    assert [s["gen_ai.usage.input_tokens"] for s in spans(telemetry)] == [30, 31, 32, 33, 34]


def test_no_other_capture_records_a_row(server, named):
    """With the HTTP layer installed too, each billed row is one call: the output file and
    the results are GET requests no other capture records."""
    server.batch("msgbatch_4", ROWS)
    server.output_file("file-both", [chat_line(40, "gpt-4o-mini", 400, 4)])
    with handling(http_patches, openai_patches, anthropic_patches) as t:
        assert len(list(client(server.anthropic_url).messages.batches.results("msgbatch_4"))) == 5
        openai.OpenAI(base_url=server.openai_url, api_key="k").files.content("file-both")
    assert [s["gen_ai.response.id"] for s in spans(t)] == ["msg_01", "msg_04", "chatcmpl-B40"]
