"""``otel-tokens report`` says how much of each total is estimated: an OpenAI stream that
reported no usage is recorded as an estimate (``usage.source=estimated`` in the ledger row),
and the report's totals, per agent, per model and per user show that share beside the
figures they are part of. Recorded through the real openai client."""

from __future__ import annotations

import json
import sqlite3

import pytest

import otel_tokens
from otel_tokens.capture.sdk import openai as openai_sdk

from .. import cassettes
from ..sdk.replay import openai_client
from ..sdk.test_full_bill import OPENAI, chat, served
from ..telemetry.conftest import handling
from .conftest import clean_env
from .conftest import otel_tokens as run_cli


def stream_without_usage(model: str = "gpt-4o-mini") -> cassettes.Interaction:
    """A chat stream whose backend sends no usage chunk (no ``include_usage``)."""
    chunks = [{"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1, "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
              for delta, finish in (({"role": "assistant", "content": "Hello there, "}, None),
                                    ({"content": "how can I help?"}, None), ({}, "stop"))]  # fmt: skip
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return cassettes.Interaction("documented", 0, "POST", OPENAI, None, 200,
                                 {"content-type": ["text/event-stream"]}, body)  # fmt: skip


@pytest.fixture
def ledger(monkeypatch, tmp_path):
    db = tmp_path / "share.db"
    monkeypatch.setenv("OTEL_TOKENS_LEDGER_PATH", str(db))
    otel_tokens.settings.reload()
    with handling(openai_sdk):
        reported = served(chat("gpt-4o-mini", "default", 100, 10), chat("gpt-4o-mini", "default", 200, 20))
        client, _ = openai_client([reported[0], stream_without_usage(), reported[1]])
        ask = [{"role": "user", "content": "Say hello to the operator, please."}]
        with otel_tokens.agent("share-bot", user="u-1"):
            client.chat.completions.create(model="gpt-4o-mini", messages=ask)
            for _ in client.chat.completions.create(model="gpt-4o-mini", messages=ask, stream=True):
                pass
        with otel_tokens.agent("share-bot", user="u-2"):
            client.chat.completions.create(model="gpt-4o-mini", messages=ask)
        otel_tokens.account.agents.get_agent("share-bot").ledger.flush()
    return db


def estimated_row(db) -> tuple[int, float | None]:
    """(tokens, cost) of the one row the ledger holds as an estimate."""
    conn = sqlite3.connect(db)
    try:
        (row,) = conn.execute("SELECT input_tokens + output_tokens, cost_usd FROM otel_tokens_requests "
                              "WHERE source = 'estimated'").fetchall()  # fmt: skip
        return row
    finally:
        conn.close()


def test_json_totals_carry_their_estimated_share(ledger):
    tokens, cost = estimated_row(ledger)
    assert tokens > 0
    data = json.loads(run_cli("report", "--db", str(ledger), "--json").stdout)
    for totals in (data["totals"], data["agents"]["share-bot"], data["models"]["gpt-4o-mini"]):
        assert totals["requests"] == 3 and totals["estimated_requests"] == 1
    for totals in (data["totals"], data["agents"]["share-bot"]):
        assert totals["estimated_tokens"] == tokens and totals["total_tokens"] == 330 + tokens
        assert totals["estimated_cost_usd"] == pytest.approx(cost)
    users = json.loads(run_cli("report", "--db", str(ledger), "--by", "user", "--json").stdout)["groups"]
    assert (users["u-1"]["estimated_tokens"], users["u-2"]["estimated_tokens"]) == (tokens, 0)


def test_tables_show_the_estimated_share_beside_each_total(ledger):
    tokens, _ = estimated_row(ledger)
    text = run_cli("report", "--db", str(ledger), env=clean_env(COLUMNS="80")).stdout
    said = " ".join(text.split())
    assert f"; of which estimated (no usage reported): 1 requests, {tokens:,} tokens" in said
    (row,) = [line.split() for line in text.splitlines() if line.strip().startswith("share-bot")
              and len(line.split()) == 6]  # the cost table: agent, cost, premium, estimated x3
    assert row[3:5] == ["1", f"{tokens:,}"]
    by_user = run_cli("report", "--db", str(ledger), "--by", "user", env=clean_env(COLUMNS="80")).stdout
    (u1,) = [line.split() for line in by_user.splitlines() if line.strip().startswith("u-1")]
    assert u1[-1] == f"{tokens:,}"
