"""Stream managers whose request runs only when entered (``with client.messages.stream(...)``,
``with client.beta.threads.runs.stream(...)``): the deferred request is routed through the
operation's wrapper, so the stream it opens is observed like any other, and leaving the
``with`` block ends the call as ``exited`` (or ``error``) before the SDK closes the stream.

The SDKs keep the request in a name-mangled ``__api_request`` attribute of the manager; a
manager without one is returned unwrapped (and the fault counted).
"""

from __future__ import annotations

from typing import Any, Callable

import wrapt

from .. import faults

__all__ = ["managed"]


class _SyncManager(wrapt.ObjectProxy):  # type: ignore[misc]
    """A synchronous stream manager: leaving its ``with`` block ends the call as exited/error."""

    def __init__(self, wrapped: Any, opened: list[Any]) -> None:
        super().__init__(wrapped)
        self._self_opened = opened

    def __enter__(self) -> Any:
        return self.__wrapped__.__enter__()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        _end_opened(self._self_opened, exc)
        return self.__wrapped__.__exit__(exc_type, exc, tb)


class _AsyncManager(wrapt.ObjectProxy):  # type: ignore[misc]
    """An asynchronous stream manager, likewise."""

    def __init__(self, wrapped: Any, opened: list[Any]) -> None:
        super().__init__(wrapped)
        self._self_opened = opened

    async def __aenter__(self) -> Any:
        return await self.__wrapped__.__aenter__()

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        _end_opened(self._self_opened, exc)
        return await self.__wrapped__.__aexit__(exc_type, exc, tb)


def _end_opened(opened: list[Any], exc: Any) -> None:
    """End the call of the stream a manager opened (before the SDK closes the stream)."""
    for proxy in opened:
        end = getattr(proxy, "_self_end", None)
        if end is not None:
            end("error" if exc is not None else "exited", exc)


class _Deferred:
    """An awaitable that starts its coroutine only when awaited (so a manager never entered
    leaves no second "never awaited" coroutine behind)."""

    __slots__ = ("_start",)

    def __init__(self, start: Callable[[], Any]) -> None:
        self._start = start

    def __await__(self) -> Any:
        return self._start().__await__()


def _request_attribute(manager: Any) -> str | None:
    """The name-mangled attribute holding the manager's deferred API request."""
    for cls in type(manager).__mro__:
        name = f"_{cls.__name__.lstrip('_')}__api_request"
        if name in vars(manager):
            return name
    return None


def _sdk_manager(manager: Any) -> tuple[Any, str | None]:
    """(the SDK's own manager, the attribute of its deferred request): ``manager`` itself, or
    the one another instrumentation's wrapper holds (patched before us, OpenLLMetry returns
    its own manager around the SDK's), found among the wrappers' attributes a few levels
    down; (``manager``, None) when there is none."""
    candidates, seen = [manager], 0
    for _ in range(3):
        found: list[Any] = []
        for obj in candidates:
            attribute = _request_attribute(obj)
            if attribute is not None:
                return obj, attribute
            try:
                found.extend(
                    value
                    for value in vars(obj).values()
                    if hasattr(value, "__dict__") and not isinstance(value, type)
                )
            except TypeError:  # no __dict__
                continue
        seen += len(found)
        candidates = found
        if not candidates or seen > 64:
            break
    return manager, None


def managed(
    manager: Any, inner: Callable[..., Any], instance: Any, given: dict[str, Any], is_async: bool
) -> Any:
    """``manager`` with its deferred request going through ``inner`` (an operation's wrapt
    wrapper) as ``instance``'s call with keyword arguments ``given``; leaving its ``with``
    block ends the call."""
    try:
        holder, attribute = _sdk_manager(manager)
        if attribute is None:
            raise LookupError(f"{type(manager).__name__} has no deferred API request")
        original = getattr(holder, attribute)
        opened: list[Any] = []

        if is_async:

            async def deferred(*_a: Any, **_k: Any) -> Any:
                return await original

            async def request() -> Any:
                proxy = await inner(deferred, instance, (), given)
                opened.append(proxy)
                return proxy

            setattr(holder, attribute, _Deferred(request))
            return _AsyncManager(manager, opened)

        def sync_request() -> Any:
            proxy = inner(lambda *_a, **_k: original(), instance, (), given)
            opened.append(proxy)
            return proxy

        setattr(holder, attribute, sync_request)
        return _SyncManager(manager, opened)
    except Exception as exc:
        faults.report("internal", exc)
        return manager
