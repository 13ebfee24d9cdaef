"""The fleet ledger records a failed call's error type (schema version 3), on a real
PostgreSQL: a database at version 2 with rows is migrated in place by the first connection;
a 429 and a 500 answered to the real openai client are failures with their error type in
``otel-tokens report --db postgresql://...`` (text and ``--json``), the rows an older release
wrote still "(error type not recorded)"; an error type holding a NUL, a lone surrogate or
10 kB is stored escaped and bounded, and the ledger keeps writing."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

import otel_tokens
from otel_tokens.capture.sdk import openai as openai_sdk

from ..http_layer.wire_server import openai_answer
from ..local_server import LocalServer
from ..telemetry.conftest import handling
from .test_ledger import fleet_env

psycopg = pytest.importorskip("psycopg")

ASK = [{"role": "user", "content": "Say hello to the operator, please."}]
#: rows as a release before schema 3 wrote them: a success, and a failed call (no tokens)
_OLD_ROWS = (
    "INSERT INTO otel_tokens_requests (row_id, ledger, request_id, ts, model, source, "
    "input_tokens, output_tokens, cost_usd) VALUES "
    "(gen_random_uuid(), 'old-bot', 'ok', 1000.0, 'gpt-4o-mini', 'reported', 10, 2, 0.5), "
    "(gen_random_uuid(), 'old-bot', 'failed', 1001.0, 'gpt-4o-mini', 'estimated', NULL, NULL, "
    "NULL)"
)


def _rows(url: str, query: str) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute(query).fetchall()


def _report(url: str, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "otel_tokens.cli", "report", "--db", url, *args],
                          check=False, capture_output=True, text=True, timeout=60,
                          env=fleet_env(COLUMNS="100"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc


def _failures(url: str) -> tuple[dict, set[tuple]]:
    data = json.loads(_report(url, "--json").stdout)
    return data, {(f["agent"], f["error_type"], f["calls"]) for f in data["failures"]}


def _version_2_database(url: str) -> None:
    """The database a release of schema 2 made (its real steps 1 and 2), with its rows."""
    from otel_tokens.account import pg_schema

    with psycopg.connect(url, autocommit=True) as conn:
        for statement in pg_schema._STEPS[0] + pg_schema._STEPS[1]:
            conn.execute(statement)
        conn.execute("INSERT INTO otel_tokens_meta VALUES ('schema_version', '2')")
        conn.execute(_OLD_ROWS)
        conn.execute(
            "INSERT INTO otel_tokens_budget_reservations (id, scope, key, ts, usd, tokens) "
            "VALUES (gen_random_uuid(), 'tenant', 'acme', 1.0, 8.0, 800)"
        )


def _writer(url: str, folder):  # type: ignore[no-untyped-def]
    from otel_tokens.account.ledger.postgres import FleetWriter
    from otel_tokens.account.ledger.spool import Spool

    return FleetWriter(url, Spool(folder, 10**7), service="t")


def test_a_version_2_database_is_migrated_to_3_its_rows_kept(ledger_db, tmp_path):
    """A report reads the version-2 database as it is (no error type column: its token-less
    row a failure of unknown type); the ledger's first connection migrates it in place: the
    column added, every row and reservation kept, version 3; a failed row written then carries
    its error type, the older rows none."""
    from otel_tokens.account.ledger import UsageLedger
    from otel_tokens.account.pg_schema import SCHEMA_VERSION
    from otel_tokens.usage import Usage

    _version_2_database(ledger_db)
    data, failed = _failures(ledger_db)
    assert failed == {("old-bot", "(error type not recorded)", 1)}
    assert data["totals"]["requests"] == 1

    writer = _writer(ledger_db, tmp_path / "spool")
    ledger = UsageLedger("new-bot", sink=writer)
    failed_call = Usage(model="gpt-4o-mini", source="estimated")
    ledger.append(failed_call, error_type="openai.RateLimitError")
    assert writer.flush(15) and writer.written == 1
    assert SCHEMA_VERSION == 3
    assert _rows(ledger_db, "SELECT value FROM otel_tokens_meta") == [("3",)]
    assert _rows(ledger_db, "SELECT ledger, request_id, error_type FROM otel_tokens_requests "
                            "WHERE ledger='old-bot' ORDER BY ts") == [
        ("old-bot", "ok", None), ("old-bot", "failed", None)]  # fmt: skip
    assert _rows(ledger_db, "SELECT error_type FROM otel_tokens_requests WHERE ledger='new-bot'"
                 ) == [("openai.RateLimitError",)]  # fmt: skip
    reserved = _rows(ledger_db, "SELECT key, usd FROM otel_tokens_budget_reservations")
    assert reserved == [("acme", 8.0)]
    data, failed = _failures(ledger_db)
    assert failed == {("old-bot", "(error type not recorded)", 1),
                      ("new-bot", "openai.RateLimitError", 1)}  # fmt: skip
    assert (data["totals"]["requests"], data["totals"]["failed"]) == (1, 2)


def _call(client, openai) -> None:  # type: ignore[no-untyped-def]
    try:
        client.chat.completions.create(model="gpt-4o-mini", messages=ASK)
    except openai.APIStatusError:
        pass


def _error(status: int, kind: str) -> tuple:
    body = {"error": {"message": f"{kind} (test)", "type": kind, "code": kind}}
    return status, "application/json", json.dumps(body).encode(), {}


def test_failed_calls_through_the_handler_show_their_error_type(
        ledger_db, tmp_path, monkeypatch, provider_urls):  # fmt: skip
    """A success, a 429 and a 500 answered to the real openai client, the fleet ledger on:
    the report (text and --json) counts one request and two failures, each under the error
    type the SQLite ledger's report shows, none "not recorded" nor unpriced."""
    from otel_tokens.account.ledger.postgres import flush_all

    answers = [openai_answer, lambda p, b: _error(429, "rate_limit_exceeded"),
               lambda p, b: _error(500, "server_error")]  # fmt: skip
    server = LocalServer(lambda path, body: answers.pop(0)(path, body))
    monkeypatch.delenv("OTEL_TOKENS_LEDGER_PATH", raising=False)
    monkeypatch.setenv("OTEL_TOKENS_LEDGER_URL", ledger_db)
    monkeypatch.setenv("OTEL_TOKENS_LEDGER_SPOOL", str(tmp_path / "spool"))
    provider_urls(server.url, "openai")  # and the settings read again
    import openai

    client = openai.OpenAI(api_key="test", base_url=f"{server.url}/v1", max_retries=0)
    try:
        with handling(openai_sdk), otel_tokens.agent("fleet-fail-bot"):
            for _ in range(3):
                _call(client, openai)
    finally:
        server.close()
        flush_all(15)
    assert not answers
    data, failed = _failures(ledger_db)
    assert failed == {("fleet-fail-bot", "openai.RateLimitError", 1),
                      ("fleet-fail-bot", "openai.InternalServerError", 1)}  # fmt: skip
    assert (data["totals"]["requests"], data["totals"]["failed"]) == (1, 2)
    assert data["totals"]["estimated_requests"] == 0
    text = " ".join(_report(ledger_db).stdout.split())
    assert "1 requests, 2 failed" in text
    assert "openai.RateLimitError 1" in text and "openai.InternalServerError 1" in text
    for wrong in ("not recorded", "does not record", "unpriced", "estimated (no usage"):
        assert wrong not in text


