"""The one schema of the fleet database (``otel_tokens.account.pg_schema``), on a real
PostgreSQL: a database of the releases before it (the ledger's tables at version 1, the
budgets' reservations without a version) is migrated in place, its rows kept and counted; two
processes starting together on an empty database set it up once; once it is current, a new
connection runs no DDL (nothing waits behind the writes under way)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from otel_tokens.account.pg_schema import SCHEMA_VERSION

from .test_ledger import APPS, fleet_env

psycopg = pytest.importorskip("psycopg")

#: the tables as the releases before the one schema made them (frozen: never edit)
_LEDGER_V1 = (
    "CREATE TABLE otel_tokens_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE otel_tokens_requests (
        row_id UUID PRIMARY KEY, ledger TEXT NOT NULL, request_id TEXT NOT NULL,
        ts DOUBLE PRECISION NOT NULL, model TEXT, provider TEXT, source TEXT NOT NULL,
        input_tokens BIGINT, output_tokens BIGINT, cache_read_tokens BIGINT,
        cache_write_tokens BIGINT, reasoning_tokens BIGINT, cost_usd DOUBLE PRECISION,
        premium_requests DOUBLE PRECISION, trace_id TEXT, span_id TEXT,
        active SMALLINT NOT NULL DEFAULT 1, user_id TEXT, tenant_id TEXT, conversation_id TEXT,
        service TEXT, host TEXT, written_at TIMESTAMPTZ NOT NULL DEFAULT now())""",
    "CREATE INDEX otel_tokens_requests_ts ON otel_tokens_requests (ts)",
    "CREATE INDEX otel_tokens_requests_tenant ON otel_tokens_requests (tenant_id, ts)",
    "CREATE INDEX otel_tokens_requests_ledger ON otel_tokens_requests (ledger, ts)",
    """CREATE TABLE otel_tokens_rollbacks (
        host TEXT NOT NULL, ledger TEXT NOT NULL, request_id TEXT NOT NULL,
        ts DOUBLE PRECISION NOT NULL, written_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        PRIMARY KEY (host, ledger, request_id, ts))""",
    "INSERT INTO otel_tokens_meta VALUES ('schema_version', '1')",
    (
        "INSERT INTO otel_tokens_requests (row_id, ledger, request_id, ts, source, cost_usd, "
        "tenant_id) VALUES (gen_random_uuid(), 'bot', 'r1', 1.0, 'reported', 8.0, 'acme')"
    ),
)
_BUDGETS_UNVERSIONED = (
    """CREATE TABLE otel_tokens_budget_reservations (
        id UUID NOT NULL, scope TEXT NOT NULL, key TEXT NOT NULL, ts DOUBLE PRECISION NOT NULL,
        usd DOUBLE PRECISION NOT NULL, tokens BIGINT NOT NULL,
        settled BOOLEAN NOT NULL DEFAULT false, PRIMARY KEY (id, scope))""",
    (
        "CREATE INDEX otel_tokens_budget_reservations_window "
        "ON otel_tokens_budget_reservations (scope, key, ts)"
    ),
    # acme's tenant budget holds 8 USD of its 10, reserved a minute ago
    (
        "INSERT INTO otel_tokens_budget_reservations (id, scope, key, ts, usd, tokens, settled) "
        "VALUES (gen_random_uuid(), 'tenant', 'acme', "
        "extract(epoch FROM clock_timestamp()) - 60, 8.0, 800, true)"
    ),
)
_TABLES = ["otel_tokens_budget_reservations", "otel_tokens_meta", "otel_tokens_requests",
           "otel_tokens_rollbacks"]  # fmt: skip


def _tables(conn) -> list[str]:
    return [row[0] for row in conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND "
        "tablename LIKE 'otel_tokens_%' ORDER BY 1")]  # fmt: skip


def _version(conn) -> list[tuple[str, str]]:
    return conn.execute("SELECT key, value FROM otel_tokens_meta").fetchall()


@pytest.mark.parametrize("old", [_LEDGER_V1 + _BUDGETS_UNVERSIONED, _BUDGETS_UNVERSIONED],
                         ids=["ledger-v1-and-budgets", "budgets-only"])  # fmt: skip
