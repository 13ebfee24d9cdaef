"""Agent binding: which agent's TokenState and ledger a backend call is accounted to.

``with otel_tokens.agent("planner"):`` (or ``@otel_tokens.agent("planner")``) binds every
call made inside it to the agent entry ``planner``; calls outside any binding go to the
agent ``default``. The binding lives in a :mod:`contextvars` variable, so asyncio tasks
inherit it, while a thread started inside it does not unless the context is passed
(``contextvars.copy_context().run(fn)``, or a binding inside the thread). One ``agent(...)``
object may be entered from many threads and tasks at once: each context keeps its own
binding.

Wrong arguments never raise (the OpenTelemetry API's rule): an empty, blank or non-string
name logs one warning, counts an ``argument`` fault and binds the agent ``default``; an
unusable ``max_input_tokens`` is ignored the same way.

Ledgers of new agents follow the settings ``OTEL_TOKENS_LEDGER_PATH`` (a SQLite file shared
by every agent; unset: in memory) and ``OTEL_TOKENS_LEDGER_MAX_HISTORY`` (records kept in
memory per agent), as :mod:`.ledger_options` gives them when the agent is first used.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, TypeVar

from .. import faults
from ..errors import LedgerPersistenceError
from . import ledger_options

if TYPE_CHECKING:  # imported when the first agent is created (start-up cost)
    from .ledger import UsageLedger
    from .state import TokenState

__all__ = [
    "AgentEntry",
    "DEFAULT_AGENT",
    "FrameworkRun",
    "agent",
    "agents",
    "clear_agents",
    "current_agent",
    "current_attribution",
    "current_who",
]

DEFAULT_AGENT = "default"
#: How long an agent's ledger waits for another writer's SQLite lock. Agent ledgers are written
#: on the host call's own thread, and a write that cannot get the lock is kept in memory and
#: retried with the next one, so waiting long (sqlite3's 5 s) would only stall the host call.
LEDGER_LOCK_WAIT = 0.1

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class AgentEntry:
    """One agent: its name, RFC 00040 token state and usage ledger (weakly referenceable:
    the registry keeps only the most recently used agents strongly)."""

    name: str
    state: TokenState
    ledger: UsageLedger


class _Binding(NamedTuple):
    """One level of binding in a context: the agent, the binding it covers, and who the
    calls are for (user, tenant, conversation; None where this level does not say)."""

    entry: AgentEntry
    outer: _Binding | None
    who: tuple[str | None, str | None, str | None] | None = None


def current_who() -> tuple[str | None, str | None, str | None] | None:
    """(user, tenant, conversation) of the calling context's bindings, the innermost that
    says each winning; None when no binding says any."""
    binding = _current.get()
    found: list[str | None] | None = None
    while binding is not None:
        if binding.who is not None:
            if found is None:
                found = list(binding.who)
            else:
                found = [a if a is not None else b for a, b in zip(found, binding.who)]
        binding = binding.outer
    return tuple(found) if found is not None else None  # type: ignore[return-value]


def _who(
    user: Any, tenant: Any, conversation: Any
) -> tuple[str | None, str | None, str | None] | None:
    """The ``agent(...)`` attribution arguments: strings kept, anything else ignored (counted)."""
    values = []
    for field, value in (("user", user), ("tenant", tenant), ("conversation", conversation)):
        if value is not None and not (isinstance(value, str) and value.strip()):
            faults.report(
                "argument",
                detail=f"agent(): {field}={value!r} ignored (a non-empty string is needed)",
            )
            value = None
        values.append(value)
    return tuple(values) if any(v is not None for v in values) else None  # type: ignore[return-value]


#: agents kept in memory, the most recently used. Past that, the least recently used agent
#: that nothing else holds (a binding, a call in progress) goes dormant: its TokenState (and,
#: without a ledger file, its ledger's totals) is kept in a few hundred bytes and restored at
#: its next call; a ledger file's rows are read again on its first query.
MAX_ACTIVE_AGENTS = 1024
_registry: OrderedDict[str, AgentEntry] = OrderedDict()
_live: weakref.WeakValueDictionary[str, AgentEntry] = weakref.WeakValueDictionary()
_dormant: dict[str, tuple[Any, Any]] = {}
_registry_lock = threading.Lock()
_current: contextvars.ContextVar[_Binding | None] = contextvars.ContextVar(
    "otel_tokens_agent", default=None
)


def valid_name(name: Any, where: str = "agent()") -> str:
    """``name`` when it is a usable agent name; otherwise ``default``, with one warning and an
    ``argument`` fault (never an exception)."""
    if isinstance(name, str) and name.strip():
        return name
    faults.report(
        "argument",
        detail=f"{where}: the agent name must be a non-empty string, got "
        f"{name!r}; using {DEFAULT_AGENT!r}",
        each=True,
    )
    return DEFAULT_AGENT


def get_agent(name: str, max_input_tokens: int | None = None) -> AgentEntry:
    """The entry for ``name`` (assumed valid), created on first use; ``max_input_tokens``
    updates its window (an unusable value is ignored and counted)."""
    entry = _registry.get(name)
    if entry is None:
        with _registry_lock:
            entry = _registry.get(name)
            if entry is None:
                entry = _live.get(name) or _revive(name)
                _registry[name] = entry
                if len(_registry) > MAX_ACTIVE_AGENTS:
                    _registry.popitem(last=False)  # dormant once nothing else holds it
    elif len(_registry) > MAX_ACTIVE_AGENTS // 2:
        try:
            _registry.move_to_end(name)
        except KeyError:
            pass
    if max_input_tokens is not None:
        try:
            entry.state.max_input_tokens = max_input_tokens
        except (ValueError, TypeError) as exc:
            faults.report(
                "argument", exc, f"agent({name!r}): max_input_tokens ignored: {exc}", each=True
            )
    return entry


def _revive(name: str) -> AgentEntry:
    """A new entry for ``name``: its dormant state restored, if it had one."""
    from .state import TokenState

    snapshot = _dormant.pop(name, None)
    state = TokenState.from_snapshot(snapshot[0]) if snapshot is not None else TokenState()
    ledger = _open_ledger(name)
    if snapshot is not None and snapshot[1] is not None and ledger.path is None:
        ledger.restore_totals(snapshot[1])
    entry = AgentEntry(name=name, state=state, ledger=ledger)
    _live[name] = entry
    weakref.finalize(entry, _go_dormant, name, state, ledger, _generation[0])
    return entry


_generation = [0]  # clear_agents() starts a new one: entries of an older one leave nothing


def _go_dormant(name: str, state: TokenState, ledger: UsageLedger, generation: int) -> None:
    """An entry nothing holds any more: keep what its next call needs, compactly."""
    if generation != _generation[0]:
        return  # forgotten by clear_agents(): its ledger was closed there
    try:
        if ledger.path is not None:
            ledger.close()  # pending rows written; the file keeps the rest
            totals = None
        else:
            totals = ledger.dormant_totals()
        if state.snapshot() != _FRESH or totals is not None:
            _dormant[name] = (state.snapshot(), totals)
    except Exception as exc:  # never into the host (this runs when the entry is collected)
        faults.report("internal", exc, f"agent {name!r}: state not kept: {exc!r}")


_FRESH = (None, None, None, 0, 0, None)  # TokenState().snapshot()


def _open_ledger(name: str) -> UsageLedger:
    """The agent's ledger; an unusable file (locked, corrupt, unwritable) must not stop the
    host: that agent's ledger then lives in memory, and the fault is logged and counted."""
    from .ledger import UsageLedger

    options = ledger_options.source()  # every row to PostgreSQL too when a fleet ledger is set
    if options.path is None:
        return UsageLedger(name, max_history=options.max_history, sink=options.sink)
    try:
        return UsageLedger(
            name,
            max_history=options.max_history,
            sink=options.sink,
            path=options.path,
            busy_timeout=LEDGER_LOCK_WAIT,
        )
    except LedgerPersistenceError as exc:
        faults.report("ledger_persistence", exc)
        return UsageLedger(name, max_history=options.max_history, sink=options.sink)


