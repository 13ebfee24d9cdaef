"""The one call path: capture -> account -> emit.

An instrumentor opens a call with :meth:`Handler.start` (or ``otel_tokens.start_call``),
gets a :class:`~otel_tokens.call.Call` record, fills in what the backend answered and ends it
once with ``call.stop()`` or ``call.fail()``. Beside the record the handler keeps the call's
:class:`~otel_tokens.tracking.Tracking` (who it is for, estimate, reservation, span), which
the call ends through. The handler then hands both to the account step (:class:`~otel_tokens.account.settle.Accountant`), which decides the outcome,
and the outcome to the recorder (:class:`~otel_tokens.emit.recorder.Recorder`), which emits
it; anomaly callbacks run last. Each step is guarded: a fault is counted, never raised into
the host, except :class:`BudgetExceeded` from ``start`` when the user opted in to it.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from opentelemetry import baggage
from opentelemetry import context as otel_context

from . import faults
from .account.anomalies import AnomalyGuard, BudgetExceeded
from .account.estimate import Estimator
from .account.pricing import Pricer
from .account.settle import Accountant
from .account.agents import current_attribution
from .account.conversation_totals import ConversationTotals
from .account.fleet_budget import FleetBudgets
from .call import Call
from .emit.recorder import Recorder
from .settings import current
from .tracking import Tracking

if TYPE_CHECKING:
    from .account.agents import AgentEntry
    from .account.anomalies import Anomaly
    from .account.state import Estimate
    from .request import Request
    from .settings import Settings
    from .usage import Usage

__all__ = [
    "Handler",
    "get_guard",
    "get_handler",
    "on_anomaly",
    "set_budget",
    "set_handler",
    "start_call",
]

_END_LOCK = threading.Lock()  # makes ending a call a single check-and-set


class Handler:
    """Opens calls, and at each call's end runs the account step, then the recorder."""

    def __init__(
        self,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        *,
        pricer: Pricer | None = None,
        guard: AnomalyGuard | None = None,
        settings: Settings | None = None,
    ) -> None:
        self._settings = settings  # None: the process's settings, as they are now
        settings = settings if settings is not None else current()
        self.recorder = Recorder(
            tracer_provider,
            meter_provider,
            max_attribute_values=settings.max_attribute_values,
            exemplars=settings.exemplars,
            reuse_genai_span=settings.reuse_genai_span,
            metric_attributes=settings.metric_attributes,
            max_label_sets=settings.max_label_sets,
        )
        self.accountant = Accountant(
            pricer if pricer is not None else Pricer.from_settings(settings),
            guard if guard is not None else get_guard(),
            Estimator(),
            settings.max_tokens_per_request,
            ConversationTotals(settings.ledger_path),
            settings.max_cost_per_request,
            fleet=FleetBudgets.from_settings(settings),  # None without a ledger URL
        )

    @property
    def settings(self) -> Settings:
        """The settings calls read (those given at construction, else the process's)."""
        return self._settings if self._settings is not None else current()

    @property
    def faults(self) -> faults.Faults:
        """The fault sink (process-wide; its counts are this handler's recorder's)."""
        return faults.sink()

    @property
    def pricer(self) -> Pricer:
        return self.accountant.pricer

    @property
    def guard(self) -> AnomalyGuard:
        return self.accountant.guard

    @property
    def estimator(self) -> Estimator:
        return self.accountant.estimator

    def start(
        self,
        *,
        operation: str,
        provider: str,
        request_model: str | None,
        stream: bool = False,
        server_address: str | None = None,
        server_port: int | None = None,
        request: Request | None = None,
        estimate: Estimate | None = None,
        conversation_id: str | None = None,
        span_name: str | None = None,
        attributes: dict[str, Any] | None = None,
        agent: AgentEntry | None = None,
        spent: bool = False,
    ) -> Call:
        """Open a call: the agent's estimate and budget, then its span (not yet current).

        ``request`` (what the request contains) is estimated here, before the call, unless an
        ``estimate`` is given. Raises only :class:`BudgetExceeded`, and only when budget
        enforcement is on and the call is not ``spent`` (done and billed already, e.g. a
        batch's result row: recorded whatever the budgets say, never refused)."""
        tracking = _Owner(agent, conversation_id, estimate)
        tracking.handler = self
        call = Call(
            tracking,
            operation,
            provider,
            request_model,
            stream,
            time.perf_counter(),
            server_address,
            server_port,
            conversation_id,
            span_name,
            attributes,
            request,
        )
        _attribute(tracking, agent, conversation_id)
        try:  # estimate, budget, streaming state
            self.accountant.open(call, tracking, refuse=not spent)
        except BudgetExceeded as exc:
            name = tracking.agent.name if tracking.agent is not None else "default"
            self.recorder.refused(name, exc.anomaly)
            self._callbacks((exc.anomaly,))
            raise
        self.recorder.start(call, tracking)
        return call

    def counted_before(self, once: str, response_id: str) -> bool:
        """True when the response ``(once, response_id)`` names was counted already, by this
        process or in the ledger file of the agent a call would be for now (a batch's results
        read again: nothing to record). A fault reads as False (recorded, never lost)."""
        try:
            entry, _ = current_attribution()
            return self.accountant.counted((once, response_id), entry)
        except Exception as exc:
            faults.report("ledger", exc)
            return False

    # -- what a call's tracking hands over ------------------------------------------------------
    def in_flight(self, tracking: Tracking, usage: Usage) -> None:
        if not tracking.ended:
            self.accountant.in_flight(tracking, usage)

    def update_estimate(self, tracking: Tracking, estimate: Estimate) -> None:
        if not tracking.ended:
            self.accountant.update_estimate(tracking, estimate)

    def finish(self, call: Call, tracking: Tracking) -> None:
        """The call's one end: account, then emit, then the anomaly callbacks."""
        # one lock for all calls, held for a flag flip (never contended long)
        with _END_LOCK:
            ended = tracking.ended
            tracking.ended = True
        if ended:
            return
        outcome = None
        try:
            outcome = self.accountant.settle(call, tracking)
        except Exception as exc:
            faults.report("internal", exc)
        self.recorder.stop(tracking, outcome)
        if outcome is not None and outcome.anomalies:
            self._callbacks(outcome.anomalies)

    def _callbacks(self, anomalies: tuple[Anomaly, ...]) -> None:
        for anomaly in anomalies:
            for callback in self.guard.callbacks:
                try:
                    callback(anomaly)
                except Exception as exc:
                    faults.report("callback", exc)