def test_an_older_database_is_migrated_in_place(ledger_db, old):
    """The fleet budgets' first connection migrates a database of the releases before (the
    budgets' table without a version, with or without the ledger's at version 1): its rows
    kept, the old reservation still counted in its window, every table there, the current
    version."""
    from otel_tokens.account.anomalies import Budget, BudgetExceeded
    from otel_tokens.account.fleet_budget import FleetBudgets

    with psycopg.connect(ledger_db, autocommit=True) as conn:
        for statement in old:
            conn.execute(statement)
    budget = Budget(usd=10.0, window_seconds=3600, enforce=True)
    fleet = FleetBudgets(ledger_db, {}, None, {"acme": budget}, {}, timeout=30.0)
    with pytest.raises(BudgetExceeded):
        fleet.reserve("bot", "acme", None, 5.0, 10)  # 8 + 5 > 10: the old row counts
    reservation = fleet.reserve("bot", "acme", None, 1.0, 10)
    assert reservation.held is None  # taken in the database, not this process's windows
    fleet.settle(reservation, 1.0, 10)
    assert fleet.flush(10.0)
    with psycopg.connect(ledger_db) as conn:
        assert _tables(conn) == _TABLES
        assert _version(conn) == [("schema_version", str(SCHEMA_VERSION))]
        assert conn.execute("SELECT key, usd, settled FROM otel_tokens_budget_reservations "
                            "ORDER BY usd").fetchall() == [("acme", 1.0, True),
                                                           ("acme", 8.0, True)]  # fmt: skip
        ledger_rows = conn.execute("SELECT request_id, cost_usd FROM otel_tokens_requests")
        assert ledger_rows.fetchall() == ([("r1", 8.0)] if old[0] in _LEDGER_V1 else [])


def test_the_ledgers_writer_migrates_an_older_database_too(ledger_db, tmp_path):
    """The ledger's first connection migrates the same database the same way: its row written
    beside the old one, the old reservation kept, the current version."""
    from otel_tokens.account.ledger.postgres import FleetWriter
    from otel_tokens.account.ledger.spool import Spool
    from otel_tokens.usage import Usage

    with psycopg.connect(ledger_db, autocommit=True) as conn:
        for statement in _LEDGER_V1 + _BUDGETS_UNVERSIONED:
            conn.execute(statement)
    writer = FleetWriter(ledger_db, Spool(tmp_path, 10**6), service="t")
    writer.put("bot", "r2", 2.0, Usage(input_tokens=1, output_tokens=1, model="m"), 0.5, 0, 0,
               None)  # fmt: skip
    assert writer.flush(10) and writer.written == 1
    with psycopg.connect(ledger_db) as conn:
        assert _tables(conn) == _TABLES
        assert _version(conn) == [("schema_version", str(SCHEMA_VERSION))]
        ledger_rows = conn.execute("SELECT request_id FROM otel_tokens_requests ORDER BY 1")
        assert ledger_rows.fetchall() == [("r1",), ("r2",)]
        reserved = conn.execute("SELECT key, usd FROM otel_tokens_budget_reservations")
        assert reserved.fetchall() == [("acme", 8.0)]


