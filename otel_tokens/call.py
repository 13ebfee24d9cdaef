"""The call record: what an instrumentor captured of one backend call, handed over whole.

An instrumentor (capture) opens a :class:`Call` with the request's facts through the handler
(``otel_tokens.start_call(...)``), fills in the response's facts and ends it once with
:meth:`Call.stop` or :meth:`Call.fail`. The call ends through its :class:`CallOwner` (the
handler's per-call :class:`~otel_tokens.tracking.Tracking`, which keeps who the call is for,
the estimate, the reservation and the span): the account step turns the finished record into
an outcome, and the recorder emits that outcome. No provider or OpenTelemetry type appears
here.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from time import perf_counter
from typing import TYPE_CHECKING, Any, Protocol, Sequence

if TYPE_CHECKING:
    from .account.state import Estimate
    from .request import Request
    from .usage import Billing, Usage

__all__ = ["Call", "CallOwner"]


class CallOwner(Protocol):
    """What a call ends through and hands its running facts to (implemented by the handler)."""

    @property
    def ended(self) -> bool:
        """True once the call's end was taken (by :meth:`finish`)."""

    def activate(self, call: Call) -> AbstractContextManager[Any]:
        """A context manager making the call's span current while the backend runs."""

    def span(self, call: Call) -> Any:
        """The call's span (a non-recording one when none could be started)."""

    def stream_usage(self, call: Call, usage: Usage) -> None:
        """A running usage total seen mid-stream."""

    def update_estimate(self, call: Call, estimate: Estimate) -> None:
        """A better input estimate while the call runs."""

    def finish(self, call: Call) -> None:
        """The call's one end: account, then emit (a second end is ignored)."""


