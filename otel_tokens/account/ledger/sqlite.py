"""SQLite persistence of a ledger (stdlib ``sqlite3``, WAL): survives restarts and crashes.

Every finalized request is one row. A rollback does not delete rows: it marks them inactive,
so the cumulative (active) and lifetime (all rows) totals can both be rebuilt. Many ledgers
(one per agent) share a file and, within a process, one connection to it (a handful of file
descriptors however many agents); several processes may write to it at once. A forked child
opens its own connection (SQLite connections must not cross a fork) and never touches the
parent's. When the last ledger of a file closes, and when the process exits, the write-ahead
log is checkpointed into the file, so a copy of the ``.db`` alone holds every row.
"""

from __future__ import annotations

import atexit
import os
import sqlite3
import threading
from typing import Any, Iterable, Iterator, Sequence

from ...errors import LedgerPersistenceError

__all__ = [
    "ERROR_COLUMN",
    "SCHEMA_VERSION",
    "SqliteStore",
    "StoredRow",
    "WHO_COLUMNS",
    "checkpoint_all",
]

#: 2: user_id, tenant_id, conversation_id; 3: error_type (older files are migrated)
SCHEMA_VERSION = 3

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
    conversation_id TEXT,
    error_type TEXT
);
CREATE INDEX IF NOT EXISTS otel_tokens_requests_by_ledger
    ON otel_tokens_requests (ledger, id);
CREATE INDEX IF NOT EXISTS otel_tokens_requests_by_request
    ON otel_tokens_requests (request_id);
"""

_COLUMNS = (
    "request_id, ts, model, provider, source, input_tokens, output_tokens, cache_read_tokens, "
    "cache_write_tokens, reasoning_tokens, cost_usd, premium_requests, trace_id, span_id, active"
)

#: who each request was for (written with every row; read by ``otel-tokens report --by``)
WHO_COLUMNS = ("user_id", "tenant_id", "conversation_id")
#: a failed call's ``error.type`` (None: the call succeeded); read by ``otel-tokens report``
ERROR_COLUMN = "error_type"
_ADD = "ALTER TABLE otel_tokens_requests ADD COLUMN {} TEXT"
_MIGRATIONS = {
    "1": [_ADD.format(c) for c in (*WHO_COLUMNS, ERROR_COLUMN)],
    "2": [_ADD.format(ERROR_COLUMN)],
}

_INSERT = (
    f"INSERT INTO otel_tokens_requests (ledger, {_COLUMNS}, {', '.join(WHO_COLUMNS)}, "
    f"{ERROR_COLUMN}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)

#: (request_id, ts, model, provider, source, 5 token counts, cost, premium, trace, span, active,
#: user, tenant, conversation, error type); ``load`` returns the first 15
StoredRow = tuple


class _Shared:
    """One process's connection to one ledger file, shared by every ledger on it."""

    __slots__ = ("conn", "lock", "users", "pid", "path")

    def __init__(self, path: str, conn: sqlite3.Connection) -> None:
        self.conn, self.lock, self.users, self.pid, self.path = (
            conn,
            threading.RLock(),
            0,
            os.getpid(),
            path,
        )


_shared: dict[str, _Shared] = {}  # real path -> this process's connection to it
_shared_lock = threading.Lock()
_inherited: list[_Shared] = []  # a parent's connections after a fork: kept, never used or closed
_hooks_installed = False


def _after_fork_in_child() -> None:
    """A forked child starts with no connection: the parent's stay referenced (closing one
    here could checkpoint or unlink the parent's write-ahead log) but are never used."""
    global _shared_lock
    _inherited.extend(_shared.values())
    _shared.clear()
    _shared_lock = threading.Lock()


def checkpoint_all() -> None:
    """Fold every open file's write-ahead log into the file (at exit; best effort)."""
    for shared in list(_shared.values()):
        if shared.pid == os.getpid():
            _checkpoint(shared)


def _checkpoint(shared: _Shared) -> None:
    try:
        with shared.lock:
            shared.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.Error:
        pass  # another process is reading: its own exit (or the next one) checkpoints


