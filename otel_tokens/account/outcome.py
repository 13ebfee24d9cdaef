"""What the account step decided about one finished call: all the recorder needs to emit.

Plain named tuples (one is made per call): no OpenTelemetry, no provider types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, NamedTuple

if TYPE_CHECKING:
    from ..usage import Usage
    from .anomalies import Anomaly
    from .pricing import PriceResult
    from .state import Estimate, StateFigures

__all__ = ["Line", "Outcome", "error_type"]


class Line(NamedTuple):
    """One set of metric points of a call, under one ``gen_ai.response.model`` label.

    An ordinary call has one line. A call that used several models (an agent-CLI run) has one
    per model, and, when the backend reported the run's cost or premium requests only as a
    total, one more line carrying that total without tokens.
    """

    model: str | None  # the gen_ai.response.model label of these points
    usage: Usage | None  # token points (None: no tokens on this line)
    cost_usd: float | None
    cost_source: str | None
    unpriced: bool  # tokens to price, no price known
    premium_requests: float | None
    unpriced_components: tuple[str, ...] = ()  # billed components no price covers
    #: how the price was found (PriceResult.match): an unpriced ``self_hosted`` line is a
    #: local server's, unpriced by design (its unpriced_requests point says so)
    price_match: str | None = None


class Outcome(NamedTuple):
    """A call's outcome: its figures for the span, the metrics and the callbacks."""

    failed: bool
    error_type: str | None
    error_message: str | None
    usage: Usage  # the call's total (source says reported / estimated / parsed_text)
    price: PriceResult  # the call's total cost
    lines: tuple[Line, ...]
    response_model: str | None
    response_id: str | None
    finish_reasons: tuple[str, ...]
    estimate: Estimate | None
    estimate_error: float | None  # (estimate - actual) / actual of input tokens
    duration: float
    time_to_first_chunk: float | None
    stream: bool
    state: StateFigures | None  # the agent's figures after the call
    anomalies: tuple[Anomaly, ...]
    attributes: Mapping[str, Any] | None  # the instrumentor's own span attributes
    usage_missing: bool = False  # a successful call whose backend reported no usage


def error_type(error: BaseException | str | None) -> str | None:
    """``error.type``: the exception's qualified class name, or the given string."""
    if error is None:
        return None
    if isinstance(error, BaseException):
        cls = type(error)
        module = cls.__module__
        return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"
    return str(error)
