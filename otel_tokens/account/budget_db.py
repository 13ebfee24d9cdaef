"""The fleet budgets' database work, off the caller's thread and bounded by the caller's clock.

A stopped or partitioned server still ACKs TCP (the kernel does), so no libpq timeout fires and
a server-side ``statement_timeout`` is never applied: the only bound that holds is the caller's
own. :class:`Workers` runs each reservation on one of a few threads, each with its own
connection, and the caller waits for it at most a deadline; a job still running then is
abandoned (its connection is closed when it ends, never reused). :class:`Settler` writes
settlements in the background from a bounded queue: the caller never waits for them.
Both are fork-aware through their owner (a forked child builds its own; the parent's
connections are kept referenced in :data:`inherited`, never used nor closed).
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import os
import queue
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from .. import faults, threads

__all__ = ["Connecting", "Settler", "Workers", "fork_lock", "inherited"]

WORKERS = 4  # threads (and connections) per process running reservations at most
SETTLE_QUEUE = 10_000  # settlements waiting to be written at most (past it: dropped, counted)
SETTLE_BATCH = 500  # settlements written per transaction
RETRY_AFTER = 5.0  # seconds before the settling thread tries again after a failure

#: connections of a parent process, in its forked child: referenced so that their finalizer
#: never ends the parent's session over the shared socket
inherited: list[Any] = []
_fork_lock = threading.Lock()


def fork_lock() -> threading.Lock:
    """The lock under which a forked child builds its own workers (once, whichever of its
    threads comes first)."""
    return _fork_lock


def _after_fork_in_child() -> None:
    global _fork_lock
    _fork_lock = threading.Lock()  # a parent's thread may have held it at the fork


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class Connecting(TimeoutError):
    """The caller's deadline passed while its worker was still connecting (a fresh worker:
    not yet a sign that the database hangs; the connect timeout bounds that)."""


class Job:
    """One piece of work for a worker; ``after(outcome)`` runs on the worker when nobody
    waits for its outcome (posted, or the caller gave up)."""

    __slots__ = ("after", "args", "connecting", "done", "given_up", "outcome", "posted", "work")

    def __init__(
        self,
        work: Callable[..., Any],
        args: tuple[Any, ...],
        after: Callable[[tuple[bool, Any]], None] | None,
        posted: bool,
    ) -> None:
        self.work, self.args, self.after, self.posted = work, args, after, posted
        self.done = threading.Event()
        self.outcome: tuple[bool, Any] | None = None  # (True, result) or (False, exception)
        self.given_up = False
        self.connecting = False


class Workers:
    """At most ``size`` threads running ``work(conn, *args)`` on a connection of their own."""

    def __init__(
        self,
        connect: Callable[[], Any],
        failed: Callable[[BaseException], None],
        size: int = WORKERS,
    ) -> None:
        self._connect, self._failed = connect, failed
        self.size = size
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[Job] = queue.SimpleQueue()
        self._threads = 0
        self._busy = 0
        self.connections: list[Any] = []  # open ones (a forked child keeps them referenced)

    def run(self, timeout: float, work: Callable[..., Any], *args: Any) -> Any:
        """``work(conn, *args)``'s result within ``timeout`` seconds (its exception raised);
        :class:`TimeoutError` past it, the job then skipped, or abandoned if it started."""
        job = Job(work, args, None, False)
        self._submit(job)
        if not job.done.wait(timeout):
            with self._lock:
                if job.outcome is None:
                    job.given_up = True
                    raise (Connecting if job.connecting else TimeoutError)(
                        f"no answer from the database within {timeout:g} s"
                    )
        ok, value = job.outcome  # type: ignore[misc]
        if ok:
            return value
        raise value

    def post(self, work: Callable[..., Any], after: Callable[[tuple[bool, Any]], None]) -> None:
        """Run ``work(conn)`` when a worker is free; ``after(outcome)`` then, on the worker."""
        self._submit(Job(work, (), after, True))

    def _submit(self, job: Job) -> None:
        with self._lock:
            start = (
                self._threads < self.size and self._busy + self._jobs.qsize() + 1 > self._threads
            )
            if start:
                self._threads += 1
        self._jobs.put(job)
        if start:
            threads.start(self._serve, "otel_tokens-budget")

    def _serve(self) -> None:
        conn = None
        while True:
            job = self._jobs.get()
            if not self._started(job):
                continue
            ran = False  # whether the work ran (its caller may have given up while it did)
            try:
                if conn is None:
                    conn = self._open(job)
                outcome: tuple[bool, Any] = (False, Connecting())  # given up meanwhile: skipped
                if self._started(job, connected=True):
                    ran = True
                    outcome = (True, job.work(conn, *job.args))
            except Exception as exc:  # noqa: BLE001 - the caller's to judge
                outcome, conn = (False, exc), self._drop(conn)
            with self._lock:
                self._busy -= 1
                late = job.given_up and ran
                unheard = job.given_up or job.posted
                job.outcome = outcome
            job.done.set()
            if late:  # an abandoned connection is not reused
                conn = self._drop(conn)
            if unheard:
                self._unheard(job, outcome, late)

    def _unheard(self, job: Job, outcome: tuple[bool, Any], late: bool) -> None:
        """An outcome no caller waits for: a failure goes to ``failed`` (a database that
        cannot be reached is found down even when its callers gave up first); ``after``."""
        try:
            ok, value = outcome
            if not ok and not isinstance(value, Connecting):
                self._failed(value)
            if (late or job.posted) and job.after is not None:
                job.after(outcome)
        except Exception as exc:  # noqa: BLE001 - never the host's problem
            faults.report("budget_fleet", exc)

    def _started(self, job: Job, connected: bool = False) -> bool:
        """Whether ``job`` is still wanted (its caller gave up before it started: skipped)."""
        with self._lock:
            if job.given_up:
                return False
            if connected:
                job.connecting = False
            else:
                self._busy += 1
            return True

    def _open(self, job: Job) -> Any:
        job.connecting = True
        conn = self._connect()
        with self._lock:
            self.connections.append(conn)
        return conn

    def _drop(self, conn: Any) -> None:
        """Close ``conn`` (never used again); None, the worker's connection from then on."""
        if conn is not None:
            with self._lock:
                if conn in self.connections:
                    self.connections.remove(conn)
            _close(conn)