class _Owner(Tracking):
    """A call's tracking bound to the handler that opened it: the :class:`~.call.CallOwner`
    its call ends through (the handler writes ``handler`` once, at the start)."""

    __slots__ = ("handler",)
    handler: Handler

    def activate(self, call: Call) -> Any:
        return self.handler.recorder.activate(self)

    def span(self, call: Call) -> Any:
        return self.handler.recorder.span_of(self)

    def stream_usage(self, call: Call, usage: Usage) -> None:
        self.handler.in_flight(self, usage)

    def update_estimate(self, call: Call, estimate: Estimate) -> None:
        self.handler.update_estimate(self, estimate)

    def finish(self, call: Call) -> None:
        self.handler.finish(call, self)


def _attribute(tracking: Tracking, agent: AgentEntry | None, conversation_id: str | None) -> None:
    """Who the call is for, resolved once, at its start (see :func:`_from_baggage`): kept apart
    from :meth:`Handler.start` so a fault here is reported and the call goes on unattributed."""
    try:
        if agent is None:
            tracking.agent, who = current_attribution()
            if who is not None:
                tracking.user, tracking.tenant = who[0], who[1]
                tracking.conversation_id = conversation_id or who[2]
        if tracking.user is None or tracking.tenant is None or tracking.conversation_id is None:
            context = otel_context.get_current()
            if context:  # an empty context holds no baggage
                entries = baggage.get_all(context)
                if entries:
                    _from_baggage(tracking, entries)
    except Exception as exc:
        faults.report("internal", exc)


