"""OpenAI batch output files read through the real ``openai`` client (``files.content``,
``retrieve_content``, sync and async): each billed row one call at batch prices, under the
agent that reads the file, never twice when read again; failed rows not billed."""

from __future__ import annotations

import asyncio
import json

import genai_prices
import openai
import pytest

import otel_tokens
from otel_tokens.account.anomalies import Budget

from .conftest import spans
from .server import chat_line, embedding_line, error_line, failed_line, response_line

ROWS = [
    chat_line(1, "gpt-4o-mini", 1200, 80, cached=1024),
    failed_line(2),
    embedding_line(3, "text-embedding-3-small", 42),
    error_line(4),
    chat_line(5, "gpt-4o-mini", 30, 7),
]


def batch_price(model: str, **tokens: int) -> float:
    """The row's cost, at genai-prices' batch price variant."""
    usage = genai_prices.Usage(**tokens)
    return float(
        genai_prices.calc_price(
            usage, model, provider_id="openai", price_context={"processing": "batch"}
        ).total_price
    )


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key="sk-test", max_retries=0)


def assert_rows(t, agent: str) -> None:
    chat1, embed, chat5 = spans(t)
    assert (chat1["gen_ai.usage.input_tokens"], chat1["gen_ai.usage.output_tokens"]) == (1200, 80)
    assert chat1["gen_ai.response.id"] == "chatcmpl-B1" and chat1["gen_ai.operation.name"] == "chat"
    assert (
        chat1["gen_ai.response.model"] == "gpt-4o-mini"
        and chat1["gen_ai.provider.name"] == "openai"
    )
    assert chat1["otel_tokens.cost.usd"] == pytest.approx(
        batch_price("gpt-4o-mini", input_tokens=1200, cache_read_tokens=1024, output_tokens=80),
        rel=1e-9,
    )
    assert chat1["otel_tokens.cost.usd"] < float(
        genai_prices.calc_price(
            genai_prices.Usage(input_tokens=1200, cache_read_tokens=1024, output_tokens=80),
            "gpt-4o-mini",
            provider_id="openai",
        ).total_price
    )  # the batch discount, not the list price
    assert chat1["otel_tokens.cost.components"] == ("processing=batch",)
    assert embed["otel_tokens.cost.unpriced"] == ("processing=batch",)  # no batch price: list price
    assert embed["gen_ai.operation.name"] == "embeddings"
    assert embed["gen_ai.usage.input_tokens"] == 42 and embed["gen_ai.response.id"] == "batch_req_3"
    assert embed["otel_tokens.cost.usd"] == pytest.approx(
        batch_price("text-embedding-3-small", input_tokens=42), rel=1e-9
    )
    assert chat5["otel_tokens.cost.usd"] == pytest.approx(
        batch_price("gpt-4o-mini", input_tokens=30, output_tokens=7), rel=1e-9
    )
    assert {s["gen_ai.agent.name"] for s in (chat1, embed, chat5)} == {agent}
    inputs = [
        p.value
        for p in t.points("otel_tokens.tokens")
        if p.attributes["gen_ai.token.type"] == "input"
    ]
    assert sorted(inputs) == [42, 1200 + 30]  # by operation: chat, embeddings


def test_output_file_rows_are_billed_at_batch_prices_under_the_reader(telemetry, server, named):
    server.output_file("file-out1", ROWS)
    with otel_tokens.agent("nightly") as entry:
        content = client(server.openai_url).files.content("file-out1")
    assert content.text.splitlines()[1].startswith('{"id": "batch_req_2"')  # the caller's bytes
    assert_rows(telemetry, "nightly")
    assert [r.request_id for r in entry.ledger.history()] == [
        "chatcmpl-B1",
        "batch_req_3",
        "chatcmpl-B5",
    ]
    assert telemetry.errors() == {} and telemetry.points("otel_tokens.usage.missing") == []


def test_read_again_in_the_same_process_is_not_counted_twice(telemetry, server, named):
    server.output_file("file-out2", ROWS)
    openai_client = client(server.openai_url)
    with otel_tokens.agent("cron") as entry:
        first = openai_client.files.content("file-out2").read()
        second = openai_client.files.content("file-out2").read()
        with pytest.warns(DeprecationWarning):  # the SDK says so; it still reads the file
            text = openai_client.files.retrieve_content("file-out2")
    assert first == second == text.encode()
    assert len(spans(telemetry)) == 3 and len(entry.ledger.history()) == 3
    assert entry.ledger.cumulative.input_tokens == 1200 + 42 + 30


