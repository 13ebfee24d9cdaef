"""What the handler keeps for one call beside capture's record: who it is for, its estimate,
its fleet reservation, its span and its streaming state."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .account.agents import AgentEntry
    from .account.estimate import RequestEstimate
    from .account.fleet_budget import Reservation
    from .account.state import Estimate, StreamHandle

__all__ = ["Tracking"]


class Tracking:
    """One call's tracking, opened by the handler beside the :class:`~otel_tokens.call.Call`.

    Each field has one writer (``tests/core/test_record_ownership.py`` checks it): the handler
    writes who the call is for (``agent``, ``user``, ``tenant``, ``conversation_id``: the
    capture's, else a binding's or baggage's) and ``ended``; the account step writes
    ``estimate`` (given at the start, else its own), ``request_estimate``, ``reservation``,
    ``stream_handle`` and ``stream_key``; the recorder writes ``emission`` (the span and its
    activation), ``trace_id`` and ``span_id``. Capture never sees it.
    """

    __slots__ = (
        "agent",
        "user",
        "tenant",
        "conversation_id",
        "ended",
        "estimate",
        "request_estimate",
        "reservation",
        "stream_handle",
        "stream_key",
        "emission",
        "trace_id",
        "span_id",
    )

    def __init__(
        self,
        agent: AgentEntry | None = None,
        conversation_id: str | None = None,
        estimate: Estimate | None = None,
    ) -> None:
        # the handler's: who the call is for, and whether it ended
        self.agent = agent
        self.user: str | None = None
        self.tenant: str | None = None
        self.conversation_id = conversation_id
        self.ended = False
        # the account step's: the estimate, the fleet's room, the streaming state
        self.estimate = estimate
        self.request_estimate: RequestEstimate | None = None
        self.reservation: Reservation | None = None
        self.stream_handle: StreamHandle | None = None
        self.stream_key: object | None = None
        # the recorder's: the span (a context manager making it current) and its ids
        self.emission: Any = None
        self.trace_id: int | None = None
        self.span_id: int | None = None
