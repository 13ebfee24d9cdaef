"""The fleet ledger: every process's ledger rows written to one PostgreSQL database.

Rows leave the call path at once: :meth:`FleetWriter.put` appends each to the process's
:class:`~.spool.Journal` (one line written, so that it outlives ``os._exit`` and SIGKILL) and to
a bounded in-memory queue, and a background thread writes them in batches (``psycopg``, the
``postgres`` extra). A slow or unreachable database therefore adds no latency to a call and
raises nothing: once it is found down the rows go to a local :class:`~.spool.Spool` on disk (a
folder per database) and are replayed into that database when it is back. No value stops a
batch: texts PostgreSQL cannot hold are stored escaped (:func:`stored_text`), numbers out of
their column's range NULL, and a row the database still refuses is set aside alone. A failed
call's row carries its error type (schema version 3; bounded, escaped like any text).
Every row carries its own id (a UUID made when it was recorded) and is inserted with
``ON CONFLICT DO NOTHING``, so a batch retried after a timeout (whose commit may have gone
through) or replayed twice is stored exactly once. Its tables are those of
:mod:`otel_tokens.account.pg_schema` (a writer's connection creates or migrates them first,
under an advisory lock). A forked child starts a writer of its own and never touches its
parent's connection. At exit the queue is flushed within ``OTEL_TOKENS_EXIT_TIMEOUT`` and
whatever is left is spooled.

A rollback of a ledger (:meth:`FleetWriter.rollback`) travels the same way, queued, batched and
spooled: it names the rows it undoes by host, ledger, request id and timestamp, is kept in
``otel_tokens_rollbacks`` and marks them inactive, as the SQLite ledger does. Rows written
later (a spool replayed after the rollback) are stored inactive when they were rolled back;
both take the same advisory lock (rows shared, rollbacks exclusive), so neither can miss the
other, and a rollback applied twice changes nothing.
"""

from __future__ import annotations

import atexit
import collections
import itertools
import math
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

from ... import faults, threads
from ..pg_schema import ensure_schema
from .spool import Journal, Segment, Spool, default_folder

__all__ = [
    "COLUMNS",
    "ERROR_TYPE_MAX",
    "FleetWriter",
    "connect",
    "fleet_writer",
    "original_text",
    "stored_text",
]

#: the columns of a row, in the order :meth:`FleetWriter.put` is given them
COLUMNS = (
    "row_id",
    "ledger",
    "request_id",
    "ts",
    "model",
    "provider",
    "source",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "cost_usd",
    "premium_requests",
    "trace_id",
    "span_id",
    "active",
    "user_id",
    "tenant_id",
    "conversation_id",
    "service",
    "host",
    "error_type",
)
#: characters of a failed call's error type kept (a class's qualified name is far shorter; the
#: value may be any text a backend or an agent CLI sent)
ERROR_TYPE_MAX = 256

_INCOMING = (
    "CREATE TEMP TABLE IF NOT EXISTS otel_tokens_incoming "
    "(LIKE otel_tokens_requests INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
)
_COPY = f"COPY otel_tokens_incoming ({', '.join(COLUMNS)}) FROM STDIN"
_MOVED = ", ".join(  # a row rolled back before it could be written is stored inactive
    "CASE WHEN EXISTS (SELECT 1 FROM otel_tokens_rollbacks r WHERE r.host=i.host AND "
    "r.ledger=i.ledger AND r.request_id=i.request_id AND r.ts=i.ts) THEN 0 ELSE i.active END"
    if c == "active"
    else f"i.{c}"
    for c in COLUMNS
)
_MOVE = (
    f"INSERT INTO otel_tokens_requests ({', '.join(COLUMNS)}) SELECT {_MOVED} "
    "FROM otel_tokens_incoming i ON CONFLICT (row_id) DO NOTHING"
)
_ROWS_LOCK = 0x6F74_6F6B_726F_7773  # rows take it shared, rollbacks exclusive
_TOMBSTONES = (
    "INSERT INTO otel_tokens_rollbacks (host, ledger, request_id, ts) SELECT %s, %s, "
    "r.id, r.ts FROM unnest(%s::text[], %s::float8[]) AS r(id, ts) "
    "ON CONFLICT DO NOTHING"
)
_DEACTIVATE = (
    "UPDATE otel_tokens_requests t SET active=0 FROM unnest(%s::text[], %s::float8[]) "
    "AS r(id, ts) WHERE t.host=%s AND t.ledger=%s AND t.request_id=r.id AND t.ts=r.ts "
    "AND t.active=1"
)
ROLLBACK = "rollback"  # first item of a queued rollback: (ROLLBACK, host, ledger, [[id, ts], ...])