def test_async_and_raw_response(telemetry, server, named):
    server.output_file("file-out3", ROWS)

    async def read() -> bytes:
        async_client = openai.AsyncOpenAI(base_url=server.openai_url, api_key="sk-test")
        with otel_tokens.agent("async-reader"):
            content = await async_client.files.content("file-out3")
        return content.read()

    assert asyncio.run(read()).count(b"\n") == len(ROWS)
    assert_rows(telemetry, "async-reader")
    server.output_file("file-out4", [response_line(6, "gpt-4.1-mini", 500, 60, reasoning=0)])
    raw = client(server.openai_url).files.with_raw_response.content("file-out4")
    assert raw.http_response.status_code == 200
    answer = spans(telemetry)[3]
    assert (answer["gen_ai.usage.input_tokens"], answer["gen_ai.response.id"]) == (500, "resp_6")
    assert answer["otel_tokens.cost.usd"] == pytest.approx(
        batch_price("gpt-4.1-mini", input_tokens=500, output_tokens=60), rel=1e-9
    )


def test_only_an_output_file_is_read_for_rows(telemetry, server, named):
    request = {
        "custom_id": "request-1",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]},
    }
    server.output_file("file-in", [request])
    server.files["/oa/v1/files/file-img/content"] = ("image/png", b"\x89PNG\r\n\x1a\n" + bytes(64))
    openai_client = client(server.openai_url)
    assert openai_client.files.content("file-in").json() == request
    assert openai_client.files.content("file-img").read().startswith(b"\x89PNG")
    server.output_file("file-out5", [chat_line(7, "gpt-4o-mini", 70, 7)])
    openai_client.files.content("file-out5")
    assert [s["gen_ai.response.id"] for s in spans(telemetry)] == ["chatcmpl-B7"]  # this one only
    assert telemetry.errors() == {}


def test_a_file_read_whole_is_remembered_beyond_the_response_ids_kept(
    telemetry, server, named, monkeypatch
):
    """The process keeps a bounded number of response ids; a file read whole is remembered by
    its id, so reading a file of more rows than that again counts nothing either."""
    monkeypatch.setattr("otel_tokens.account.settle._ONCE_KEYS_MAX", 2)
    server.output_file("file-big", [chat_line(n, "gpt-4o-mini", n, 1) for n in range(20, 25)])
    openai_client = client(server.openai_url)
    for _ in range(3):
        openai_client.files.content("file-big")
    assert [s["gen_ai.usage.input_tokens"] for s in spans(telemetry)] == [20, 21, 22, 23, 24]


def test_rows_over_an_enforced_budget_are_still_recorded(telemetry, server, named):
    """A batch's rows were billed already: an enforced budget spent by the first one does not
    drop the next (nothing to refuse), and the budget counts them all."""
    telemetry.handler.guard.set_budget("thrifty", Budget(tokens=100, enforce=True))
    server.output_file("file-over", [chat_line(n, "gpt-4o-mini", 100, 10) for n in (60, 61)])
    with otel_tokens.agent("thrifty") as entry:
        client(server.openai_url).files.content("file-over")
    assert [s["gen_ai.response.id"] for s in spans(telemetry)] == ["chatcmpl-B60", "chatcmpl-B61"]
    assert entry.ledger.cumulative.input_tokens == 200
    with pytest.raises(otel_tokens.BudgetExceeded), otel_tokens.agent("thrifty"):
        otel_tokens.start_call(operation="chat", provider="openai", request_model="gpt-4o-mini")


def test_a_streamed_output_file_is_recorded_as_the_caller_reads_it(telemetry, server, named):
    server.output_file("file-stream", ROWS, gzipped=True)
    with otel_tokens.agent("streamer"):
        with client(server.openai_url).files.with_streaming_response.content("file-stream") as got:
            assert spans(telemetry) == []  # nothing read yet: nothing recorded
            lines = list(got.iter_lines())
    assert [json.loads(line)["custom_id"] for line in lines] == [r["custom_id"] for r in ROWS]
    assert_rows(telemetry, "streamer")


def test_a_streamed_output_file_async(telemetry, server, named):
    server.output_file("file-astream", ROWS)

    async def read() -> bytes:
        async_client = openai.AsyncOpenAI(base_url=server.openai_url, api_key="sk-test")
        with otel_tokens.agent("async-streamer"):
            async with async_client.files.with_streaming_response.content("file-astream") as got:
                return b"".join([chunk async for chunk in got.iter_bytes()])

    assert asyncio.run(read()).count(b"\n") == len(ROWS)
    assert_rows(telemetry, "async-streamer")