def _install_hooks() -> None:
    global _hooks_installed
    if not _hooks_installed:
        _hooks_installed = True
        atexit.register(checkpoint_all)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_after_fork_in_child)


class SqliteStore:
    """The rows of one named ledger in one SQLite file (the connection shared per file)."""

    def __init__(self, path: str | os.PathLike[str], ledger: str, busy_timeout: float = 5.0):
        self.path = os.fspath(path)
        self.ledger = ledger
        self._busy_timeout = busy_timeout
        self._closed = False
        self._shared_conn = self._acquire()

    def _acquire(self) -> _Shared:
        key = os.path.realpath(self.path)
        with _shared_lock:
            shared = _shared.get(key)
            if shared is None:
                shared = _Shared(key, self._connect())
                _shared[key] = shared
                _install_hooks()
            shared.users += 1
            return shared

    @property
    def _share(self) -> _Shared:
        """The connection of this process (a forked child gets its own on first use)."""
        shared = self._shared_conn
        if shared.pid != os.getpid():
            if self._closed:
                raise LedgerPersistenceError(f"usage ledger {self.path!r}: closed")
            shared = self._shared_conn = self._acquire()
        return shared

    @property
    def _conn(self) -> sqlite3.Connection:
        return self._share.conn

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path, timeout=self._busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise self._error("cannot open", exc) from exc
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode: a committed row survives a killed process (not a power cut).
            conn.execute("PRAGMA synchronous=NORMAL")
            with _Transaction(conn):
                _create_or_migrate(conn, self.path)
        except LedgerPersistenceError:
            conn.close()
            raise
        except sqlite3.Error as exc:
            conn.close()
            raise self._error("cannot use", exc) from exc
        return conn

    def _error(self, what: str, exc: BaseException) -> LedgerPersistenceError:
        detail = str(exc)
        if isinstance(exc, sqlite3.DatabaseError) and "not a database" in detail:
            detail = "the file is not an SQLite database (corrupt or another format)"
        elif "locked" in detail or "busy" in detail:
            detail = f"{detail} (another process holds a write lock on it)"
        return LedgerPersistenceError(f"usage ledger {self.path!r}: {what}: {detail}")

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        share = self._share
        try:
            with share.lock:
                return share.conn.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise self._error("cannot read", exc) from exc

    def load(self, newest: int | None = None) -> Iterator[tuple[int, StoredRow]]:
        """This ledger's active rows, oldest first, as ``(rowid, row)``: the ``newest`` most
        recent only when given (the rest is summed by :meth:`totals`)."""
        where = "WHERE ledger=? AND active=1"
        if newest is None:
            rows = self._query(
                f"SELECT id, {_COLUMNS} FROM otel_tokens_requests {where} ORDER BY id",
                (self.ledger,),
            )
        else:
            rows = self._query(
                f"SELECT id, {_COLUMNS} FROM otel_tokens_requests {where} ORDER BY id DESC LIMIT ?",
                (self.ledger, newest),
            )[::-1]
        for row in rows:
            yield row[0], row[1:]

    def totals(self, active: bool, before: int | None = None) -> list[Any] | None:
        """Sums by an SQL aggregate over active (or rolled-back) rows, those with an id below
        ``before`` when given: ``[count, (sum, known) per token class, cost (picodollars),
        premium (1e-9)]``; None when a sum is past SQLite's 64-bit integers (read row by row)."""
        sums = ", ".join(f"SUM({c}), COUNT({c})" for c in _SUMMED)
        sql = (
            f"SELECT COUNT(*), {sums}, SUM(CAST(ROUND(cost_usd * 1e12) AS INTEGER)), COUNT(cost_usd), "
            "SUM(CAST(ROUND(premium_requests * 1e9) AS INTEGER)), COUNT(premium_requests) "
            "FROM otel_tokens_requests WHERE ledger=? AND active=? AND id<?"
        )
        try:
            with self._share.lock:
                row = self._conn.execute(
                    sql, (self.ledger, int(active), before or 2**63 - 1)
                ).fetchone()
        except sqlite3.OperationalError as exc:
            if "overflow" in str(exc):
                return None
            raise self._error("cannot read", exc) from exc
        except sqlite3.Error as exc:
            raise self._error("cannot read", exc) from exc
        return list(row)

    def cost_by_model(self, before: int | None = None) -> list[tuple[str | None, int, int]]:
        """(model, picodollars, priced rows) over active rows with an id below ``before``."""
        return [
            tuple(r)
            for r in self._query(
                "SELECT model, SUM(CAST(ROUND(cost_usd * 1e12) AS INTEGER)), COUNT(cost_usd) "
                "FROM otel_tokens_requests WHERE ledger=? AND active=1 AND id<? GROUP BY model",
                (self.ledger, before or 2**63 - 1),
            )
        ]

    def newest_ts(self, before: int) -> float | None:
        """The latest timestamp of the active rows with an id below ``before``."""
        row = self._query(
            "SELECT MAX(ts) FROM otel_tokens_requests WHERE ledger=? AND active=1 AND id<?",
            (self.ledger, before),
        )
        return row[0][0] if row else None

    def has_request(self, request_id: str) -> bool:
        """A row with this request id is in the file, under any ledger, active or rolled
        back (a batch result read again by another process: recorded already)."""
        return bool(
            self._query(
                "SELECT 1 FROM otel_tokens_requests WHERE request_id=? LIMIT 1", (request_id,)
            )
        )

    def rows(self, active: bool, before: int | None = None) -> Iterator[StoredRow]:
        """Rows one by one (the fallback of :meth:`totals`)."""
        for row in self._query(
            f"SELECT {_COLUMNS} FROM otel_tokens_requests WHERE ledger=? AND active=? AND id<?",
            (self.ledger, int(active), before or 2**63 - 1),
        ):
            yield row

    def write(self, rows: Sequence[StoredRow], deactivate: Iterable[int]) -> list[int]:
        """Insert ``rows`` and mark row ids ``deactivate`` rolled back, in one transaction.

        Returns the new rows' ids. On failure nothing is written and the caller keeps both.
        """
        share = self._share
        try:
            with share.lock, _Transaction(share.conn) as conn:
                ids = []
                for row in rows:
                    cur = conn.execute(
                        _INSERT,
                        (self.ledger, *row, *(None,) * (19 - len(row))),
                    )
                    ids.append(cur.lastrowid)
                conn.executemany(
                    "UPDATE otel_tokens_requests SET active=0 WHERE id=?",
                    [(rowid,) for rowid in deactivate],
                )
            return ids
        except sqlite3.Error as exc:
            raise self._error("cannot write", exc) from exc

    def close(self) -> None:
        """Leave the shared connection (idempotent); the last ledger of the file closes it,
        after folding the write-ahead log into the file."""
        if self._closed:
            return
        self._closed = True
        shared = self._shared_conn
        if shared.pid != os.getpid():
            return  # the parent's connection, inherited: never touched
        with _shared_lock:
            shared.users -= 1
            if shared.users > 0:
                return
            if _shared.get(shared.path) is shared:
                del _shared[shared.path]
        _checkpoint(shared)
        shared.conn.close()


_SUMMED = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)


def _create_or_migrate(conn: sqlite3.Connection, path: str) -> None:
    """The schema, created or brought up to date in place (inside the caller's transaction)."""
    for statement in _SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)
    row = conn.execute("SELECT value FROM otel_tokens_meta WHERE key='schema_version'").fetchone()
    if row is None:
        conn.execute(
            "INSERT INTO otel_tokens_meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
        )
    elif row[0] in _MIGRATIONS:  # an older file: brought up to date in place
        for statement in _MIGRATIONS[row[0]]:
            conn.execute(statement)
        conn.execute(
            "UPDATE otel_tokens_meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),)
        )
    elif row[0] != str(SCHEMA_VERSION):
        raise LedgerPersistenceError(
            f"usage ledger {path!r} has schema version {row[0]}, "
            f"this otel_tokens reads version {SCHEMA_VERSION}"
        )


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
