"""Who spent it, through the real openai client: user, tenant and conversation from an
``agent(...)`` binding or from OpenTelemetry baggage on every span, on metric points only when
``OTEL_TOKENS_METRIC_ATTRIBUTES`` asks, in the persisted ledger's rows, and
``otel-tokens report --by user|tenant|conversation``; a version-1 ledger file is migrated."""

from __future__ import annotations

import json
import sqlite3

import pytest
from opentelemetry import baggage, context

import otel_tokens
from otel_tokens.handler import set_handler
from otel_tokens.capture.sdk import openai as openai_sdk

from ..cli_command.conftest import clean_env
from ..cli_command.test_terminal_report_check import otel_tokens as run_cli
from ..telemetry.conftest import make_telemetry
from .test_full_bill import chat, openai_client, served


@pytest.fixture
def telemetry_with(monkeypatch, tmp_path):
    made = []

    def make(**env: str):
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        otel_tokens.settings.reload()
        t = make_telemetry()
        made.append(set_handler(t.handler))
        openai_sdk.install()
        return t

    yield make
    openai_sdk.uninstall()
    if made:
        set_handler(made[0])
    monkeypatch.undo()
    otel_tokens.settings.reload()


def ask(n: int = 1) -> None:
    client, _ = openai_client(served(*[chat("gpt-4o-mini", "default", 100, 10) for _ in range(n)]))
    for _ in range(n):
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])


def test_a_binding_says_who_on_the_span_not_on_metrics_by_default(telemetry_with):
    t = telemetry_with()
    with otel_tokens.agent("support-who-1", user="u-17", tenant="acme", conversation="conv-9"):
        ask()
    attrs = t.span().attributes
    assert (attrs["user.id"], attrs["tenant.id"], attrs["gen_ai.conversation.id"]) == ("u-17", "acme", "conv-9")
    labels = {k for p in t.points("gen_ai.client.token.usage") for k in p.attributes}
    assert not labels & {"user.id", "tenant.id", "gen_ai.conversation.id"}


def test_a_responses_conversation_is_the_spans_conversation(telemetry_with):
    from .test_full_bill import MESSAGE, response, responses_usage

    t = telemetry_with()
    client, _ = openai_client(served(response("gpt-4.1", [MESSAGE], responses_usage(10, 2))))
    client.responses.create(model="gpt-4.1", input="hi", conversation="conv_abc")
    assert t.span().attributes["gen_ai.conversation.id"] == "conv_abc"


def test_baggage_fills_what_the_code_does_not_say_and_metrics_opt_in(telemetry_with):
    t = telemetry_with(OTEL_TOKENS_METRIC_ATTRIBUTES="user,tenant")
    token = context.attach(baggage.set_baggage("tenant.id", "globex", baggage.set_baggage("user.id", "u-1")))
    try:
        with otel_tokens.agent("support-who-2", user="u-2"):  # the code's user wins
            ask()
    finally:
        context.detach(token)
    attrs = t.span().attributes
    assert (attrs["user.id"], attrs["tenant.id"]) == ("u-2", "globex")
    point = t.point("otel_tokens.tokens", gen_ai__token__type="input")
    assert (point.attributes["user.id"], point.attributes["tenant.id"]) == ("u-2", "globex")


def test_a_bad_metric_attribute_setting_is_one_line_and_ignored(telemetry_with):
    t = telemetry_with(OTEL_TOKENS_METRIC_ATTRIBUTES="user,email")
    with otel_tokens.agent("support-who-3", user="u-3"):
        ask()
    assert "user.id" not in t.point("otel_tokens.tokens", gen_ai__token__type="input").attributes
    (problem,) = [p for p in otel_tokens.settings.current().problems if p.name == "OTEL_TOKENS_METRIC_ATTRIBUTES"]
    assert problem.line() == ("otel_tokens: OTEL_TOKENS_METRIC_ATTRIBUTES='user,email' is not valid (accepted: "
                              "a comma-separated list of user, tenant, conversation); using the default")


def test_ledger_rows_and_report_by_user_tenant_conversation(telemetry_with, tmp_path):
    db = tmp_path / "who.db"
    telemetry_with(OTEL_TOKENS_LEDGER_PATH=str(db))
    with otel_tokens.agent("support-who-4", user="u-a", tenant="acme", conversation="c-1"):
        ask(2)
    with otel_tokens.agent("support-who-4", user="u-b", tenant="acme", conversation="c-2"):
        ask(1)
    ask(1)  # nobody said
    otel_tokens.account.agents.get_agent("support-who-4").ledger.flush()
    otel_tokens.account.agents.get_agent("default").ledger.flush()
    out = run_cli("report", "--db", str(db), "--by", "user", "--json", env=clean_env())
    groups = json.loads(out.stdout)["groups"]
    assert {k: g["requests"] for k, g in groups.items()} == {"u-a": 2, "u-b": 1, "-": 1}
    assert groups["u-a"]["input_tokens"] == 200
    tenants = json.loads(run_cli("report", "--db", str(db), "--by", "tenant", "--json", env=clean_env()).stdout)["groups"]
    assert tenants["acme"]["requests"] == 3
    text = run_cli("report", "--db", str(db), "--by", "conversation", env=clean_env(COLUMNS="80")).stdout
    assert "c-1" in text and "c-2" in text


def test_a_version_1_ledger_is_migrated_and_still_reported(tmp_path):
    from otel_tokens import Usage
    from otel_tokens.account.ledger import UsageLedger

    db = tmp_path / "v1.db"
    conn = sqlite3.connect(db)
    conn.executescript("""
        CREATE TABLE otel_tokens_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO otel_tokens_meta VALUES ('schema_version', '1');
        CREATE TABLE otel_tokens_requests (id INTEGER PRIMARY KEY, ledger TEXT NOT NULL,
            request_id TEXT NOT NULL, ts REAL NOT NULL, model TEXT, provider TEXT, source TEXT NOT NULL,
            input_tokens INTEGER, output_tokens INTEGER, cache_read_tokens INTEGER,
            cache_write_tokens INTEGER, reasoning_tokens INTEGER, cost_usd REAL,
            premium_requests REAL, trace_id TEXT, span_id TEXT, active INTEGER NOT NULL DEFAULT 1);
        INSERT INTO otel_tokens_requests (ledger, request_id, ts, model, provider, source,
            input_tokens, output_tokens, cost_usd) VALUES ('bot', 'r1', 1.0, 'gpt-4o', 'openai',
            'reported', 100, 10, 0.001);
    """)  # a file written by the previous release (schema version 1)
    conn.close()
    report = run_cli("report", "--db", str(db), "--by", "user", "--json", env=clean_env())
    assert json.loads(report.stdout)["groups"]["-"]["requests"] == 1  # read as it is
    ledger = UsageLedger("bot", path=db)  # opened for writing: migrated in place
    assert ledger.cumulative.requests == 1
    ledger.append(Usage(input_tokens=5, output_tokens=1, model="gpt-4o", provider="openai"), who=("u", None, None))
    ledger.close()
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT value FROM otel_tokens_meta").fetchone() == ("3",)
    assert conn.execute("SELECT user_id FROM otel_tokens_requests ORDER BY id").fetchall() == [(None,), ("u",)]