def _from_baggage(tracking: Tracking, entries: Any) -> None:
    """Who the call is for, resolved once in :meth:`Handler.start`: the agent (given, else the
    innermost ``agent(...)`` binding or framework run, else ``default``); user, tenant and
    conversation from the bindings, the capture's conversation id before theirs; then, here,
    from OpenTelemetry baggage set upstream (``user.id``, ``tenant.id``,
    ``gen_ai.conversation.id`` or ``session.id``, the current context's ``entries``) for
    what neither says."""
    tracking.user = tracking.user or _text(entries.get("user.id"))
    tracking.tenant = tracking.tenant or _text(entries.get("tenant.id"))
    tracking.conversation_id = tracking.conversation_id or _text(
        entries.get("gen_ai.conversation.id") or entries.get("session.id")
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


# -- the process-wide handler -------------------------------------------------------------------
_handler: Handler | None = None
_handler_lock = threading.Lock()


def get_handler() -> Handler:
    """The process-wide handler, built on the global providers at first use."""
    global _handler
    handler = _handler
    if handler is None:
        with _handler_lock:
            if _handler is None:
                _handler = Handler()
            handler = _handler
    return handler


def handler_is_unset() -> bool:
    """True until the process-wide handler has been built or set."""
    return _handler is None


def set_handler(handler: Handler | None) -> Handler | None:
    """Replace the process-wide handler (``instrument(tracer_provider=...)``, tests); returns
    the previous one."""
    global _handler
    with _handler_lock:
        previous, _handler = _handler, handler
    return previous


_START_ARGUMENTS = frozenset(
    (
        "operation",
        "provider",
        "request_model",
        "stream",
        "server_address",
        "server_port",
        "request",
        "estimate",
        "conversation_id",
        "span_name",
        "attributes",
        "agent",
    )
)


def start_call(**request: Any) -> Call:
    """Open a call on the process-wide handler (see :meth:`Handler.start`): a backend of
    your own reports through the same path as every instrumentor.

    Wrong arguments never raise: an unknown one is ignored, an ``operation`` or ``provider``
    that is not a non-empty string becomes ``unknown``, a ``request_model`` that is not a
    string None; each with one warning and an ``argument`` fault."""
    for name in [n for n in request if n not in _START_ARGUMENTS]:
        _wrong(f"start_call({name}=...) is not an argument; ignored")
        del request[name]
    for name in ("operation", "provider"):
        value = request.get(name)
        if not isinstance(value, str) or not value.strip():
            _wrong(f"start_call({name}={value!r}): a non-empty string is needed; using 'unknown'")
            request[name] = "unknown"
    model = request.get("request_model")
    if model is not None and not isinstance(model, str):
        _wrong(f"start_call(request_model={model!r}): a string or None is needed; using None")
        model = None
    request["request_model"] = model
    return get_handler().start(**request)


def _wrong(detail: str) -> None:
    faults.report("argument", detail=detail, each=True)


# -- budgets and anomaly callbacks (process-wide) ------------------------------------------------
_guard: AnomalyGuard | None = None
_guard_lock = threading.Lock()  # not _handler_lock: building a handler takes the guard


def get_guard() -> AnomalyGuard:
    """The process-wide anomaly guard (budgets, spike rule, callbacks), from the settings."""
    global _guard
    if _guard is None:
        with _guard_lock:
            if _guard is None:
                _guard = AnomalyGuard.from_settings(current())
    return _guard


def on_anomaly(callback: Callable[[Anomaly], None]) -> Callable[[Anomaly], None]:
    """Call ``callback(anomaly)`` on every anomaly (usable as a decorator); its exceptions are
    caught and counted. Something not callable is one warning (an ``argument`` fault), ignored."""
    if not callable(callback):
        _wrong(f"on_anomaly({callback!r}): a callable is needed; ignored")
        return callback
    get_guard().add_callback(callback)
    return callback


def set_budget(
    agent: str,
    *,
    tokens: int | None = None,
    usd: float | None = None,
    window_seconds: float = 3600.0,
    enforce: bool = False,
) -> None:
    """Give ``agent`` a rolling-window budget; with ``enforce=True`` its next call raises
    :class:`BudgetExceeded` once the budget is spent (or would be, by the call's estimate).
    With neither ``tokens`` nor ``usd`` the agent's budget is removed. Wrong arguments (an
    agent name that is not a non-empty string, a non-positive amount) are one warning and an
    ``argument`` fault, and leave the budgets as they were."""
    from .account.anomalies import Budget

    if not isinstance(agent, str) or not agent.strip():
        _wrong(f"set_budget({agent!r}): the agent name must be a non-empty string; ignored")
        return
    budget = None
    try:
        if tokens is not None or usd is not None:
            budget = Budget(
                tokens=tokens, usd=usd, window_seconds=window_seconds, enforce=bool(enforce)
            )
    except (ValueError, TypeError) as exc:
        _wrong(f"set_budget({agent!r}): {exc}; the budget is unchanged")
        return
    get_guard().set_budget(agent, budget)