class FrameworkRun(NamedTuple):
    """What an agent framework's run context says of the call in progress: the innermost
    running agent's name and the framework's own conversation (thread, session) id."""

    agent: str | None
    conversation: str | None = None


#: where agent names and conversations come from when the code binds none: one reader per
#: agent framework the application imported (registered by its capture module), each saying
#: what the framework run in the calling context is (None outside any run)
_framework_sources: list[Callable[[], FrameworkRun | None]] = []


#: sources asked only after every framework's own (the GenAI agent spans: generic, and a
#: framework's run context knows its innermost agent at least as well)
_fallback_sources: list[Callable[[], FrameworkRun | None]] = []


def add_framework_source(source: Callable[[], FrameworkRun | None], fallback: bool = False) -> None:
    """Let ``source`` name the agent (and conversation) of calls no ``agent(...)`` binding
    names; a ``fallback`` source is asked after the others, whenever they were added."""
    if source in _framework_sources:
        return
    if fallback:
        # in _framework_sources first: a source added meanwhile on another thread (the GenAI
        # agent spans' one is added by whichever thread takes a tracer) finds every fallback there
        _framework_sources.append(source)
        _fallback_sources.append(source)
    else:
        first = min((_framework_sources.index(s) for s in _fallback_sources), default=None)
        _framework_sources.insert(len(_framework_sources) if first is None else first, source)


