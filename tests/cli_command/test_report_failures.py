"""``otel-tokens report`` tells failures from usage: a failed call (HTTP 429, 5xx) is counted
as a failure with its error type, never as a request whose usage is unpriced or estimated; the
``include_usage`` advice is given only for successful calls that reported no usage; the
figures agree with the demo's; ``--json`` costs carry no float noise. The ledgers are written
by real calls: the real openai client against a local server, and the demo itself."""

from __future__ import annotations

import json
import sqlite3
from decimal import Decimal
from pathlib import Path

import pytest

import otel_tokens
from otel_tokens.capture.sdk import openai as openai_sdk

from ..http_layer.wire_server import openai_answer, sse
from ..local_server import LocalServer
from ..providers.hosts import chat_events
from ..telemetry.conftest import handling
from .conftest import clean_env
from .conftest import otel_tokens as run_cli

#: the subprocess imports the otel_tokens this test imports (a worktree's, not the install's)
ENV = clean_env(COLUMNS="80", PYTHONPATH=str(Path(otel_tokens.__file__).parents[1]))
ASK = [{"role": "user", "content": "Say hello to the operator, please."}]


def error(status: int, kind: str) -> tuple:
    body = {"error": {"message": f"{kind} (test)", "type": kind, "code": kind}}
    return status, "application/json", json.dumps(body).encode(), {}


def stream_without_usage(path: str, body: dict) -> tuple:
    """A chat stream that reports no usage (no ``include_usage``): its tokens are estimated."""
    events = chat_events(body["model"], None, "usage")
    events = [e for e in events if e == "[DONE]" or e.get("choices")]  # no usage chunk
    return 200, "text/event-stream", sse(events), {}


@pytest.fixture
def ledger(monkeypatch, tmp_path, provider_urls):
    """Two successes, a 429, a 500, a 503 and a stream without usage, through the real client."""
    answers = [lambda p, b: openai_answer(p, b), lambda p, b: error(429, "rate_limit_exceeded"),
               lambda p, b: error(500, "server_error"), stream_without_usage,
               lambda p, b: error(503, "overloaded"), lambda p, b: openai_answer(p, b)]  # fmt: skip
    server = LocalServer(lambda path, body: answers.pop(0)(path, body))
    db = tmp_path / "failures.db"
    monkeypatch.setenv("OTEL_TOKENS_LEDGER_PATH", str(db))
    provider_urls(server.url, "openai")
    import openai

    client = openai.OpenAI(api_key="test", base_url=f"{server.url}/v1", max_retries=0)
    try:
        with handling(openai_sdk), otel_tokens.agent("fail-bot", user="u-1"):
            for stream in (False, False, False, True, False, False):
                try:
                    answer = client.chat.completions.create(model="gpt-4o-mini", messages=ASK,
                                                            stream=stream)  # fmt: skip
                    for _ in answer if stream else ():
                        pass
                except openai.APIStatusError:
                    pass
            otel_tokens.account.agents.get_agent("fail-bot").ledger.flush()
    finally:
        server.close()
    assert not answers
    return db


def report_json(db: Path, *args: str) -> dict:
    proc = run_cli("report", "--db", str(db), "--json", *args, env=ENV)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_failed_calls_are_failures_with_their_error_type(ledger):
    data = report_json(ledger)
    for totals in (data["totals"], data["agents"]["fail-bot"]):
        assert (totals["requests"], totals["failed"], totals["estimated_requests"]) == (3, 3, 1)
    assert {(f["agent"], f["model"], f["error_type"], f["calls"]) for f in data["failures"]} == {
        ("fail-bot", "gpt-4o-mini", "openai.RateLimitError", 1),
        ("fail-bot", "gpt-4o-mini", "openai.InternalServerError", 2),  # 500 and 503
    }
    (model,) = data["models"].values()  # no model row for the failures ("-", unpriced)
    assert (model["requests"], model["estimated_requests"], model["unpriced_requests"]) == (3, 1, 0)
    users = report_json(ledger, "--by", "user")["groups"]
    assert (users["u-1"]["requests"], users["u-1"]["failed"]) == (3, 3)


