"""A websocket session's billed calls: each response the server bills is one call, recorded
under the agent (and user, tenant, conversation, parent span) current when the session was
opened, whichever task or thread later reads the event that ends it.

A session is the OpenAI Realtime API's (:mod:`.openai_realtime`) or google-genai Live's
(:mod:`.google_genai_live`); their readers say when a response begins (:meth:`Session.begin`)
and when it is billed (:meth:`Session.finish`). Events are only read: the caller gets them
unchanged, when the SDK hands them over. A response still open when its connection ends
(closed, dropped, or collected unclosed) ends then, failed, with no usage: nothing of a
session outlives its connection.
"""

from __future__ import annotations

import contextvars
import threading
import weakref
from collections.abc import Callable
from typing import Any

from ... import faults
from ...account.agents import FrameworkRun, add_framework_source
from ...call import Call
from ...usage import Billing, Usage
from ..lifecycle import open_call

__all__ = ["Session", "attach", "session_of"]

#: the attribute a connection (or session object) carries its :class:`Session` in
_ATTRIBUTE = "_otel_tokens_session"
#: responses open at once in one session; past that the oldest ends (failed): a server that
#: never sends ``response.done`` cannot grow the table
MAX_OPEN = 16


#: the agent a framework says runs the session's response being opened (see _framework_run)
_FRAMEWORK_AGENT: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "otel_tokens_realtime_agent", default=None
)


def _framework_run() -> FrameworkRun | None:
    """A framework source (:func:`~otel_tokens.account.agents.add_framework_source`): the
    agent a realtime framework (the Agents SDK's ``RealtimeSession``) names for a response;
    an ``agent(...)`` binding current when the session opened still wins."""
    name = _FRAMEWORK_AGENT.get()
    return FrameworkRun(name) if name else None


def _no_request(_given: Any) -> None:
    """A session's response has no request body to estimate (its input is the session's)."""
    return


class Session:
    """The billed responses of one websocket session (``operation``: ``gen_ai.operation.name``)."""

    def __init__(
        self,
        provider: str,
        address: str | None,
        port: int | None,
        model: str | None,
        operation: str = "chat",
    ) -> None:
        self.context = contextvars.copy_context()  # who the session's calls are for
        self.provider, self.address, self.port = provider, address, port
        self.request_model = model
        self.response_model: str | None = None  # the model the server says it runs
        self.models: dict[str, str] = {}  # operation -> model, of the session's other units
        self.operation = operation
        #: the framework's agent for the response opening now (None: no framework names one)
        self.framework_agent: Callable[[], str | None] | None = None
        self._open: dict[Any, Call] = {}
        self._lock = threading.Lock()

    def begin(self, key: Any) -> None:
        """A response ``key`` starts: its call opens now (its span covers the response)."""
        with self._lock:
            if key in self._open:
                return
        call = self._start()
        if call is None:
            return
        with self._lock:
            self._open[key] = call
            oldest = next(iter(self._open)) if len(self._open) > MAX_OPEN else None
            evicted = self._open.pop(oldest) if oldest is not None else None
        if evicted is not None:
            evicted.fail("response_not_done")

    def finish(
        self,
        key: Any,
        usage: Usage | None,
        *,
        response_id: str | None = None,
        reasons: tuple[str, ...] = (),
        billing: Billing | None = None,
        once: str | None = None,
    ) -> None:
        """Response ``key`` is billed: its call (opened now if its start went unseen) ends
        with ``usage``."""
        with self._lock:
            call = self._open.pop(key, None)
        if call is None:
            call = self._start()
            if call is None:
                return
        call.stop(
            usage,
            response_model=self.response_model,
            response_id=response_id,
            finish_reasons=reasons or None,
            billing=billing,
            once=once,
        )

    def bill(
        self,
        usage: Usage | None,
        billing: Billing | None,
        *,
        operation: str,
        model: str | None,
        response_id: str | None = None,
        once: str | None = None,
    ) -> None:
        """A billed unit of the session other than a response (an input transcription, by
        its own model): one call, opened and ended now."""
        call = self._start(operation, model)
        if call is not None:
            call.stop(usage, response_id=response_id, billing=billing, once=once)

    def close(self, error: BaseException | str = "connection_closed") -> None:
        """The connection ended: every response still open ends, failed, without usage."""
        with self._lock:
            calls, self._open = list(self._open.values()), {}
        for call in calls:
            try:
                call.fail(error)
            except Exception as exc:
                faults.report("internal", exc)

    @property
    def open_count(self) -> int:
        """Responses begun and not yet billed."""
        return len(self._open)

    def _start(self, operation: str | None = None, model: str | None = None) -> Call | None:
        """Open a call in the session's context (a copy: two threads may open at once); a
        response's unless another ``operation`` and its ``model`` are named."""
        return self.context.copy().run(self._open_call, operation, model)

    def _open_call(self, operation: str | None, model: str | None) -> Call | None:
        """Open the call, in the context :meth:`_start` made (the framework's agent in it)."""
        named = self._framework_agent()
        if named:
            add_framework_source(_framework_run)
            _FRAMEWORK_AGENT.set(named)
        return open_call(
            _no_request,
            None,
            operation=operation or self.operation,
            provider=self.provider,
            request_model=model if operation else self.request_model,
            stream=operation is None,
            server_address=self.address,
            server_port=self.port,
        )

    def _framework_agent(self) -> str | None:
        """The framework's agent name now (None: none, or its reader failed: counted)."""
        if self.framework_agent is None:
            return None
        try:
            name = self.framework_agent()
        except Exception as exc:
            faults.report("internal", exc)
            return None
        return name if isinstance(name, str) and name.strip() else None


def attach(owner: Any, session: Session) -> Session:
    """Give ``owner`` (a connection) ``session``; its open responses end when ``owner`` is
    collected unclosed. A session already there is ended first (a connection opened anew)."""
    previous = session_of(owner)
    if previous is not None:
        previous.close()
    setattr(owner, _ATTRIBUTE, session)
    weakref.finalize(owner, session.close, "connection_dropped")
    return session


def session_of(owner: Any) -> Session | None:
    """The session ``owner`` carries (None: not opened through a patched method)."""
    found = getattr(owner, _ATTRIBUTE, None)
    return found if isinstance(found, Session) else None
