"""The PostgreSQL schema of a fleet: every table the ledger and the fleet budgets use, in one place.

Its version is kept in ``otel_tokens_meta`` (``schema_version``). :func:`ensure_schema` brings a
database to :data:`SCHEMA_VERSION`, one step per version: a new database takes every step, an
older one the steps it lacks (each step is written so that it also finds its tables already
there: version 2 adopts the budget tables earlier releases created without a version, their
rows kept; version 3 adds the ledger's ``error_type``, NULL in the rows there). The first
connection of any process does it, under an advisory lock, so processes starting together are
safe; once the version is current a connection runs no DDL at all (a
``CREATE INDEX IF NOT EXISTS`` would lock the table and make the writes under way wait).
"""

from __future__ import annotations

from typing import Any

__all__ = ["SCHEMA_VERSION", "TABLES", "ensure_schema", "found_version"]

_SCHEMA_LOCK = 0x6F74_6F6B_6C65_6467  # pg_advisory_xact_lock key of the schema set-up

_LEDGER = (
    "CREATE TABLE IF NOT EXISTS otel_tokens_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS otel_tokens_requests (
        row_id UUID PRIMARY KEY,
        ledger TEXT NOT NULL,
        request_id TEXT NOT NULL,
        ts DOUBLE PRECISION NOT NULL,
        model TEXT,
        provider TEXT,
        source TEXT NOT NULL,
        input_tokens BIGINT,
        output_tokens BIGINT,
        cache_read_tokens BIGINT,
        cache_write_tokens BIGINT,
        reasoning_tokens BIGINT,
        cost_usd DOUBLE PRECISION,
        premium_requests DOUBLE PRECISION,
        trace_id TEXT,
        span_id TEXT,
        active SMALLINT NOT NULL DEFAULT 1,
        user_id TEXT,
        tenant_id TEXT,
        conversation_id TEXT,
        service TEXT,
        host TEXT,
        written_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )""",
    "CREATE INDEX IF NOT EXISTS otel_tokens_requests_ts ON otel_tokens_requests (ts)",
    "CREATE INDEX IF NOT EXISTS otel_tokens_requests_tenant ON otel_tokens_requests (tenant_id, ts)",
    "CREATE INDEX IF NOT EXISTS otel_tokens_requests_ledger ON otel_tokens_requests (ledger, ts)",
    """CREATE TABLE IF NOT EXISTS otel_tokens_rollbacks (
        host TEXT NOT NULL,
        ledger TEXT NOT NULL,
        request_id TEXT NOT NULL,
        ts DOUBLE PRECISION NOT NULL,
        written_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        PRIMARY KEY (host, ledger, request_id, ts)
    )""",
)

_BUDGETS = (
    """CREATE TABLE IF NOT EXISTS otel_tokens_budget_reservations (
        id UUID NOT NULL,
        scope TEXT NOT NULL,
        key TEXT NOT NULL,
        ts DOUBLE PRECISION NOT NULL,
        usd DOUBLE PRECISION NOT NULL,
        tokens BIGINT NOT NULL,
        settled BOOLEAN NOT NULL DEFAULT false,
        PRIMARY KEY (id, scope)
    )""",
    (
        "CREATE INDEX IF NOT EXISTS otel_tokens_budget_reservations_window "
        "ON otel_tokens_budget_reservations (scope, key, ts)"
    ),
)

#: a failed call's error type (NULL: a success, or a row of a release before version 3)
_ERROR_TYPE = ("ALTER TABLE otel_tokens_requests ADD COLUMN IF NOT EXISTS error_type TEXT",)

#: the statements of each version, in order: version ``n`` is the database after the first
#: ``n`` steps (1: the ledger; 2: the fleet budgets' reservations; 3: the ledger's error type)
_STEPS: tuple[tuple[str, ...], ...] = (_LEDGER, _BUDGETS, _ERROR_TYPE)
SCHEMA_VERSION = len(_STEPS)
#: every table of the schema, for those who check or clean a database
TABLES = (
    "otel_tokens_meta",
    "otel_tokens_requests",
    "otel_tokens_rollbacks",
    "otel_tokens_budget_reservations",
)


#: whether the meta table is there, read from ``pg_tables`` at this statement's snapshot:
#: ``to_regclass`` answers from the session's catalog cache, which still says "no such table"
#: after waiting for the lock while another process created it (it then ran every step again,
#: and its DDL deadlocked with that process's first writes)
_META_THERE = (
    "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables WHERE "
    "schemaname = current_schema() AND tablename = 'otel_tokens_meta')"
)


def found_version(conn: Any) -> int:
    """The schema version of ``conn``'s database: 0 where none is recorded (a new database,
    or one with only the budget tables of a release that did not version them)."""
    if not conn.execute(_META_THERE).fetchone()[0]:
        return 0
    row = conn.execute("SELECT value FROM otel_tokens_meta WHERE key='schema_version'").fetchone()
    if row is None:
        return 0
    if not row[0].isdigit():
        raise RuntimeError(
            f"fleet database has schema version {row[0]!r}, this otel_tokens "
            f"writes version {SCHEMA_VERSION}"
        )
    return int(row[0])


def ensure_schema(conn: Any) -> None:
    """Bring ``conn``'s database to :data:`SCHEMA_VERSION`, in one transaction: nothing to do
    (no lock, no DDL) where it is there; else, under the advisory lock, the steps it lacks and
    the new version (a process that waited for the lock finds them done). A newer version
    than this otel_tokens knows is a :class:`RuntimeError`, nothing changed."""
    with conn.transaction():
        if _current(found_version(conn)):
            return
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        found = found_version(conn)
        if _current(found):
            return
        for step in _STEPS[found:]:
            for statement in step:
                conn.execute(statement)
        _record(conn)


def _current(found: int) -> bool:
    """Whether ``found`` is this otel_tokens's version (a newer one: an error)."""
    if found > SCHEMA_VERSION:
        raise RuntimeError(
            f"fleet database has schema version {found}, this otel_tokens "
            f"writes version {SCHEMA_VERSION}"
        )
    return found == SCHEMA_VERSION


def _record(conn: Any) -> None:
    """Write :data:`SCHEMA_VERSION` as the database's version."""
    conn.execute(
        "INSERT INTO otel_tokens_meta VALUES ('schema_version', %s) "
        "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        (str(SCHEMA_VERSION),),
    )