def test_tables_show_failures_apart_and_advice_where_it_applies(ledger):
    proc = run_cli("report", "--db", str(ledger), env=ENV)
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert "3 requests, 3 failed" in text
    assert "failed calls (not counted as requests)" in text
    assert "openai.RateLimitError 1" in text and "openai.InternalServerError 2" in text
    assert "unpriced" not in text
    # the stream that reported no usage succeeded: one estimated request, with its advice
    assert "of which estimated (no usage reported): 1 requests" in text
    assert "usage missing, recorded as estimates: gpt-4o-mini 1 requests" in text
    assert "include_usage" in text


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, dict]:
    """The demo's ledger, and the per-agent figures the demo printed for it."""
    db = tmp_path_factory.mktemp("demo") / "demo.db"
    proc = run_cli("demo", "--delay", "0", "--json", "--ledger", str(db), env=ENV)
    assert proc.returncode == 0, proc.stderr
    return db, json.JSONDecoder().raw_decode(proc.stdout[proc.stdout.index("{\n"):])[0]["agents"]


def test_demo_and_report_agree_and_a_429_is_no_usage_advice(demo):
    db, shown = demo
    data = report_json(db)
    for agent, figures in shown.items():
        got = data["agents"][agent]
        assert (got["requests"], got["failed"]) == (figures["requests"], figures["failed"]), agent
    assert data["totals"]["failed"] == 1 and data["totals"]["estimated_requests"] == 0
    failed = [(f["agent"], f["error_type"]) for f in data["failures"]]
    assert failed == [("planner", "openai.RateLimitError")]
    text = " ".join(run_cli("report", "--db", str(db), env=ENV).stdout.split())
    for wrong in ("estimated (no usage reported)", "unpriced", "include_usage", "usage missing"):
        assert wrong not in text
    assert "7 requests, 1 failed" in text


def usd_amounts(value, money: bool = False):
    """Every amount under a ``cost`` key of the report's JSON."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from usd_amounts(v, money or "cost" in k)
    elif isinstance(value, list):
        for v in value:
            yield from usd_amounts(v, money)
    elif money and isinstance(value, float):
        yield value


def test_json_costs_are_exact(demo):
    db, _ = demo
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT cost_usd FROM otel_tokens_requests WHERE cost_usd IS NOT NULL")
    costs = [cost for (cost,) in rows]
    conn.close()
    exact = sum(Decimal(repr(c)) for c in costs).quantize(Decimal("1e-10")).normalize()
    data = report_json(db)
    assert Decimal(repr(data["totals"]["cost_usd"])) == exact
    amounts = list(usd_amounts(data))
    assert len(amounts) > 20
    for amount in amounts:  # each as short as the amount: at most 10 decimals, no 0.0...0002
        assert -Decimal(repr(amount)).as_tuple().exponent <= 10, amount


def test_a_ledger_before_error_types_counts_token_less_rows_as_failures(ledger):
    conn = sqlite3.connect(ledger)  # the same rows as a schema-2 file holds them
    if "error_type" in [c[1] for c in conn.execute("PRAGMA table_info(otel_tokens_requests)")]:
        conn.execute("ALTER TABLE otel_tokens_requests DROP COLUMN error_type")
    conn.execute("UPDATE otel_tokens_meta SET value='2' WHERE key='schema_version'")
    conn.commit()
    conn.close()
    data = report_json(ledger)
    assert (data["totals"]["requests"], data["totals"]["failed"]) == (3, 3)
    failed = [(f["error_type"], f["calls"]) for f in data["failures"]]
    assert failed == [("(error type not recorded)", 3)]
    text = " ".join(run_cli("report", "--db", str(ledger), env=ENV).stdout.split())
    assert "does not record error types" in text and "unpriced" not in text
