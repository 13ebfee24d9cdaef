"""Agent names and conversation ids read from an agent framework's own run context:
installed when the application imports the framework, nothing imported or patched before
(see :func:`otel_tokens.account.agents.add_framework_source`). A framework that keeps no
readable run context is told by wrapping its agent-run methods (:class:`RunScopes`): while
one runs, its agent is the calling context's."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib.util
import inspect
import sys
import threading
from typing import Any, Callable, Iterable, Iterator

import wrapt

from ... import faults
from ...account.agents import FrameworkRun, add_framework_source, remove_framework_source

__all__ = ["FrameworkNames", "RunScopes", "run_wrapper", "wrapped_run"]


class FrameworkNames:
    """``reader`` says what framework run the calls are in once ``module`` (the framework's
    run-context module) is imported."""

    def __init__(self, module: str, reader: Callable[[], FrameworkRun | None]) -> None:
        self.module, self.reader = module, reader
        self.installed = self._hooked = False

    def _on_import(self, _module: object) -> None:
        if self.installed:
            add_framework_source(self.reader)

    def install(self) -> bool:
        """False when the framework is not installed."""
        try:  # the top-level package only: finding a submodule would import its parents
            package = self.module.partition(".")[0]
            if package not in sys.modules and importlib.util.find_spec(package) is None:
                return False
        except (ImportError, ValueError):
            return False
        self.installed = True
        if self.module in sys.modules:
            add_framework_source(self.reader)
        elif not self._hooked:
            wrapt.register_post_import_hook(self._on_import, self.module)
            self._hooked = True
        return True

    def uninstall(self) -> None:
        self.installed = False
        remove_framework_source(self.reader)


#: the innermost agent run of a wrapped framework in this context (every framework told by
#: wrapping its agent-run methods shares it, so the innermost wins across frameworks too)
_runs: contextvars.ContextVar[FrameworkRun | None] = contextvars.ContextVar(
    "otel_tokens_framework_run", default=None
)


def wrapped_run() -> FrameworkRun | None:
    """The agent run a wrapped agent-run method says the calling context is in, or None."""
    return _runs.get()


#: describe(agent object, call args, call kwargs) -> the run it starts (None: not an agent run)
Describe = Callable[[Any, tuple, dict], "FrameworkRun | None"]


def _enter(describe: Describe, instance: Any, args: tuple, kwargs: dict) -> Any:
    """Set the run ``describe`` tells of (the outer run's conversation where it gives none);
    the token to reset, or None when it tells none (a framework change: counted, skipped)."""
    try:
        run = describe(instance, args, kwargs)
    except Exception as exc:
        faults.report("internal", exc)
        return None
    if run is None:
        return None
    outer = _runs.get()
    if run.conversation is None and outer is not None and outer.conversation is not None:
        run = FrameworkRun(run.agent, outer.conversation)
    return _runs.set(run)


def _leave(token: Any) -> None:
    if token is not None:
        try:
            _runs.reset(token)
        except ValueError:  # reset from another context (a generator finished elsewhere)
            pass


#: adapt(result, scope) -> result: makes ``scope()`` (a context manager setting the run) be
#: entered around each step of a framework's own stream object
Adapt = Callable[[Any, Callable[[], Any]], Any]


@contextlib.contextmanager
def _scope(run: FrameworkRun) -> Iterator[None]:
    token = _runs.set(run)
    try:
        yield
    finally:
        _leave(token)


def run_wrapper(
    describe: Describe, adapt: Adapt | None = None
) -> Callable[[bool], Callable[..., Any]]:
    """A wrapper factory making the agent run ``describe`` tells of current while the wrapped
    method runs: sync or coroutine, and what it returns when that is a coroutine or a generator
    (sync or async: current during each step, so nothing leaks into the consumer between items)
    or, through ``adapt``, a framework's own stream object."""

    def factory(_: bool) -> Callable[..., Any]:
        def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
            if inspect.iscoroutinefunction(wrapped):
                run = _described(describe, instance, args, kwargs)
                return _awaited(wrapped(*args, **kwargs), run)
            token = _enter(describe, instance, args, kwargs)
            try:
                result = wrapped(*args, **kwargs)
                run = _runs.get() if token is not None else None
            finally:
                _leave(token)
            if run is None:
                return result
            if inspect.isgenerator(result):  # a run streamed: its steps run when consumed
                return _steps(result, run)
            if inspect.isasyncgen(result):
                return _async_steps(result, run)
            if inspect.iscoroutine(result):
                return _awaited(result, run)
            if adapt is not None:
                try:
                    return adapt(result, functools.partial(_scope, run))
                except Exception as exc:  # the framework moved: counted, the result unchanged
                    faults.report("internal", exc)
            return result

        return wrapper

    return factory


def _described(describe: Describe, instance: Any, args: tuple, kwargs: dict) -> FrameworkRun | None:
    """The run ``describe`` tells of, as it would be set now."""
    token = _enter(describe, instance, args, kwargs)
    run = _runs.get() if token is not None else None
    _leave(token)
    return run


async def _awaited(coroutine: Any, run: FrameworkRun | None) -> Any:
    token = _runs.set(run) if run is not None else None
    try:
        return await coroutine
    finally:
        _leave(token)


def _steps(gen: Any, run: FrameworkRun) -> Any:
    """Yield from ``gen`` with the run current while each item is made."""
    try:
        while True:
            token = _runs.set(run)
            try:
                item = next(gen)
            except StopIteration as stop:
                return stop.value
            finally:
                _leave(token)
            yield item
    finally:
        gen.close()


async def _async_steps(gen: Any, run: FrameworkRun) -> Any:
    try:
        while True:
            token = _runs.set(run)
            try:
                item = await gen.__anext__()
            except StopAsyncIteration:
                return
            finally:
                _leave(token)
            yield item
    finally:
        await gen.aclose()


_scopes_installed: set[int] = set()  # ids of the RunScopes installed (the source stays while any)


class RunScopes:
    """A framework's agent runs, told by wrapping its agent-run methods: ``targets`` are
    (module, class, method, describe); each module is patched when the application imports it
    (the class is looked up on whatever ``sys.modules`` holds under that name)."""

    def __init__(
        self,
        package: str,
        targets: Iterable[tuple[str, str, str, Describe]],
        adapt: Adapt | None = None,
    ) -> None:
        self.package = package
        self.targets = tuple(targets)
        self.adapt = adapt
        self.installed = False
        self._hooked: set[str] = set()
        self._patched: list[tuple[Any, str]] = []
        self._lock = threading.Lock()

    def _patch(self, module: Any) -> None:
        with self._lock:
            if not self.installed:
                return
            for name, cls, method, describe in self.targets:
                owner = getattr(sys.modules.get(name), cls, None)
                if owner is None or method not in vars(owner) or (owner, method) in self._patched:
                    continue  # not imported yet, a version without it, or done already
                wrapt.wrap_function_wrapper(owner, method, run_wrapper(describe, self.adapt)(False))
                self._patched.append((owner, method))

    def install(self) -> bool:
        """False when the framework is not installed."""
        try:
            if self.package not in sys.modules and importlib.util.find_spec(self.package) is None:
                return False
        except (ImportError, ValueError):
            return False
        self.installed = True
        for name in dict.fromkeys(target[0] for target in self.targets):
            if name in sys.modules:
                self._patch(sys.modules[name])
            elif name not in self._hooked:
                wrapt.register_post_import_hook(self._patch, name)
                self._hooked.add(name)
        _scopes_installed.add(id(self))
        add_framework_source(wrapped_run)
        return True

    def uninstall(self) -> None:
        from ..patching import unwrap

        with self._lock:
            self.installed = False
            patched, self._patched = self._patched, []
        for owner, method in patched:
            unwrap(owner, method)
        _scopes_installed.discard(id(self))
        if not _scopes_installed:
            remove_framework_source(wrapped_run)
