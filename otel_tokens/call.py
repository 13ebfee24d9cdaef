"""The call record: what an instrumentor captured of one backend call, handed over whole.

An instrumentor (capture) opens a :class:`Call` with the request's facts through the handler
(``otel_tokens.start_call(...)``), fills in the response's facts and ends it once with
:meth:`Call.stop` or :meth:`Call.fail`. Everything else (estimate, budget, agent state,
ledger, cost, span and metrics) happens behind it: the account step turns the finished
record into an outcome, and the recorder emits that outcome. No provider or OpenTelemetry
type appears here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from .account.agents import AgentEntry
    from .account.estimate import RequestEstimate
    from .account.state import Estimate, StreamHandle
    from .request import Request
    from .usage import Billing, Usage

__all__ = ["Call"]


class Call:
    """One backend call: request facts at the start, response facts at the end, one ending.

    Request side (given to ``start_call``): ``operation``, ``provider``, ``request_model``,
    ``stream``, ``server_address``/``server_port``, ``conversation_id``, ``span_name``,
    ``attributes`` (extra span attributes known at the start), ``request`` (for the
    estimate), ``agent``. Response side (given to :meth:`stop`/:meth:`fail`): ``usage``
    (None: the backend reported none), ``parts`` (per-model usages of a call that used
    several models), ``response_model``, ``response_id``, ``finish_reasons``, ``error``,
    ``output_text`` (streamed text of a response without reported output, to estimate it),
    ``cumulative_key`` (the usage is this conversation's running total, e.g. a Codex thread's:
    only its increase is this call's), ``billing`` (a :class:`~otel_tokens.usage.Billing`:
    service tier, hosted-tool calls, billed units beyond the token classes), ``once_key``
    (the response may be read again, e.g. a background response polled with
    ``responses.retrieve``: its usage counts once per key), ``pending`` (the work goes on
    after this call, e.g. a queued background response: no usage yet, and none missing) and
    ``end_attributes``. Each fact has one writer: capture the request and response facts,
    the handler who the call is for (``agent``, ``user``, ``tenant``, the conversation when
    capture gave none) and the timings, the account step ``estimate``/``request_estimate``
    and the streaming state, the recorder the span ids and its ``emission``.
    """

    __slots__ = (
        "operation", "provider", "request_model", "stream", "server_address", "server_port",
        "conversation_id", "user", "tenant", "span_name", "attributes", "request", "agent",
        "usage", "parts", "response_model", "response_id", "finish_reasons", "error",
        "output_text", "cumulative_key", "billing", "once_key", "pending", "end_attributes",
        "estimate", "request_estimate", "started", "first_chunk_at", "ended_at", "trace_id",
        "span_id", "stream_handle", "stream_key", "emission", "_handler", "_ended",
        "reservation",
    )  # fmt: skip

    def __init__(self, handler: Any, operation: str, provider: str, request_model: str | None,
                 stream: bool, started: float, server_address: str | None = None,
                 server_port: int | None = None, conversation_id: str | None = None,
                 span_name: str | None = None, attributes: dict[str, Any] | None = None,
                 request: Request | None = None, estimate: Estimate | None = None,
                 agent: AgentEntry | None = None) -> None:  # fmt: skip
        self._handler = handler
        # the request's facts, given once (the handler adds who the call is for, once)
        self.operation = operation
        self.provider = provider
        self.request_model = request_model
        self.stream = stream
        self.started = started
        self.server_address = server_address
        self.server_port = server_port
        self.conversation_id = conversation_id
        self.user: str | None = None  # who the call is for (binding or baggage)
        self.tenant: str | None = None
        self.span_name = span_name
        self.attributes = attributes
        self.request = request
        self.agent = agent
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
        # the account step's own (written by it alone): the estimate and streaming state
        self.estimate = estimate
        self.request_estimate: RequestEstimate | None = None
        self.first_chunk_at: float | None = None
        self.ended_at: float | None = None
        self.trace_id: int | None = None
        self.span_id: int | None = None
        self.stream_handle: StreamHandle | None = None
        self.stream_key: object | None = None
        self.reservation: Any = None  # the account step's room in the fleet's budgets
        self.emission: Any = None  # the recorder's own handle (the span; a context manager)
        self._ended = False

    # -- during the call ----------------------------------------------------------------------
    def activate(self) -> Any:
        """A context manager making the call's span current while the backend runs (the
        recorder's emission is one; the handler answers before it exists)."""
        emission = self.emission
        return emission if emission is not None else self._handler.activate(self)

    def first_chunk(self) -> None:
        """Note the first streamed chunk (time to first chunk); later calls are ignored."""
        if self.first_chunk_at is None:
            self._handler.first_chunk(self)

    def stream_usage(self, usage: Usage) -> None:
        """A running usage total seen mid-stream (the ledger's in-flight value)."""
        self._handler.in_flight(self, usage)

    def update_estimate(self, estimate: Estimate) -> None:
        """Replace the input estimate (e.g. once more of a streamed request is known)."""
        self._handler.update_estimate(self, estimate)

    @property
    def ended(self) -> bool:
        """True once :meth:`stop` or :meth:`fail` ran."""
        return self._ended

    @property
    def span(self) -> Any:
        """The call's span (a non-recording one when none could be started)."""
        return self._handler.span_of(self)

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
        if self._ended:
            return
        if attributes or parts or output_text is not None:
            self._fill(usage, response_model, response_id, finish_reasons, attributes, parts,
                       output_text)  # fmt: skip
        else:  # the common end, inlined: this runs on every call
            if usage is not None:
                self.usage = usage
            if response_model is not None:
                self.response_model = response_model
            if response_id is not None:
                self.response_id = response_id
            if finish_reasons:
                self.finish_reasons = finish_reasons
        if billing is not None:
            self.billing = billing
        if once is not None and self.response_id:
            self.once_key = (once, self.response_id)
        self.pending = pending
        self._handler.finish(self)

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
        if self._ended:
            return
        self.error = error if error is not None else "error"
        self._fill(usage, response_model, response_id, None, attributes, parts, output_text)
        if billing is not None:
            self.billing = billing
        self._handler.finish(self)

    def _fill(self, usage: Usage | None, response_model: str | None, response_id: str | None,
              finish_reasons: Sequence[str] | None, attributes: dict[str, Any] | None,
              parts: Sequence[Usage] | None, output_text: str | None) -> None:  # fmt: skip
        if usage is not None:
            self.usage = usage
        if response_model is not None:
            self.response_model = response_model
        if response_id is not None:
            self.response_id = response_id
        if finish_reasons:
            self.finish_reasons = finish_reasons
        if attributes:
            self.end_attributes = {**self.end_attributes, **attributes} if self.end_attributes else attributes
        if parts:
            self.parts = parts
        if output_text is not None:
            self.output_text = output_text