BATCH = 500  # rows per INSERT transaction
LINGER = 0.2  # seconds a row may wait for others to share its transaction (fewer commits)
CONNECT_TIMEOUT = 3  # seconds
STATEMENT_TIMEOUT_MS = 5_000
RETRY_MAX = 5.0  # seconds between attempts while the database is down (doubling from 0.25)

#: a NUL, a lone surrogate (what undecodable bytes become), or a backslash the reading
#: (:func:`original_text`) would take for the start of an escape
_ESCAPE = re.compile(r"[\x00\ud800-\udfff]|\\(?=[\\\x00\ud800-\udfff]|x00|ud[89a-f][0-9a-f]{2})")
_UNESCAPE = re.compile(r"\\(\\|x00|ud[89a-f][0-9a-f]{2})")
_POISON = re.compile(r"[\x00\ud800-\udfff]")
_COUNTS = frozenset(
    (
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "reasoning_tokens",
        "active",
    )
)  # BIGINT / SMALLINT columns
_NUMBERS = frozenset(("ts", "cost_usd", "premium_requests"))  # DOUBLE PRECISION columns
_INT64 = 2**63


def stored_text(value: str) -> str:
    """``value`` as a PostgreSQL text can hold it: a NUL becomes ``\\x00``, a lone surrogate
    ``\\udcXX`` (Python's backslashreplace), and a backslash that would read as the start of
    such an escape (or of ``\\\\``) is doubled. Other values are stored as they are, and
    :func:`original_text` gives back the exact original of every value."""
    if value.isascii() and "\\" not in value and "\x00" not in value:
        return value
    return _ESCAPE.sub(_escape, value)


def original_text(stored: str) -> str:
    """The value :func:`stored_text` was given."""
    return _UNESCAPE.sub(_unescape, stored)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\\":
        return "\\\\"
    return "\\x00" if char == "\x00" else f"\\u{ord(char):04x}"


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    if code == "\\":
        return "\\"
    return "\x00" if code == "x00" else chr(int(code[1:], 16))


def _cleaned(row: Sequence[Any]) -> tuple[Any, ...]:
    """A row as its columns can hold it (:func:`_column_value`); a NUL, a lone surrogate or a
    number that had to be stored NULL is a ``ledger_fleet_value`` fault (logged once). A row
    an older release spooled or journaled (before ``error_type``) is a success's."""
    if len(row) == len(COLUMNS) - 1:
        row = (*row, None)
    cleaned = tuple(_column_value(c, v) for c, v in zip(COLUMNS, row, strict=True))
    for column, value, kept in zip(COLUMNS, row, cleaned):
        if kept is not value and kept != value and (kept is None or _POISON.search(str(value))):
            faults.report(
                "ledger_fleet_value",
                detail=(
                    f"fleet ledger column {column}: a value PostgreSQL cannot hold, stored "
                    "escaped (text) or NULL (number)"
                ),
            )
    return cleaned


def _column_value(column: str, value: Any) -> Any:
    """``value`` as ``column`` can hold it: a text through :func:`stored_text`; a count that is
    not an integer of BIGINT's range, or a number that is not finite (a cost of ``inf``,
    ``nan``, ``10**400``), NULL (unknown)."""
    if value is None:
        return None
    if column in _COUNTS:
        return _count(value)
    if column in _NUMBERS:
        return _number(value)
    return stored_text(value if isinstance(value, str) else str(value))


