"""Agent binding: which agent's TokenState and ledger a backend call is accounted to.

``with otel_tokens.agent("planner"):`` (or ``@otel_tokens.agent("planner")``) binds every
call made inside it to the agent entry ``planner``; calls outside any binding go to the
agent ``default``. The binding lives in a :mod:`contextvars` variable, so asyncio tasks
inherit it naturally, while a thread started inside it does not unless the context is passed
explicitly (``contextvars.copy_context().run(fn)``, or a binding inside the thread).

Ledgers of new agents are configured from the environment:
``OTEL_TOKENS_LEDGER_PATH`` (SQLite file shared by every agent; unset: in memory) and
``OTEL_TOKENS_LEDGER_MAX_HISTORY`` (records kept in memory per agent; default 10000).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from .errors import LedgerPersistenceError

if TYPE_CHECKING:  # imported when the first agent is created (start-up cost)
    from .ledger import UsageLedger
    from .state import TokenState

__all__ = ["AgentEntry", "DEFAULT_AGENT", "agent", "agents", "clear_agents", "current_agent"]

DEFAULT_AGENT = "default"
DEFAULT_MAX_HISTORY = 10_000
#: How long an agent's ledger waits for another writer's SQLite lock. Agent ledgers are written
#: on the host call's own thread, and a write that cannot get the lock is kept in memory and
#: retried with the next one, so waiting long (sqlite3's 5 s) would only stall the host call.
LEDGER_LOCK_WAIT = 0.1

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class AgentEntry:
    """One agent: its name, RFC 00040 token state and usage ledger."""

    name: str
    state: TokenState
    ledger: UsageLedger


_registry: dict[str, AgentEntry] = {}
_registry_lock = threading.Lock()
_current: contextvars.ContextVar[AgentEntry | None] = contextvars.ContextVar(
    "otel_tokens_agent", default=None
)


def _ledger_settings() -> dict[str, Any]:
    """Ledger options from the environment, with errors that name the variable."""
    settings: dict[str, Any] = {"max_history": DEFAULT_MAX_HISTORY}
    raw = os.environ.get("OTEL_TOKENS_LEDGER_MAX_HISTORY", "").strip()
    if raw:
        try:
            value = int(raw)
            if value < 1:
                raise ValueError
        except ValueError:
            raise ValueError(
                f"OTEL_TOKENS_LEDGER_MAX_HISTORY must be a positive integer, got {raw!r}"
            ) from None
        settings["max_history"] = value
    path = os.environ.get("OTEL_TOKENS_LEDGER_PATH", "").strip()
    if path:
        settings["path"] = path
        settings["busy_timeout"] = LEDGER_LOCK_WAIT
    return settings


def get_agent(name: str, max_input_tokens: int | None = None) -> AgentEntry:
    """The entry for ``name``, created on first use; ``max_input_tokens`` updates its window."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"agent name must be a non-empty string, got {name!r}")
    entry = _registry.get(name)
    if entry is None:
        with _registry_lock:
            entry = _registry.get(name)
            if entry is None:
                from .state import TokenState

                entry = AgentEntry(
                    name=name, state=TokenState(max_input_tokens), ledger=_open_ledger(name)
                )
                _registry[name] = entry
                return entry
    if max_input_tokens is not None:
        entry.state.max_input_tokens = max_input_tokens
    return entry


def _open_ledger(name: str) -> UsageLedger:
    """The agent's ledger; an unusable file (locked, corrupt, unwritable) must not stop the
    host: that agent's ledger then lives in memory, and the fault is logged and counted."""
    from .ledger import UsageLedger

    settings = _ledger_settings()
    try:
        return UsageLedger(name, **settings)
    except LedgerPersistenceError as exc:
        if "path" not in settings:
            raise
        _report("ledger_persistence", exc)
        settings.pop("path")
        return UsageLedger(name, **settings)


def _report(kind: str, exc: BaseException) -> None:
    from .telemetry.pipeline import get_pipeline  # the pipeline depends on this module

    get_pipeline().faults.report(kind, exc)


def current_agent() -> AgentEntry:
    """The agent bound to the calling context, or the ``default`` agent."""
    entry = _current.get()
    return entry if entry is not None else get_agent(DEFAULT_AGENT)


def agents() -> list[AgentEntry]:
    """Every agent entry created so far, in creation order."""
    with _registry_lock:
        return list(_registry.values())


def clear_agents() -> None:
    """Close every ledger and forget every agent (tests; long-running hosts between jobs)."""
    with _registry_lock:
        entries = list(_registry.values())
        _registry.clear()
    for entry in entries:
        try:
            entry.ledger.close()
        except LedgerPersistenceError as exc:  # e.g. a full disk: close the others all the same
            _report("ledger_persistence", exc)


class agent:  # noqa: N801 - used like a function: ``with agent("x")`` / ``@agent("x")``
    """Bind backend calls to the agent ``name`` (a context manager and a decorator).

    ``max_input_tokens`` is the agent's context window, used for the displayed percentage.
    Works with ``with``/``async with`` and on sync and async functions.
    """

    __slots__ = ("_name", "_max_input_tokens", "_tokens")

    def __init__(self, name: str, max_input_tokens: int | None = None) -> None:
        get_agent(name, max_input_tokens)  # validate now, not at first use
        self._name = name
        self._max_input_tokens = max_input_tokens
        self._tokens: list[contextvars.Token[AgentEntry | None]] = []

    def __enter__(self) -> AgentEntry:
        entry = get_agent(self._name)
        self._tokens.append(_current.set(entry))
        return entry

    def __exit__(self, *exc: object) -> None:
        _current.reset(self._tokens.pop())

    async def __aenter__(self) -> AgentEntry:
        return self.__enter__()

    async def __aexit__(self, *exc: object) -> None:
        self.__exit__()

    def __call__(self, func: F) -> F:
        name = self._name
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_bound(*args: Any, **kwargs: Any) -> Any:
                token = _current.set(get_agent(name))
                try:
                    return await func(*args, **kwargs)
                finally:
                    _current.reset(token)

            return async_bound  # type: ignore[return-value]

        @functools.wraps(func)
        def bound(*args: Any, **kwargs: Any) -> Any:
            token = _current.set(get_agent(name))
            try:
                return func(*args, **kwargs)
            finally:
                _current.reset(token)

        return bound  # type: ignore[return-value]
