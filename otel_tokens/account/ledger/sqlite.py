"""SQLite persistence of a ledger (stdlib ``sqlite3``, WAL): survives restarts and crashes.

Every finalized request is one row. A rollback does not delete rows: it marks them inactive,
so the cumulative (active) and lifetime (all rows) totals can both be rebuilt on open. Many
ledgers (one per agent) can share a file; several processes may write to it at once.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Iterable, Iterator, Sequence

from ...errors import LedgerPersistenceError

__all__ = ["SCHEMA_VERSION", "SqliteStore", "StoredRow", "WHO_COLUMNS"]

SCHEMA_VERSION = 2  # 2: user_id, tenant_id, conversation_id (version 1 files are migrated)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS otel_tokens_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS otel_tokens_requests (
    id INTEGER PRIMARY KEY,
    ledger TEXT NOT NULL,
    request_id TEXT NOT NULL,
    ts REAL NOT NULL,
    model TEXT,
    provider TEXT,
    source TEXT NOT NULL,
    input_tokens INTEGER,
    output_tokens INTEGER,
    cache_read_tokens INTEGER,
    cache_write_tokens INTEGER,
    reasoning_tokens INTEGER,
    cost_usd REAL,
    premium_requests REAL,
    trace_id TEXT,
    span_id TEXT,
    active INTEGER NOT NULL DEFAULT 1,
    user_id TEXT,
    tenant_id TEXT,
    conversation_id TEXT
);
CREATE INDEX IF NOT EXISTS otel_tokens_requests_by_ledger
    ON otel_tokens_requests (ledger, id);
"""

_COLUMNS = (
    "request_id, ts, model, provider, source, input_tokens, output_tokens, cache_read_tokens, "
    "cache_write_tokens, reasoning_tokens, cost_usd, premium_requests, trace_id, span_id, active"
)

#: who each request was for (written with every row; read by ``otel-tokens report --by``)
WHO_COLUMNS = ("user_id", "tenant_id", "conversation_id")
_MIGRATIONS = {"1": [f"ALTER TABLE otel_tokens_requests ADD COLUMN {c} TEXT" for c in WHO_COLUMNS]}

#: (request_id, ts, model, provider, source, 5 token counts, cost, premium, trace, span, active,
#: user, tenant, conversation); ``load`` returns the first 15
StoredRow = tuple


class SqliteStore:
    """The rows of one named ledger in one SQLite file."""

    def __init__(self, path: str | os.PathLike[str], ledger: str, busy_timeout: float = 5.0):
        self.path = os.fspath(path)
        self.ledger = ledger
        try:
            self._conn = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise self._error("cannot open", exc) from exc
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode: a committed row survives a killed process (not a power cut).
            self._conn.execute("PRAGMA synchronous=NORMAL")
            with self._transaction():
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        self._conn.execute(statement)
                row = self._conn.execute(
                    "SELECT value FROM otel_tokens_meta WHERE key='schema_version'"
                ).fetchone()
                if row is None:
                    self._conn.execute(
                        "INSERT INTO otel_tokens_meta VALUES ('schema_version', ?)",
                        (str(SCHEMA_VERSION),),
                    )
                elif row[0] in _MIGRATIONS:  # an older file: brought up to date in place
                    for statement in _MIGRATIONS[row[0]]:
                        self._conn.execute(statement)
                    self._conn.execute("UPDATE otel_tokens_meta SET value=? WHERE key='schema_version'",
                                       (str(SCHEMA_VERSION),))  # fmt: skip
                elif row[0] != str(SCHEMA_VERSION):
                    raise LedgerPersistenceError(
                        f"usage ledger {self.path!r} has schema version {row[0]}, "
                        f"this otel_tokens reads version {SCHEMA_VERSION}"
                    )
        except LedgerPersistenceError:
            self._conn.close()
            raise
        except sqlite3.Error as exc:
            self._conn.close()
            raise self._error("cannot use", exc) from exc

    def _error(self, what: str, exc: BaseException) -> LedgerPersistenceError:
        detail = str(exc)
        if isinstance(exc, sqlite3.DatabaseError) and "not a database" in detail:
            detail = "the file is not an SQLite database (corrupt or another format)"
        elif "locked" in detail or "busy" in detail:
            detail = f"{detail} (another process holds a write lock on it)"
        return LedgerPersistenceError(f"usage ledger {self.path!r}: {what}: {detail}")

    def _transaction(self) -> _Transaction:
        return _Transaction(self._conn)

    def load(self) -> Iterator[tuple[int, StoredRow]]:
        """Every row of this ledger, oldest first, as ``(rowid, row)``."""
        try:
            cursor = self._conn.execute(
                f"SELECT id, {_COLUMNS} FROM otel_tokens_requests WHERE ledger=? ORDER BY id",
                (self.ledger,),
            )
            for row in cursor:
                yield row[0], row[1:]
        except sqlite3.Error as exc:
            raise self._error("cannot read", exc) from exc

    def write(self, rows: Sequence[StoredRow], deactivate: Iterable[int]) -> list[int]:
        """Insert ``rows`` and mark row ids ``deactivate`` rolled back, in one transaction.

        Returns the new rows' ids. On failure nothing is written and the caller keeps both.
        """
        try:
            with self._transaction():
                ids = []
                for row in rows:
                    cur = self._conn.execute(
                        f"INSERT INTO otel_tokens_requests (ledger, {_COLUMNS}, {', '.join(WHO_COLUMNS)}) "
                        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                        (self.ledger, *row, *(None,) * (18 - len(row))),
                    )
                    ids.append(cur.lastrowid)
                self._conn.executemany(
                    "UPDATE otel_tokens_requests SET active=0 WHERE id=?",
                    [(rowid,) for rowid in deactivate],
                )
            return ids
        except sqlite3.Error as exc:
            raise self._error("cannot write", exc) from exc

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._conn.close()


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any error."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self._conn.execute("BEGIN IMMEDIATE")
        return self._conn

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self._conn.execute("COMMIT")
        else:
            try:
                self._conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