def _count(value: Any) -> int | None:
    """An integer of BIGINT's range (an integral float too), else None."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if -_INT64 <= value < _INT64 else None


def _number(value: Any) -> float | None:
    """A finite float, else None."""
    if isinstance(value, (bool, str, bytes)):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _cleaned_rollback(item: Sequence[Any]) -> tuple[Any, ...]:
    """A queued rollback with its texts as the rows they name were stored."""
    _, host, ledger, undone = item
    return (
        ROLLBACK,
        stored_text(str(host)),
        stored_text(str(ledger)),
        [[stored_text(str(rid)), _number(ts)] for rid, ts in undone],
    )


def connect(url: str, autocommit: bool = False) -> Any:
    """A psycopg connection to ``url`` with short connect and statement timeouts."""
    import psycopg

    return psycopg.connect(
        url,
        connect_timeout=CONNECT_TIMEOUT,
        autocommit=autocommit,
        options=f"-c statement_timeout={STATEMENT_TIMEOUT_MS}",
    )


class FleetWriter:
    """This process's writer to one fleet database: a bounded queue and a writing thread."""

    def __init__(
        self,
        url: str,
        spool: Spool,
        queue_max: int = 10_000,
        service: str | None = None,
        exit_timeout: float = 1.5,
    ) -> None:
        self.url, self.spool, self.queue_max = url, spool, queue_max
        self.service, self.host = service, socket.gethostname()
        self.exit_timeout = exit_timeout
        self.written = 0  # rows this process's writer committed (replayed ones included)
        self.lost = 0  # rows neither written nor spooled (spool full)
        self.rejected = 0  # rows the database refused (set aside, see _set_aside)
        self._fresh()

    def _fresh(self) -> None:
        """State of a new writer (at start and in a forked child, which leaves its parent's
        journal to the parent)."""
        if getattr(self, "_journal", None) is not None:
            self._journal.abandon()
        self._journal = Journal(self.spool)
        self._cond = threading.Condition(threading.Lock())
        #: queued rows (and rollbacks), each with the journal segment holding it (or None)
        self._queue: collections.deque[_Entry] = collections.deque()
        self._inflight: list[_Entry] = []
        self._thread: threading.Thread | None = None
        self._conn: Any = None
        self._pid = os.getpid()
        self._prefix = uuid.uuid4().hex  # a forked child's rows get ids of their own
        self._counter = itertools.count()
        self._down = False
        self._retry_at = 0.0
        self._delay = 0.25
        self._stopping = False
        self._first_at = 0.0  # when the oldest queued row was queued

    # -- the call path: never blocks on the database, never raises ---------------------------
    def put(
        self,
        ledger: str,
        request_id: str | None,
        ts: float,
        usage: Any,
        cost: float | None,
        trace: int,
        span: int,
        who: Sequence[str | None] | None,
        error_type: str | None = None,
    ) -> None:
        """Queue one row (what :meth:`UsageLedger.append` recorded; ``error_type``: a failed
        call's, its first :data:`ERROR_TYPE_MAX` characters)."""
        try:
            if self._pid != os.getpid():
                self._fresh()  # a forked child: its own queue, thread and connection
            user, tenant, conversation = who if who is not None else (None, None, None)
            if error_type is not None:
                error_type = str(error_type)[:ERROR_TYPE_MAX]
            row_id = self._row_id()
            row = (
                row_id,
                ledger,
                request_id or row_id,
                ts,
                usage.model,
                usage.provider,
                usage.source,
                usage.input_tokens,
                usage.output_tokens,
                usage.cache_read_tokens,
                usage.cache_write_tokens,
                usage.reasoning_tokens,
                cost,
                usage.premium_requests,
                f"{trace:032x}" if trace else None,
                f"{span:016x}" if span else None,
                1,
                user,
                tenant,
                conversation,
                self.service,
                self.host,
                error_type,
            )
            self._enqueue(row)
        except Exception as exc:  # never the host's problem
            faults.report("ledger_fleet", exc)

    def rollback(self, ledger: str, undone: Sequence[tuple[str, float]]) -> None:
        """Queue a rollback of ``ledger``'s rows ``undone`` (request id, timestamp), as
        :meth:`UsageLedger.rollback_to_index` and the others removed them."""
        try:
            if self._pid != os.getpid():
                self._fresh()
            if undone:
                self._enqueue((ROLLBACK, self.host, ledger, [[rid, ts] for rid, ts in undone]))
        except Exception as exc:  # never the host's problem
            faults.report("ledger_fleet", exc)

    def _enqueue(self, item: tuple[Any, ...]) -> None:
        """Journal ``item`` (one line, one write), then queue it for the writing thread."""
        if self._thread is None:
            _load_driver()
        text = self._journal.line(item)
        spill = None
        with self._cond:
            if not self._queue:
                self._first_at = time.monotonic()
            self._queue.append((item, self._journal.append(text)))
            if len(self._queue) > self.queue_max:  # the writer is behind: to disk, not lost
                spill = list(self._queue)
                self._queue.clear()
            if len(self._queue) in (1, BATCH):  # a woken thread would take the host's GIL
                self._cond.notify()  # at once: only to start the linger or a full batch
            if self._thread is None:
                self._start_locked()
        if spill is not None:
            self._spool_entries(spill)

    def _row_id(self) -> str:
        """A UUID unique to this row: a random per-process prefix and a counter (no system
        call per row, unlike uuid4)."""
        n = next(self._counter)
        return f"{self._prefix[:8]}-{self._prefix[8:12]}-4{self._prefix[13:16]}-a{n >> 48 & 0xFFF:03x}-{n & 0xFFFFFFFFFFFF:012x}"

    def _start_locked(self) -> None:
        self._thread = threads.start(self._run, "otel_tokens-fleet-ledger")
        _register(self)

    # -- the writing thread ------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopping and not self._due_locked():
                    self._cond.wait(self._wait())
                batch = [self._queue.popleft() for _ in range(min(BATCH, len(self._queue)))]
                stopping = self._stopping
                self._inflight = batch
                self._journal_locked(self._journal.rotate)
            self._write([item for item, _ in batch])
            with self._cond:
                if self._inflight is batch:  # not taken (and spooled) by flush() meanwhile
                    self._journal_locked(self._journal.release, [seg for _, seg in batch])
                self._inflight = []
                if stopping and not self._queue:
                    self._cond.notify_all()
                    return

    def _journal_locked(self, method: Any, *args: Any) -> None:
        """Rotate or release the journal (under the lock), a fault rather than the thread's end."""
        try:
            method(*args)
        except Exception as exc:
            faults.report("ledger_fleet_journal", exc)

    def _due_locked(self) -> bool:
        """Whether there is work: rows (a batch's worth, or after the linger: written, or
        spooled at once while the database is down), or, with nothing queued, a retry or
        another process's spool (or journal) to replay."""
        now = time.monotonic()
        retry = self._down and now >= self._retry_at
        if self._queue:
            return len(self._queue) >= BATCH or now >= self._first_at + LINGER
        return retry or (not self._down and self.spool.pending())

    def _wait(self) -> float:
        if self._queue:
            return max(0.001, self._first_at + LINGER - time.monotonic())
        if self._down:
            return max(0.01, self._retry_at - time.monotonic())
        return 5.0  # now and then: a spool another process left

    def _write(self, batch: list[tuple[Any, ...]]) -> None:
        """Write ``batch`` (after any spooled rows); on failure spool it and back off."""
        if self._down and time.monotonic() < self._retry_at:
            self._spool(batch)
            return
        try:
            conn = self._connection()
            self._replay(conn)
            if batch:
                self._apply_or_set_aside(conn, batch)
            self._down, self._delay = False, 0.25
        except Exception as exc:
            self._close()
            self._spool(batch)
            if not self._down:
                faults.report(
                    "ledger_fleet",
                    exc,
                    f"{unusable('fleet ledger', exc)}; rows are "
                    "spooled to disk and written when it can be",
                )
            self._down = True
            self._retry_at = time.monotonic() + self._delay
            self._delay = min(RETRY_MAX, self._delay * 2)

    def _connection(self) -> Any:
        if self._conn is None or self._conn.closed:
            conn = connect(self.url)
            try:
                ensure_schema(conn)
            except Exception:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _insert(self, conn: Any, rows: Sequence[Sequence[Any]]) -> None:
        """Rows alone (see :meth:`_apply`)."""
        self._apply(conn, rows)

    def _apply(self, conn: Any, items: Sequence[Sequence[Any]]) -> None:
        """One transaction, in order: rows COPied into a temporary table (little work per row
        in this process, which shares the interpreter with the host's calls), then those not
        stored yet moved in; rollbacks kept and applied."""
        items = [
            _cleaned_rollback(item) if item[0] == ROLLBACK else _cleaned(item) for item in items
        ]
        rolls = any(item[0] == ROLLBACK for item in items)
        written = 0
        with conn.transaction(), conn.cursor() as cur:
            cur.execute(
                "SELECT pg_advisory_xact_lock(%s)"
                if rolls
                else "SELECT pg_advisory_xact_lock_shared(%s)",
                (_ROWS_LOCK,),
            )
            start = 0
            while start < len(items):
                if items[start][0] == ROLLBACK:
                    _, host, ledger, undone = items[start]
                    ids, stamps = [u[0] for u in undone], [u[1] for u in undone]
                    cur.execute(_TOMBSTONES, (host, ledger, ids, stamps))
                    cur.execute(_DEACTIVATE, (ids, stamps, host, ledger))
                    start += 1
                    continue
                end = start
                while end < len(items) and items[end][0] != ROLLBACK:
                    end += 1
                cur.execute(_INCOMING)
                with cur.copy(_COPY) as copy:
                    for row in items[start:end]:
                        copy.write_row(row)
                cur.execute(_MOVE)
                if end < len(items):  # rows follow a rollback in this transaction
                    cur.execute("TRUNCATE otel_tokens_incoming")
                written += end - start
                start = end
        self.written += written

    def _apply_or_set_aside(self, conn: Any, items: Sequence[Sequence[Any]]) -> None:
        """:meth:`_apply`; items the database refuses for their values (not for being down)
        are found by halving the batch, and set aside alone: the rest is written."""
        try:
            self._apply(conn, items)
        except Exception as exc:
            if not _refused(exc):
                raise
            if len(items) == 1:
                self._set_aside(items, exc)
                return
            half = len(items) // 2
            self._apply_or_set_aside(conn, items[:half])
            self._apply_or_set_aside(conn, items[half:])

    def _set_aside(self, items: Sequence[Sequence[Any]], exc: BaseException) -> None:
        """Rows the database refused: kept in a ``*.failed`` spool file, never replayed."""
        self.rejected += len(items)
        try:
            kept = (
                f"set aside in {self.spool.folder}/*.failed"
                if self.spool.set_aside(items)
                else "lost: the spool is full"
            )
        except Exception as error:
            kept = f"lost: {_reason(error)}"
        faults.report(
            "ledger_fleet_rejected",
            exc,
            f"fleet ledger refused a row ({type(exc).__name__}: {_reason(exc)}); {kept}",
        )

    def _replay(self, conn: Any) -> None:
        """Every spooled batch of this host for this database, written (each claimed by one
        process only); one that cannot be read is moved aside, never tried again."""
        if not self.spool.pending():
            return
        while (path := self.spool.claim()) is not None:
            try:
                rows = self.spool.read(path)
            except Exception as exc:
                self.spool.move_aside(path)
                faults.report(
                    "ledger_fleet_rejected",
                    exc,
                    f"fleet ledger spool {path.name} "
                    f"unreadable ({_reason(exc)}): moved aside as .failed",
                )
                continue
            try:
                for start in range(0, len(rows), BATCH):
                    self._apply_or_set_aside(conn, rows[start : start + BATCH])
            except BaseException:
                self.spool.give_back(path)
                raise
            self.spool.done(path)

    def _spool_entries(self, entries: list[_Entry]) -> None:
        """Spool queued entries (rows or rollbacks), then release them from the journal."""
        self._spool([item for item, _ in entries])
        with self._cond:
            self._journal_locked(self._journal.release, [seg for _, seg in entries])

    def _spool(self, rows: list[tuple[Any, ...]]) -> None:
        try:
            if rows and not self.spool.save(rows):
                self.lost += len(rows)
                faults.report(
                    "ledger_fleet_spool_full",
                    detail=(
                        f"fleet ledger spool {self.spool.folder} is full "
                        f"(OTEL_TOKENS_LEDGER_SPOOL_MAX_MB): {len(rows)} rows lost"
                    ),
                )
        except Exception as exc:
            self.lost += len(rows)
            faults.report("ledger_fleet_spool", exc)

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass

    # -- exit --------------------------------------------------------------------------------
    def flush(self, timeout: float | None = None) -> bool:
        """Wait until the queue is written (or spooled), at most ``timeout`` seconds; then
        spool what is left. True when nothing had to be spooled at this point."""
        if self._pid != os.getpid() or self._thread is None:
            return True
        deadline = time.monotonic() + (self.exit_timeout if timeout is None else timeout)
        with self._cond:
            self._stopping = True
            self._retry_at = 0.0  # one more attempt now, whatever the back-off said
            self._cond.notify_all()
        self._thread.join(max(0.0, deadline - time.monotonic()))
        with self._cond:
            left = list(self._inflight) + list(self._queue)
            self._queue.clear()
            self._inflight = []
            if not self._thread.is_alive():
                self._thread = None
                self._stopping = False
        self._spool_entries(left)
        with self._cond:
            self._journal_locked(self._journal.rotate)  # its last segment, now empty: gone
        return not left