def test_two_processes_starting_together_set_the_schema_up_once(ledger_db, tmp_path):
    """Two processes, released at the same moment on an empty database, each reserve a budget
    and write a ledger row: both in the database (no fall-back), no fault, one version row."""
    environ = fleet_env(OTEL_TOKENS_LEDGER_URL=ledger_db, OTEL_TOKENS_EXIT_TIMEOUT="10",
                        OTEL_TOKENS_LEDGER_SPOOL=str(tmp_path / "spool"))  # fmt: skip
    starters = [subprocess.Popen([sys.executable, str(APPS / "schema_app.py")], env=environ,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
                for _ in range(2)]  # fmt: skip
    for starter in starters:
        assert starter.stdout.readline() == "ready\n"
    for starter in starters:
        starter.stdin.write("go\n")
        starter.stdin.flush()
    outs = [starter.communicate(timeout=60) for starter in starters]
    for starter, (out, err) in zip(starters, outs):
        assert (starter.returncode, out, "fault" in err) == (0, "database\n", False), err
    with psycopg.connect(ledger_db) as conn:
        assert _tables(conn) == _TABLES
        assert _version(conn) == [("schema_version", str(SCHEMA_VERSION))]
        assert conn.execute("SELECT count(*) FROM otel_tokens_requests").fetchone() == (2,)
        reserved = conn.execute("SELECT count(*) FROM otel_tokens_budget_reservations")
        assert reserved.fetchone() == (2,)


def test_a_process_that_waited_for_the_set_up_finds_it_done(ledger_db):
    """The race behind a deadlock once seen in CI, made deterministic: a connection that
    looked for the schema (none yet) and then, in the same transaction, finds that another
    process created it meanwhile, reads the new version (PostgreSQL's catalog cache kept
    saying "no table": it ran every step again, its DDL waiting on the other's writes)."""
    from otel_tokens.account.pg_schema import ensure_schema, found_version

    with psycopg.connect(ledger_db, autocommit=True) as waiting:
        with waiting.transaction():
            assert found_version(waiting) == 0
            with psycopg.connect(ledger_db, autocommit=True) as first:
                ensure_schema(first)
            assert found_version(waiting) == SCHEMA_VERSION
        with psycopg.connect(ledger_db, autocommit=True) as writing, writing.transaction():
            writing.execute("INSERT INTO otel_tokens_requests (row_id, ledger, request_id, ts, "
                            "source) VALUES (gen_random_uuid(), 'bot', 'r1', 1.0, 'reported')")
            with waiting.transaction():
                waiting.execute("SET LOCAL lock_timeout = 2000")
                ensure_schema(waiting)  # no DDL: would wait on the uncommitted write


def test_a_current_schema_runs_no_ddl_behind_writes_under_way(ledger_db):
    """Once the schema is current, a new connection's set-up takes no table lock: with a
    ledger write and a reservation uncommitted in another session, it returns at once (a
    ``CREATE INDEX IF NOT EXISTS`` would wait for them; here it would fail its lock timeout)."""
    from otel_tokens.account.pg_schema import ensure_schema

    with psycopg.connect(ledger_db) as conn:
        ensure_schema(conn)
    with psycopg.connect(ledger_db) as writing:
        writing.execute(
            "INSERT INTO otel_tokens_requests (row_id, ledger, request_id, ts, "
            "source) VALUES (gen_random_uuid(), 'bot', 'r1', 1.0, 'reported')"
        )
        writing.execute(
            "INSERT INTO otel_tokens_budget_reservations (id, scope, key, ts, usd, "
            "tokens) VALUES (gen_random_uuid(), 'tenant', 'acme', 1.0, 1.0, 1)"
        )
        with psycopg.connect(ledger_db, options="-c lock_timeout=2000") as conn:
            ensure_schema(conn)  # raises LockNotAvailable if it waits on a table lock
        writing.rollback()


def test_a_newer_schema_is_refused_and_budgets_stay_this_process(ledger_db):
    """A database at a version this otel_tokens does not know is left as it is: the set-up
    says which versions, and the fleet budgets enforce this process's own spend (a fault)."""
    from otel_tokens.account.anomalies import Budget
    from otel_tokens.account.fleet_budget import FleetBudgets
    from otel_tokens.account.pg_schema import ensure_schema

    with psycopg.connect(ledger_db, autocommit=True) as conn:
        ensure_schema(conn)
        newer = SCHEMA_VERSION + 1
        conn.execute("UPDATE otel_tokens_meta SET value=%s WHERE key='schema_version'",
                     (str(newer),))  # fmt: skip
        with pytest.raises(RuntimeError, match=f"version {newer}, this otel_tokens writes "
                                               f"version {SCHEMA_VERSION}"):  # fmt: skip
            ensure_schema(conn)
    budget = Budget(usd=10.0, window_seconds=3600, enforce=True)
    fleet = FleetBudgets(ledger_db, {}, None, {"acme": budget}, {}, timeout=30.0)
    reservation = fleet.reserve("bot", "acme", None, 1.0, 10)
    assert reservation.held is not None  # this process's own window
    assert fleet.faults == 1
    with psycopg.connect(ledger_db) as conn:
        assert _version(conn) == [("schema_version", str(newer))]
        reserved = conn.execute("SELECT count(*) FROM otel_tokens_budget_reservations")
        assert reserved.fetchone() == (0,)