class Settler:
    """Settlements queued by callers (never blocking: at most :data:`SETTLE_QUEUE`, dropped
    and counted past it) and written by one thread with ``write(conn, batch)``."""

    def __init__(
        self,
        connect: Callable[[], Any],
        write: Callable[[Any, list[Any]], None],
        failed: Callable[[BaseException], None],
    ) -> None:
        self._connect, self._write, self._failed = connect, write, failed
        self._cond = threading.Condition(threading.Lock())
        self._pending: collections.deque[Any] = collections.deque()
        self._writing = 0  # settlements taken by the thread, not written yet
        self._thread: threading.Thread | None = None
        self.conn: Any = None
        self.dropped = 0
        self.pid = os.getpid()
        _settlers.add(self)

    def put(self, item: Any) -> None:
        """Queue one settlement; never waits."""
        with self._cond:
            if len(self._pending) >= SETTLE_QUEUE:
                self.dropped += 1
                faults.report(
                    "budget_fleet",
                    detail="fleet budget settlements queue full: a "
                    "reservation stays at its projected maximum until its window ends",
                )
                return
            self._pending.append(item)
            self._cond.notify()
            if self._thread is None:
                self._thread = threads.start(self._serve, "otel_tokens-budget-settle")

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every queued settlement to be written."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending or self._writing:
                left = deadline - time.monotonic()
                if left <= 0 or self._thread is None:
                    return False
                self._cond.wait(left)
        return True

    def _serve(self) -> None:
        while True:
            with self._cond:
                while not self._pending:
                    self._cond.wait()
                batch = [
                    self._pending.popleft() for _ in range(min(SETTLE_BATCH, len(self._pending)))
                ]
                self._writing = len(batch)
            written = self._written(batch)
            with self._cond:
                if not written:  # back in front, within the bound
                    room = max(0, SETTLE_QUEUE - len(self._pending))
                    self.dropped += len(batch) - min(room, len(batch))
                    self._pending.extendleft(reversed(batch[:room]))
                self._writing = 0
                self._cond.notify_all()
            if not written:
                time.sleep(RETRY_AFTER)

    def _written(self, batch: list[Any]) -> bool:
        try:
            if self.conn is None:
                self.conn = self._connect()
            self._write(self.conn, batch)
            return True
        except Exception as exc:  # noqa: BLE001 - any failure: retried later
            _close(self.conn)
            self.conn = None
            self._failed(exc)
            return False


def _close(conn: Any) -> None:
    if conn is not None:
        with contextlib.suppress(Exception):  # it is gone either way
            conn.close()


_settlers: weakref.WeakSet[Settler] = weakref.WeakSet()
#: seconds every settler of the process has in all at exit (the owner sets it from
#: ``OTEL_TOKENS_EXIT_TIMEOUT``)
exit_timeout = 1.0


@atexit.register
def _flush_all() -> None:
    """At exit, write what is queued within :data:`exit_timeout` (this process's settlers)."""
    deadline = time.monotonic() + exit_timeout
    for settler in list(_settlers):
        if settler.pid == os.getpid():
            settler.flush(max(0.0, deadline - time.monotonic()))
