"""Forked children: each starts clean and gets its usage out however it ends.

A child made by ``os.fork`` (``multiprocessing``'s fork start method, gunicorn ``--preload``,
Celery prefork) inherits the parent's providers, metric state and ``/metrics`` socket. For the
providers ``configure()`` built, right after the fork the child:

* gets its own ``service.instance.id`` (its series are its own, never the parent's);
* starts with empty metric state: the SDK's aggregations and otel_tokens' counter sums are
  dropped, so it never exports the parent's counts again (the SDK's own fork hook restarts
  the export threads);
* serves no inherited port: it joins the port's front as a worker (:mod:`.workers`);
* sends its telemetry before it ends, however it ends: at interpreter exit, at a
  ``multiprocessing`` worker's exit (``os._exit`` after its finalizers, where ``atexit`` never
  runs), at a billiard worker's exit (Celery prefork: ``--max-tasks-per-child``, warm and cold
  shutdown; billiard's ``Pool``), at any ``os._exit()`` (a bare ``os.fork()`` child), and on
  SIGTERM when nothing else handles it (a pool's ``terminate()``): the signal or exit status
  is then as before, after the flush (at most ``OTEL_TOKENS_EXIT_TIMEOUT`` for the exporter).
  Only SIGKILL (or an ``_exit`` from C) loses what the child counted since its last export;
  a Celery child's parent-death SIGKILL (a cold shutdown) is lifted while it flushes.

A ``multiprocessing`` child started by spawn or forkserver (no fork hook runs there) gets the
same exit flush when it sets otel_tokens up (:func:`multiprocessing_child`).

A uvicorn server (one process, each ``--workers`` process, gunicorn's uvicorn worker) stopped by
SIGTERM or SIGINT shuts down gracefully, then puts the signal's handler back as it was before it
started (the default: the app module is imported after) and raises the signal again: the
process dies by it, with no ``atexit``. It flushes (the at-exit table included) once uvicorn's
own shutdown has ended, before the signal is raised again (:func:`_flush_at_uvicorn_stop`).

The ledger needs nothing here: its rows are written per call, and a child opens its own
SQLite connection (:mod:`otel_tokens.account.ledger.sqlite`).
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import sys
import threading
import time
import uuid
from typing import Any, Callable, NoReturn

from .. import faults, threads
from . import sums

__all__ = ["deliver_deferred_signal", "install", "multiprocessing_child"]

_log = logging.getLogger("otel_tokens")
_installed = False
KICK_SECONDS = 0.25  # how often a SIGTERM the main thread has not acted on is re-sent
FINAL_METRICS_WAIT = 10.0  # seconds an exit waits at most for the last metrics to be left
_deferred: list[int] = []  # a SIGTERM that arrived while the process was already flushing
_began = False  # the SIGTERM handler has begun (a plain flag: read by the watcher, no lock)
_get_setup: Callable[[], Any] | None = None


def install(get_setup: Callable[[], Any]) -> None:
    """Register the fork hook once (``get_setup`` returns the current ``Setup``)."""
    global _installed, _get_setup
    _get_setup = get_setup
    if not _installed and hasattr(os, "register_at_fork"):
        _installed = True
        os.register_at_fork(
            before=_quiesce, after_in_parent=_resume, after_in_child=_after_fork_in_child
        )
    _flush_at_billiard_exit()  # a pool worker that billiard spawned (a new interpreter)
    _flush_in_spawned_child(get_setup())
    _flush_at_uvicorn_stop()


def _flush_in_spawned_child(setup: Any) -> None:
    """A ``multiprocessing`` child started by spawn or forkserver (a new interpreter or a
    fork of a bare server: no fork hook of otel_tokens runs) gets a forked child's exit
    flush: a forkserver child ends in ``os._exit``, and any by SIGTERM (a pool's
    ``terminate()``, ``Process.terminate()``)."""
    if setup is not None and setup.own_providers and multiprocessing_child():
        _flush_at_any_exit(setup)


def multiprocessing_child() -> bool:
    """Whether this process is a ``multiprocessing`` child (a pool worker, a ``Process``):
    spawned, seen from its start (``sitecustomize``: its command line), while it imports the
    parent's main module (``_inheriting``) or after (``parent_process()``)."""
    if getattr(sys, "argv", [])[1:2] == [
        "--multiprocessing-fork"
    ]:  # multiprocessing.spawn.is_forking()
        return True
    mp = sys.modules.get("multiprocessing")
    if mp is None:
        return False
    return getattr(mp.current_process(), "_inheriting", False) or mp.parent_process() is not None


_held: list[Any] = []  # export locks held across a fork
_masks: list[Any] = []  # the forking thread's signal mask, while SIGTERM/SIGINT are blocked


