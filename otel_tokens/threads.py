"""Threads otel_tokens starts never take the host's SIGTERM or SIGINT.

The kernel hands a signal sent to the process to any thread that does not block it, and Python
runs the handler only on the main thread, when that thread next runs Python code. A signal
landing on a background thread while the main thread waits in C (a ``multiprocessing`` worker
on its queue's semaphore) is never acted on, and ``Pool.terminate()`` hangs for ever. Threads
started under :func:`quiet` inherit a mask that blocks both, so the main thread gets them."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

__all__ = ["quiet", "start"]

_HOST_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT})


@contextmanager
def quiet() -> Iterator[None]:
    """Threads started inside (by otel_tokens or by a library it calls) block SIGTERM and
    SIGINT; the calling thread's mask is restored after (a signal meanwhile stays pending)."""
    mask = block()
    try:
        yield
    finally:
        restore(mask)


def block() -> Any:
    """Block SIGTERM and SIGINT in this thread; returns what :func:`restore` takes."""
    sigmask = getattr(signal, "pthread_sigmask", None)
    return None if sigmask is None else sigmask(signal.SIG_BLOCK, _HOST_SIGNALS)


def restore(mask: Any) -> None:
    if mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def start(target: Callable[..., Any], name: str, *args: Any) -> threading.Thread:
    """A daemon thread running ``target(*args)``, started under :func:`quiet`."""
    thread = threading.Thread(target=target, args=args, name=name, daemon=True)
    with quiet():
        thread.start()
    return thread
