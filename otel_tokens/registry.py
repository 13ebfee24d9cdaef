"""The one registry of instrumentation: which backends are patched, whoever asked.

``otel_tokens.instrument()``/``uninstrument()`` and the entry-point instrumentors that
``opentelemetry-instrument`` loads (``OpenAIInstrumentor().instrument()`` ...) all go through
:func:`enable`/:func:`disable` here, so any sequence of them, mixed across the two APIs,
leaves each backend's patches applied exactly once or not at all. A backend is a module of
:data:`otel_tokens.capture.BACKENDS` exposing ``install(**options)``, ``uninstall()`` and
``DEPENDENCIES``; turning one on imports neither its provider SDK nor the per-call machinery.
"""

from __future__ import annotations

import importlib
import os
import threading
import time
from typing import Any

from . import faults, threads
from .capture import BACKENDS
from .dependencies import usable

__all__ = [
    "active",
    "dependencies_of",
    "disable",
    "enable",
    "instrument",
    "is_active",
    "uninstrument",
    "use_providers",
]

_lock = threading.RLock()
_active: dict[str, Any] = {}  # backend name -> its patches module, while patched
_warmed = False


def dependencies_of(name: str) -> tuple[str, ...]:
    """The requirement strings of the library a registered backend instruments."""
    return tuple(importlib.import_module(BACKENDS[name]).DEPENDENCIES)


def is_active(name: str) -> bool:
    """True while backend ``name`` is patched."""
    return name in _active


def active() -> list[str]:
    """Names of the backends currently patched."""
    return list(_active)


def enable(
    name: str, tracer_provider: Any = None, meter_provider: Any = None, **options: Any
) -> bool:
    """Patch backend ``name`` (once); False when its library is not installed."""
    if not usable():  # installed packages below otel_tokens' floors: one line said so
        return False
    with _lock:
        _use_providers(tracer_provider, meter_provider)
        return _enable(name, options)


def disable(name: str) -> None:
    """Unpatch backend ``name`` (original functions restored); a no-op when it is not on."""
    with _lock:
        module = _active.pop(name, None)
        if module is not None:
            try:
                module.uninstall()
            except Exception as exc:
                faults.report("internal", exc, f"cannot uninstall {name}: {exc!r}")


def instrument(
    tracer_provider: Any = None, meter_provider: Any = None, **options: Any
) -> list[str]:
    """Turn on every registered backend; returns the names of those on.

    Like every ``BaseInstrumentor``, explicit ``tracer_provider``/``meter_provider`` are used
    when given, else the global ones. The settings are read and checked now (a bad one is one
    line, never an exception). A backend whose library is not imported yet is patched when
    the application imports it. With installed packages older than otel_tokens needs, nothing
    is turned on (one line says which, and what to install).
    """
    if not usable():  # installed packages below otel_tokens' floors: one line said so
        return []
    with _lock:
        _use_providers(tracer_provider, meter_provider)
        for name in BACKENDS:
            if name not in _active:
                _enable(name, options)
        return list(_active)


def uninstrument() -> None:
    """Turn off every backend (original functions restored)."""
    with _lock:
        for name in list(_active):
            disable(name)


def _enable(name: str, options: dict[str, Any]) -> bool:
    if name in _active:
        return True
    try:
        module = importlib.import_module(BACKENDS[name])
        if module.install(**options) is False:
            return False
    except Exception as exc:  # a backend that cannot be patched: the others still are
        faults.report("internal", exc, f"cannot instrument {name}: {exc!r}")
        return False
    _active[name] = module
    return True


def use_providers(tracer_provider: Any = None, meter_provider: Any = None) -> None:
    """Record to these providers from now on (the process-wide handler is rebuilt on them),
    whichever backends are on; an instrumentor already on calls this for its providers."""
    with _lock:
        _use_providers(tracer_provider, meter_provider)


def _use_providers(tracer_provider: Any, meter_provider: Any) -> None:
    """Explicit providers: a handler on them now (sharing the instruments an earlier handler
    made on the same meter provider: see :mod:`otel_tokens.emit.recorder`). Otherwise the
    settings are checked now, and the handler is built on the global providers by the first
    call or the warm-up."""
    global _warmed
    from .settings import current

    current()  # reads and checks every setting once (bad ones: one line each)
    if tracer_provider is not None or meter_provider is not None:
        from .handler import Handler, set_handler

        try:
            set_handler(Handler(tracer_provider, meter_provider))
        except Exception as exc:  # not providers: the global ones serve instead
            faults.report(
                "argument",
                exc,
                f"instrument(tracer_provider=..., meter_provider=...): "
                f"unusable ({exc!r}); the global providers are used",
                each=True,
            )
    if not _warmed:
        _warmed = True
        threads.start(_warm_up, "otel_tokens-warm-up")


#: held while the warm-up imports modules and loads data; a fork waits for it, so a child
#: (gunicorn --preload, a fork pool) never inherits a module import lock or a cache lock held
#: by the warm-up thread (the child would hang at its first import of that module)
_warming = threading.Lock()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_warming.acquire, after_in_parent=_warming.release, after_in_child=_warming.release
    )


def _warm_up(delay: float = 0.5) -> None:
    """Build the handler and load price data and tokenizer encodings in the background,
    after the host's own start-up (a call before then simply does it itself)."""
    time.sleep(delay)
    with _warming:
        _warm()


def _warm() -> None:
    try:
        from .account.estimate import warm_up as warm_up_tokenizers
        from .emit.setup import providers_closed
        from .handler import get_handler, handler_is_unset

        if handler_is_unset() and providers_closed():
            return  # the process is ending: no handler to build on shut-down providers

        get_handler().pricer.warm_up(background=False)
        warm_up_tokenizers()
    except Exception as exc:
        faults.report("internal", exc, f"warm-up failed: {exc!r}")