def test_a_poisoned_error_type_is_stored_cleaned_and_blocks_nothing(ledger_db, tmp_path):
    """Error types holding a NUL, a lone surrogate and 10 kB, between plain rows: every row is
    stored, the first two escaped (read back exactly), the third cut to ERROR_TYPE_MAX; a
    ``ledger_fleet_value`` fault; nothing set aside or spooled; the ledger keeps writing."""
    from otel_tokens import faults
    from otel_tokens.account.ledger import UsageLedger
    from otel_tokens.account.ledger.postgres import ERROR_TYPE_MAX, original_text
    from otel_tokens.usage import Usage

    before = faults.sink().counts.get("ledger_fleet_value", 0)
    writer = _writer(ledger_db, tmp_path / "spool")
    ledger = UsageLedger("a", sink=writer)
    poisons = {"nul": "Rate\x00Limit", "surrogate": "http_\udcff\udcfe", "huge": "E" * 10_000}
    failed = Usage(model="m", source="estimated")
    ledger.append(Usage(input_tokens=5, output_tokens=1, model="m"), request_id="before")
    for name, error_type in poisons.items():
        ledger.append(failed, request_id=name, error_type=error_type)
    ledger.append(Usage(input_tokens=5, output_tokens=1, model="m"), request_id="after")
    assert writer.flush(15)
    stored = dict(_rows(ledger_db, "SELECT request_id, error_type FROM otel_tokens_requests"))
    assert stored == {"before": None, "nul": "Rate\\x00Limit", "surrogate": "http_\\udcff\\udcfe",
                      "huge": "E" * ERROR_TYPE_MAX, "after": None}  # fmt: skip
    assert original_text(stored["nul"]) == poisons["nul"]
    assert original_text(stored["surrogate"]) == poisons["surrogate"]
    assert faults.sink().counts["ledger_fleet_value"] - before >= 1
    assert writer.rejected == 0 and writer.lost == 0
    assert not list((tmp_path / "spool").glob("*.rows"))
    assert not list((tmp_path / "spool").glob("*.failed"))

    ledger.append(failed, request_id="later", error_type="openai.APIConnectionError")
    assert writer.flush(15) and writer.written == 6
    _, failed_types = _failures(ledger_db)  # the stored (escaped) texts, as every column's
    assert failed_types == {
        ("a", stored["nul"], 1),
        ("a", stored["surrogate"], 1),
        ("a", stored["huge"], 1),
        ("a", "openai.APIConnectionError", 1),
    }


def test_rows_an_older_release_spooled_are_written_without_an_error_type(ledger_db, tmp_path):
    """A spooled batch of a release before error_type (rows one column short) is replayed by
    this release: written, error type NULL, nothing set aside."""
    (tmp_path / "spool").mkdir()
    row = ["00000000-0000-4000-8000-000000000001", "a", "spooled", time.time(), "m", None,
           "reported", 10, 1, None, None, None, 0.5, None, None, None, 1, None, None, None, "t",
           "h"]  # fmt: skip
    (tmp_path / "spool" / "00000000000000000001-1-aa.rows").write_text(json.dumps(row) + "\n")
    writer = _writer(ledger_db, tmp_path / "spool")
    writer.put("a", "mine", time.time(), _usage(), 0.5, 0, 0, None, "openai.RateLimitError")
    assert writer.flush(15)
    assert sorted(_rows(ledger_db, "SELECT request_id, error_type FROM otel_tokens_requests")
                  ) == [("mine", "openai.RateLimitError"), ("spooled", None)]  # fmt: skip
    assert writer.rejected == 0 and not list((tmp_path / "spool").glob("*"))


def _usage():  # type: ignore[no-untyped-def]
    from otel_tokens.usage import Usage

    return Usage(input_tokens=1, output_tokens=1, model="m")