def _quiesce() -> None:
    """Before a fork: wait (at most the exit timeout) for a metric export in flight, so the
    child never inherits the exporter thread half-way (a held import or connection lock).
    SIGTERM and SIGINT are blocked until after the fork, so that the threads the SDK and
    otel_tokens start again in the child never take them (``threads``)."""
    _masks.append(threads.block())
    setup = _get_setup() if _get_setup is not None else None
    if setup is None or not setup.own_providers:
        return
    consumer = getattr(setup.meter_provider, "_measurement_consumer", None)
    for reader in list(getattr(consumer, "_reader_storages", None) or ()):
        lock = getattr(reader, "_export_lock", None)
        if lock is not None and lock.acquire(timeout=setup.exit_timeout):
            _held.append(lock)


def _resume() -> None:
    while _held:
        _held.pop().release()
    if _masks:
        threads.restore(_masks.pop())


def _after_fork_in_child() -> None:
    """Registered after the SDK's own fork hooks, so it runs after they have started their
    threads again: the signal mask is restored last."""
    _held.clear()  # the child's readers get new locks (_drop_metric_state)
    try:
        _reset_child()
    finally:
        if _masks:
            threads.restore(_masks.pop())


def _reset_child() -> None:
    setup = _get_setup() if _get_setup is not None else None
    if setup is None or not setup.own_providers:
        return
    try:
        instance = str(uuid.uuid4())
        _new_instance(setup, instance)
        _drop_metric_state(setup.meter_provider)
        sums.reset_all()
        if setup.endpoint is not None:
            setup.endpoint.after_fork_in_child()
        _flush_at_any_exit(setup)
    except Exception as exc:  # never into the host's child
        faults.report("internal", exc, f"forked child: telemetry not reset: {exc!r}")


def _new_instance(setup: Any, instance: str) -> None:
    """The child's own ``service.instance.id`` on its metrics and on spans of tracers made
    after the fork."""
    from opentelemetry.sdk.resources import Resource

    update = Resource({"service.instance.id": instance})
    config = getattr(setup.meter_provider, "_sdk_config", None)
    if config is not None and getattr(config, "resource", None) is not None:
        config.resource = config.resource.merge(update)
    tracer_provider = setup.tracer_provider
    if getattr(tracer_provider, "_resource", None) is not None:
        tracer_provider._resource = tracer_provider._resource.merge(update)


def _drop_metric_state(meter_provider: Any) -> None:
    """Empty the SDK's per-reader aggregations (they are rebuilt at the next measurement)."""
    consumer = getattr(meter_provider, "_measurement_consumer", None)
    storages = getattr(consumer, "_reader_storages", None)
    if not isinstance(storages, dict):
        raise RuntimeError(
            "this opentelemetry-sdk keeps metric state where otel_tokens cannot reset it"
        )
    # locks another thread of the parent held at the fork stay held for ever in the child
    consumer._lock = threading.Lock()
    for reader in storages:
        for name, kind in (("_export_lock", threading.Lock), ("_lock", threading.RLock)):
            if hasattr(reader, name):
                setattr(reader, name, kind())
        _new_session(getattr(reader, "_exporter", None))
    for storage in storages.values():
        if not isinstance(getattr(storage, "_instrument_view_instrument_matches", None), dict):
            raise RuntimeError(
                "this opentelemetry-sdk keeps metric state where otel_tokens cannot reset it"
            )
        storage._lock = threading.RLock()
        storage._instrument_view_instrument_matches = {}


def _new_session(exporter: Any) -> None:
    """An OTLP/HTTP exporter's own connections: the parent's may have been mid-request at the
    fork (a shared socket answers the wrong process)."""
    inner = getattr(exporter, "_exporter", exporter)  # a GuardedMetricExporter's
    old = getattr(inner, "_session", None)
    if old is not None and hasattr(old, "headers"):
        import requests

        new = requests.Session()
        new.headers.update(old.headers)
        inner._session = new


def _flush_at_any_exit(setup: Any) -> None:
    """``multiprocessing`` finalizers (run before a worker's ``os._exit``), a billiard
    worker's exit, any ``os._exit()`` of this process, and SIGTERM."""
    _flush_at_billiard_exit()
    _flush_at_os_exit()
    if "multiprocessing" in sys.modules:
        from multiprocessing import util

        # a multiprocessing child clears its finalizers after the fork, then runs the
        # after-fork callbacks: the finalizer is registered from one of those
        util.register_after_fork(setup, _finalize_at_exit)
        _finalize_at_exit(setup)
    global _began
    _began = False  # a handler begun in the parent is not this process's
    _deferred.clear()
    try:
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _flush_then_terminate)
            _watch_for_sigterm(setup)
    except (ValueError, OSError):  # not the main thread: no signal handler can be set
        pass