def remove_framework_source(source: Callable[[], FrameworkRun | None]) -> None:
    if source in _fallback_sources:  # first: see add_framework_source
        _fallback_sources.remove(source)
    if source in _framework_sources:
        _framework_sources.remove(source)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def current_agent() -> AgentEntry:
    """The agent bound to the calling context (``agent(...)`` in the code wins), else the
    framework agent making the call, else the ``default`` agent."""
    return current_attribution()[0]


def current_attribution() -> tuple[AgentEntry, tuple[str | None, str | None, str | None] | None]:
    """The agent a call is for, and who it is for (user, tenant, conversation; None when
    nothing says). The innermost ``agent(...)`` binding wins, then the framework running
    the call: its innermost agent, its conversation id where no binding gives one."""
    binding = _current.get()
    run = None
    for source in _framework_sources:  # the first framework run (a faulty source: skipped)
        try:
            run = source()
        except Exception as exc:
            faults.report("internal", exc)
            continue
        if run is not None:
            break
    if binding is not None:
        entry = binding.entry
        who = current_who()
    else:
        name = (_text(run.agent) if run is not None else None) or DEFAULT_AGENT
        entry = _registry.get(name)  # get_agent's look-up (the registry's order kept there)
        if entry is None or len(_registry) > MAX_ACTIVE_AGENTS // 2:
            entry = get_agent(name)
        who = None  # no binding says who
    conversation = _text(run.conversation) if run is not None else None
    if conversation is not None and (who is None or who[2] is None):
        who = (who[0], who[1], conversation) if who is not None else (None, None, conversation)
    return entry, who


def agents() -> list[AgentEntry]:
    """Every agent entry in memory (the most recently used, and those still held), oldest
    first."""
    with _registry_lock:
        return list({**dict(_live.items()), **_registry}.values())


def clear_agents() -> None:
    """Close every ledger and forget every agent (tests; long-running hosts between jobs)."""
    with _registry_lock:
        entries = list({**dict(_live.items()), **_registry}.values())
        _registry.clear()
        _live.clear()
        _dormant.clear()
        _generation[0] += 1
    for entry in entries:
        try:
            entry.ledger.close()
        except LedgerPersistenceError as exc:  # e.g. a full disk: close the others all the same
            faults.report("ledger_persistence", exc)


def _unbind(name: str) -> None:
    """Leave the innermost binding of agent ``name`` in this context (its block ended)."""
    binding = _current.get()
    if binding is not None and binding.entry.name == name:
        _current.set(binding.outer)


class agent:  # noqa: N801 - used like a function: ``with agent("x")`` / ``@agent("x")``
    """Bind backend calls to the agent ``name`` (a context manager and a decorator).

    ``max_input_tokens`` is the agent's context window, used for the displayed percentage.
    ``user``, ``tenant`` and ``conversation`` say who the calls inside are for (span
    attributes and ledger rows; on metrics only when ``OTEL_TOKENS_METRIC_ATTRIBUTES`` asks).
    Works with ``with``/``async with`` and on sync and async functions; one object may be
    entered from many threads and tasks at the same time.
    """

    __slots__ = ("_name", "_who")

    def __init__(
        self,
        name: str,
        max_input_tokens: int | None = None,
        *,
        user: str | None = None,
        tenant: str | None = None,
        conversation: str | None = None,
    ) -> None:
        self._name = valid_name(name)
        self._who = _who(user, tenant, conversation)
        get_agent(self._name, max_input_tokens)

    @property
    def name(self) -> str:
        """The agent's name (``default`` when the given one was unusable)."""
        return self._name

    def __enter__(self) -> AgentEntry:
        entry = get_agent(self._name)
        _current.set(_Binding(entry, _current.get(), self._who))
        return entry

    def __exit__(self, *exc: object) -> None:
        _unbind(self._name)

    async def __aenter__(self) -> AgentEntry:
        return self.__enter__()

    async def __aexit__(self, *exc: object) -> None:
        self.__exit__()

    def __call__(self, func: F) -> F:
        name, who = self._name, self._who
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_bound(*args: Any, **kwargs: Any) -> Any:
                token = _current.set(_Binding(get_agent(name), _current.get(), who))
                try:
                    return await func(*args, **kwargs)
                finally:
                    _current.reset(token)

            return async_bound  # type: ignore[return-value]

        @functools.wraps(func)
        def bound(*args: Any, **kwargs: Any) -> Any:
            token = _current.set(_Binding(get_agent(name), _current.get(), who))
            try:
                return func(*args, **kwargs)
            finally:
                _current.reset(token)

        return bound  # type: ignore[return-value]
