"""Conversations whose backend reports running totals (a Codex thread): each run's own share.

``codex exec --json`` prints the whole thread's tokens at every turn, and ``codex exec ...
resume <thread>`` may run in a later process. :class:`ConversationTotals` keeps each thread's last
totals, in the ledger's SQLite file when there is one (``OTEL_TOKENS_LEDGER_PATH``: a later
process sharing the file subtracts too), in memory otherwise (bounded), and turns a running
total into the increase since the last one.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import OrderedDict

from .. import faults
from ..usage import TOKEN_CLASSES, Usage

__all__ = ["ConversationTotals", "increase"]

_TABLE = (
    "CREATE TABLE IF NOT EXISTS otel_tokens_threads (thread_id TEXT PRIMARY KEY, "
    + ", ".join(f"{name} INTEGER" for name in TOKEN_CLASSES)
    + ", updated REAL NOT NULL)"
)
_IN_MEMORY = 10_000  # threads remembered without a ledger file


def increase(total: Usage, previous: Usage) -> Usage | None:
    """``total - previous`` per token class, or None when a class went down (the totals are
    not of the same thread history)."""
    values: dict[str, int | None] = {}
    for name in TOKEN_CLASSES:
        now, before = getattr(total, name), getattr(previous, name)
        if now is None or before is None:
            values[name] = now
            continue
        if now < before:
            return None
        values[name] = now - before
    try:
        return total.replace(**values)
    except ValueError:
        return None


class ConversationTotals:
    """The last running totals of each thread; thread-safe."""

    def __init__(self, path: str | None = None, busy_timeout: float = 0.1) -> None:
        self._memory: OrderedDict[str, Usage] = OrderedDict()
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        if path is not None:
            try:
                self._conn = sqlite3.connect(
                    path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
                )
                self._conn.execute(_TABLE)
            except sqlite3.Error as exc:
                faults.report("ledger_persistence", exc, f"thread totals kept in memory: {exc}")
                self._conn = None

    def own(self, thread: str, total: Usage) -> Usage:
        """This run's share of ``total`` (the thread's running total), remembering ``total``."""
        with self._lock:
            previous = self._load(thread)
            self._store(thread, total)
        if previous is None:
            return total
        own = increase(total, previous)
        if own is None:
            faults.report(
                "parse", detail=f"thread {thread}: totals went down; recorded as reported"
            )
            return total
        return own

    def _load(self, thread: str) -> Usage | None:
        if self._conn is not None:
            try:
                row = self._conn.execute(
                    f"SELECT {', '.join(TOKEN_CLASSES)} FROM otel_tokens_threads WHERE thread_id=?",
                    (thread,),
                ).fetchone()
                if row is not None:
                    return Usage(**dict(zip(TOKEN_CLASSES, row)))
            except (sqlite3.Error, ValueError) as exc:
                faults.report("ledger_persistence", exc)
        return self._memory.get(thread)

    def _store(self, thread: str, total: Usage) -> None:
        self._memory[thread] = total
        self._memory.move_to_end(thread)
        while len(self._memory) > _IN_MEMORY:
            self._memory.popitem(last=False)
        if self._conn is None:
            return
        try:
            self._conn.execute(
                f"INSERT OR REPLACE INTO otel_tokens_threads VALUES (?, {', '.join('?' * len(TOKEN_CLASSES))}, ?)",
                (thread, *(getattr(total, n) for n in TOKEN_CLASSES), time.time()),
            )
        except sqlite3.Error as exc:
            faults.report("ledger_persistence", exc)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