def _flush_at_billiard_exit() -> None:
    """A billiard pool worker (Celery prefork, or billiard's ``Pool`` used directly) ends in
    ``Worker._do_exit``: ``on_exit`` (Celery's ``worker_process_shutdown``), its death
    notice to the pool, then ``os._exit()``; no finalizer or ``atexit`` hook runs, and
    Celery's child initializer resets SIGTERM (billiard's handler raises ``SystemExit``,
    which also ends there). The worker flushes as ``_do_exit`` begins, while the pool still
    counts it alive, with SIGTERM held until it ends and the parent's death no longer fatal
    to it. Patched at ``configure()`` (a spawned worker) and in a forked child, only
    where billiard is imported already: otel_tokens never imports it."""
    pool = sys.modules.get("billiard.pool")
    worker = getattr(pool, "Worker", None)
    do_exit = getattr(worker, "_do_exit", None)
    if do_exit is None or getattr(do_exit, "_otel_tokens_flush", False):
        return

    @functools.wraps(do_exit)
    def _do_exit(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            _outlive_parent()
            with threads.quiet():  # a terminate signal meanwhile comes after the flush
                _flush_before_exit()
        finally:  # ends in os._exit(): an exception raised meanwhile never escapes it
            do_exit(self, *args, **kwargs)

    _do_exit._otel_tokens_flush = True  # type: ignore[attr-defined]
    worker._do_exit = _do_exit  # type: ignore[union-attr]


_uvicorn_hooked = False


def _flush_at_uvicorn_stop() -> None:
    """Patch uvicorn's ``Server.shutdown`` when ``uvicorn.server`` is imported (at once when it
    is already: the app module is imported while the server's ``serve()`` runs, which looks
    ``shutdown`` up on the class only when it stops). otel_tokens never imports uvicorn."""
    global _uvicorn_hooked
    if not _uvicorn_hooked:
        _uvicorn_hooked = True
        import wrapt

        wrapt.register_post_import_hook(_patch_uvicorn_shutdown, "uvicorn.server")


def _patch_uvicorn_shutdown(module: Any) -> None:
    server = getattr(module, "Server", None)
    shutdown = getattr(server, "shutdown", None)
    if shutdown is None or getattr(shutdown, "_otel_tokens_flush", False):
        return

    @functools.wraps(shutdown)
    async def _shutdown(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await shutdown(self, *args, **kwargs)
        finally:  # the graceful shutdown is over: the signal is raised again next
            if _stopped_by_signal(self):
                _flush_before_signal()

    _shutdown._otel_tokens_flush = True  # type: ignore[attr-defined]
    server.shutdown = _shutdown  # type: ignore[union-attr]


def _stopped_by_signal(server: Any) -> bool:
    """Whether this uvicorn server stops for a SIGTERM or SIGINT it caught (only on the main
    thread: a server run on another thread catches none, and its process goes on)."""
    caught = getattr(server, "_captured_signals", None) or ()
    return threading.current_thread() is threading.main_thread() and any(
        sig in (signal.SIGTERM, signal.SIGINT) for sig in caught
    )


def _flush_before_signal() -> None:
    """The at-exit table, then the exit flush: what ``atexit`` would do, in that order (a
    later ``atexit``, after a SIGINT's ``KeyboardInterrupt``, does neither again)."""
    summary = sys.modules.get("otel_tokens.emit.summary")  # loaded only where it is on
    if summary is not None:
        summary.print_summary()
    _flush_before_exit()


def _outlive_parent() -> None:
    """Celery has its pool workers SIGKILLed when the worker's main process ends, which a cold
    shutdown ends at once: cleared for the exit flush (bounded by the exit timeout)."""
    clear = getattr(sys.modules.get("billiard.util"), "set_pdeathsig", None)
    try:
        if clear is not None:
            clear(0)
    except OSError:  # not Linux: nothing was set
        pass


_exit_pid = 0  # the forked child whose os._exit() flushes first (not its own children)


def _flush_at_os_exit() -> None:
    """A child made by a bare ``os.fork()`` that ends with ``os._exit()`` runs nothing at its
    exit: ``os._exit`` flushes first (the same status after; never a raise instead of the
    exit). Not for ``_exit`` bound before the fork nor a C ``_exit``; SIGKILL loses as ever."""
    global _exit_pid
    _exit_pid = os.getpid()
    real = os._exit
    if getattr(real, "_otel_tokens_flush", False):  # a grandchild: the child's wrapper
        return

    @functools.wraps(real)
    def _exit(status: int) -> NoReturn:
        try:
            if os.getpid() == _exit_pid:
                _flush_before_exit()
        finally:
            real(status)

    _exit._otel_tokens_flush = True  # type: ignore[attr-defined]
    os._exit = _exit


def _flush_before_exit() -> None:
    """This process's telemetry, sent before it vanishes: on another thread, waited for at
    most ``FINAL_METRICS_WAIT`` (so a lock the exiting code holds, e.g. ``os._exit`` from a
    signal handler, cannot stall the exit for ever). Never raises into the host."""
    try:
        setup = _get_setup() if _get_setup is not None else None
        if setup is not None:
            _flush_aside(setup)
    except Exception as exc:
        faults.report("internal", exc, f"forked child: telemetry not sent at exit: {exc!r}")


def _flush_aside(setup: Any) -> None:
    """``setup.shutdown()`` on another thread (a flush begun already is waited for): the last
    metrics are local work (a file for the /metrics front), not the exporter's deadline: on a
    starved machine they may take longer, and without them the front would lose every count
    of this process."""
    threads.start(setup.shutdown, "otel_tokens-exit")
    setup.final_left.wait(max(FINAL_METRICS_WAIT, setup.exit_timeout))
    setup.wait_ended(setup.exit_timeout + 0.5)


def _watch_for_sigterm(setup: Any) -> None:
    """A Python handler runs only when the main thread next runs Python code: a SIGTERM that
    comes just before the main thread blocks in C (a Pool worker entering its queue's
    semaphore wait as ``terminate()`` signals it) would wait for ever. Python's wakeup fd
    tells a watching thread at once; it re-sends the signal to the main thread, whose wait
    is then interrupted, until the handler has begun (not when the fd is someone else's,
    e.g. asyncio's: it is put back at once; SIGTERM and SIGINT are blocked meanwhile)."""
    reader, writer = os.pipe()
    os.set_blocking(writer, False)
    previous = signal.set_wakeup_fd(writer, warn_on_full_buffer=False)
    if previous != -1:  # another's: it stays theirs
        signal.set_wakeup_fd(previous)
        os.close(reader)
        os.close(writer)
        return
    threads.start(_kick_main_thread, "otel_tokens-sigterm-watch", reader)


def _kick_main_thread(reader: int) -> None:
    """Once: at the first SIGTERM, re-send it to the main thread until the handler has begun
    (or another handler replaced ours). The re-sent signals write to the wakeup fd too; it is
    not read again, so they never start another round."""
    main = threading.main_thread().ident
    while True:
        try:
            if signal.SIGTERM in os.read(reader, 64):
                break
        except OSError:
            return
    while not _began and signal.getsignal(signal.SIGTERM) is _flush_then_terminate:
        time.sleep(KICK_SECONDS)
        if not _began:
            signal.pthread_kill(main, signal.SIGTERM)


def _finalize_at_exit(setup: Any) -> None:
    from multiprocessing import util

    util.Finalize(None, setup.shutdown, exitpriority=-100)  # after the pool's own


def _flush_then_terminate(signum: int, frame: Any) -> None:
    """SIGTERM in a forked child nobody else handles: flush, then die by the signal as before.
    Entered once: a signal while it runs (a re-sent one, a second SIGTERM) returns at once,
    so its waits never nest and it ends the process within ``FINAL_METRICS_WAIT`` and the
    exit timeout."""
    global _began
    if _began:
        return
    _began = True
    setup = _get_setup() if _get_setup is not None else None
    if setup is not None:
        if _inside_flush(setup, frame):
            # this thread's own exit flush was interrupted (perhaps inside a lock the flush
            # needs, so waiting for it here would wait for ever): it delivers the signal
            _deferred.append(signum)
            return
        # the flush on another thread, so that a lock the interrupted code holds cannot stall
        # it (a flush another thread has begun is waited for instead)
        _flush_aside(setup)
    _terminate(signum)


def _inside_flush(setup: Any, frame: Any) -> bool:
    """Whether the interrupted code is an exit flush on this thread: ``setup``'s (its
    ``shutdown()`` delivers a deferred signal when it returns) or the at-exit summary's
    (``atexit`` runs ``shutdown()`` right after it; it may hold the metric SDK's locks)."""
    summary = sys.modules.get("otel_tokens.emit.summary")  # loaded only where it is on
    codes = (
        getattr(getattr(type(setup), "_flush", None), "__code__", None),
        getattr(getattr(summary, "print_summary", None), "__code__", None),
    )
    while frame is not None:
        if frame.f_code in codes:
            return True
        frame = frame.f_back
    return False


def deliver_deferred_signal() -> None:
    """After a flush a SIGTERM interrupted: the signal, as it would have been (on the main
    thread; a flush on another thread leaves it to the handler that started it)."""
    if _deferred and threading.current_thread() is threading.main_thread():
        _terminate(_deferred.pop())


def _terminate(signum: int) -> None:
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