class Call:
    """One backend call: request facts at the start, response facts at the end, its timings.

    Request side (given to ``start_call``): ``operation``, ``provider``, ``request_model``,
    ``stream``, ``server_address``/``server_port``, ``conversation_id`` (as capture knows
    it), ``span_name``, ``attributes`` (extra span attributes known at the start),
    ``request`` (for the estimate). Response side (given to :meth:`stop`/:meth:`fail`):
    ``usage`` (None: the backend reported none), ``parts`` (per-model usages of a call that
    used several models), ``response_model``, ``response_id``, ``finish_reasons``, ``error``,
    ``output_text`` (streamed text of a response without reported output, to estimate it),
    ``cumulative_key`` (the usage is this conversation's running total, e.g. a Codex thread's:
    only its increase is this call's), ``billing`` (a :class:`~otel_tokens.usage.Billing`:
    service tier, hosted-tool calls, billed units beyond the token classes; units counted from
    the request, such as a speech request's characters, are set when the call opens), ``once_key``
    (the response may be read again, e.g. a background response polled with
    ``responses.retrieve``: its usage counts once per key), ``pending`` (the work goes on
    after this call, e.g. a queued background response: no usage yet, and none missing) and
    ``end_attributes``. Timings: ``started``, ``first_chunk_at``, ``ended_at``
    (``time.perf_counter()``). Only capture writes these (through the constructor, these
    methods, or a response fact set by hand); the account step and the recorder read them.
    """

    __slots__ = (
        "operation",
        "provider",
        "request_model",
        "stream",
        "server_address",
        "server_port",
        "conversation_id",
        "span_name",
        "attributes",
        "request",
        "usage",
        "parts",
        "response_model",
        "response_id",
        "finish_reasons",
        "error",
        "output_text",
        "cumulative_key",
        "billing",
        "once_key",
        "pending",
        "end_attributes",
        "started",
        "first_chunk_at",
        "ended_at",
        "_owner",
    )

    def __init__(
        self,
        owner: CallOwner,
        operation: str,
        provider: str,
        request_model: str | None,
        stream: bool,
        started: float,
        server_address: str | None = None,
        server_port: int | None = None,
        conversation_id: str | None = None,
        span_name: str | None = None,
        attributes: dict[str, Any] | None = None,
        request: Request | None = None,
    ) -> None:
        self._owner = owner
        # the request's facts, given once
        self.operation = operation
        self.provider = provider
        self.request_model = request_model
        self.stream = stream
        self.server_address = server_address
        self.server_port = server_port
        self.conversation_id = conversation_id
        self.span_name = span_name
        self.attributes = attributes
        self.request = request
        # the response's facts, given at the end
        self.usage: Usage | None = None
        self.parts: Sequence[Usage] | None = None
        self.response_model: str | None = None
        self.response_id: str | None = None
        self.finish_reasons: Sequence[str] | None = None
        self.error: BaseException | str | None = None
        self.output_text: str | None = None
        self.cumulative_key: str | None = None
        self.billing: Billing | None = None
        self.once_key: tuple[str, str] | None = None
        self.pending = False
        self.end_attributes: dict[str, Any] | None = None
        # the timings
        self.started = started
        self.first_chunk_at: float | None = None
        self.ended_at: float | None = None

    # -- during the call ----------------------------------------------------------------------
    def activate(self) -> AbstractContextManager[Any]:
        """A context manager making the call's span current while the backend runs."""
        return self._owner.activate(self)

    def first_chunk(self) -> None:
        """Note the first streamed chunk (time to first chunk); later calls are ignored."""
        if self.first_chunk_at is None:
            self.first_chunk_at = perf_counter()

    def stream_usage(self, usage: Usage) -> None:
        """A running usage total seen mid-stream (the ledger's in-flight value)."""
        self._owner.stream_usage(self, usage)

    def update_estimate(self, estimate: Estimate) -> None:
        """Replace the input estimate (e.g. once more of a streamed request is known)."""
        self._owner.update_estimate(self, estimate)

    @property
    def ended(self) -> bool:
        """True once :meth:`stop` or :meth:`fail` ran."""
        return self._owner.ended

    @property
    def span(self) -> Any:
        """The call's span (a non-recording one when none could be started)."""
        return self._owner.span(self)

    # -- the end ------------------------------------------------------------------------------
    def stop(
        self,
        usage: Usage | None = None,
        *,
        response_model: str | None = None,
        response_id: str | None = None,
        finish_reasons: Sequence[str] | None = None,
        attributes: dict[str, Any] | None = None,
        parts: Sequence[Usage] | None = None,
        output_text: str | None = None,
        billing: Billing | None = None,
        once: str | None = None,
        pending: bool = False,
    ) -> None:
        """End the call successfully with its usage (None: the backend reported none).

        ``parts`` splits a call that used several models (an agent-CLI run) into per-model
        usages, each priced with its own model and recorded on its own; the call counts one
        turn and one span with the total (``usage``, or the parts' sum when None).
        ``billing``, ``pending``: see the class; ``once``: a namespace (e.g.
        ``"openai.responses"``) under which the response id is counted once.
        """
        if self._owner.ended:
            return
        self._fill(
            usage, response_model, response_id, finish_reasons, attributes, parts, output_text
        )
        if billing is not None:
            self.billing = billing
        if once is not None and self.response_id:
            self.once_key = (once, self.response_id)
        self.pending = pending
        self.ended_at = perf_counter()
        self._owner.finish(self)

    def fail(
        self,
        error: BaseException | str,
        usage: Usage | None = None,
        *,
        response_model: str | None = None,
        response_id: str | None = None,
        attributes: dict[str, Any] | None = None,
        parts: Sequence[Usage] | None = None,
        output_text: str | None = None,
        billing: Billing | None = None,
    ) -> None:
        """End the call as failed: ``error.type``, ERROR status, no turn counted. Usage that
        arrived before the failure (billed tokens) is still recorded."""
        if self._owner.ended:
            return
        self.error = error if error is not None else "error"
        self._fill(usage, response_model, response_id, None, attributes, parts, output_text)
        if billing is not None:
            self.billing = billing
        self.ended_at = perf_counter()
        self._owner.finish(self)

    def _fill(
        self,
        usage: Usage | None,
        response_model: str | None,
        response_id: str | None,
        finish_reasons: Sequence[str] | None,
        attributes: dict[str, Any] | None,
        parts: Sequence[Usage] | None,
        output_text: str | None,
    ) -> None:
        if usage is not None:
            self.usage = usage
        if response_model is not None:
            self.response_model = response_model
        if response_id is not None:
            self.response_id = response_id
        if finish_reasons:
            self.finish_reasons = finish_reasons
        if attributes:
            self.end_attributes = (
                {**self.end_attributes, **attributes} if self.end_attributes else attributes
            )
        if parts:
            self.parts = parts
        if output_text is not None:
            self.output_text = output_text