_Entry = tuple[tuple[Any, ...], Segment | None]  # a queued row and its journal segment


def _refused(exc: BaseException) -> bool:
    """Whether ``exc`` is the database (or the driver) refusing the values written, rather
    than the database being down, slow or unusable: a ``DataError`` or ``IntegrityError``,
    a value past a limit (a 10 kB tenant is too big for its index), a value the driver cannot
    send (no SQLSTATE), or a row that is not one."""
    try:
        import psycopg
    except ImportError:
        return False
    if isinstance(exc, psycopg.Error):
        refused = (psycopg.DataError, psycopg.IntegrityError, psycopg.errors.ProgramLimitExceeded)
        return isinstance(exc, refused) or (
            isinstance(exc, psycopg.ProgrammingError) and exc.sqlstate is None
        )
    return isinstance(exc, (ValueError, TypeError, LookupError, OverflowError))


def _load_driver() -> None:
    """Import psycopg on the host's thread before the writing thread starts: a process that
    forks while that thread is still importing it would leave its child a half-imported
    module (no adapters: "cannot adapt type 'int'")."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pass  # the writing thread reports it (and spools the rows)


def driver_missing(exc: ImportError) -> str:
    """Why a fleet database cannot be used without its driver, and the ``pip install`` that
    fixes it (the same words in the fault lines, ``otel-tokens check`` and ``report``)."""
    return f"psycopg cannot be imported ({_reason(exc)}): pip install 'otel-tokens[postgres]'"


def unusable(what: str, exc: BaseException) -> str:
    """Why ``what`` (the fleet ledger, the fleet budgets) cannot use its database: the driver
    missing, or the database unreachable."""
    if isinstance(exc, ImportError):  # only ``import psycopg`` imports on the way to the database
        return f"{what} off: {driver_missing(exc)}"
    return f"{what} unreachable ({type(exc).__name__}: {_reason(exc)})"


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


_writers: dict[str, FleetWriter] = {}
_writers_lock = threading.Lock()
_running: list[FleetWriter] = []
_inherited: list[Any] = []
_hooked = False


def fleet_writer(
    url: str,
    spool_folder: str | None,
    spool_max_bytes: int,
    queue_max: int,
    service: str | None,
    exit_timeout: float,
) -> FleetWriter:
    """The process's writer for ``url`` (one per database, shared by every agent)."""
    with _writers_lock:
        writer = _writers.get(url)
        if writer is None:
            spool = Spool.for_database(spool_folder or default_folder(), url, spool_max_bytes)
            writer = FleetWriter(url, spool, queue_max, service, exit_timeout)
            _writers[url] = writer
        return writer


def _register(writer: FleetWriter) -> None:
    global _hooked
    if writer not in _running:
        _running.append(writer)
    if not _hooked:
        _hooked = True
        atexit.register(flush_all)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_after_fork_in_child)


def _after_fork_in_child() -> None:
    """The parent's writers are its own: a child's first row starts a writer of its own."""
    global _writers_lock
    _writers_lock = threading.Lock()
    for writer in _writers.values():
        _inherited.append(writer._conn)  # the parent's: kept referenced, never used or closed
        writer._fresh()
    _running.clear()


def flush_all(timeout: float | None = None) -> None:
    """Flush every running writer of this process (at exit, within the exit timeout)."""
    for writer in _running:
        try:
            writer.flush(timeout)
        except Exception as exc:
            faults.report("ledger_fleet", exc)
