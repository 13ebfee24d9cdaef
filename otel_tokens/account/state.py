"""`TokenState`: one agent's token state, exactly as RFC 00040 defines it.

The RFC's invariants, enforced here rather than left to callers:

1. ``current_estimate`` exists only while the status is streaming; it is cleared when the
   actual usage arrives, and on failure or cancellation.
2. ``input_tokens`` only ever comes from reported usage, never from an estimate.
3. ``total_output_tokens += output_tokens`` exactly once per completion.
4. ``turn_count`` increments exactly once per completion (failures count no turn).
5. ``max_observed_input_tokens = max(max_observed_input_tokens, input_tokens)`` on completion.

Display Invariant: :meth:`TokenState.display` derives the shown token value, the percentage of
``max_input_tokens`` and the "is an estimate" flag from one value under one lock.

Several calls of one agent may stream at once (parallel tool calls, sub-requests); each gets a
:class:`StreamHandle`, and the state reads as streaming while any handle is open. The estimate
shown is that of the most recently started or updated open stream.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from typing import Any, Literal, Mapping, NamedTuple

from ..errors import InvalidTransitionError
from ..usage import MAX_TOKEN_COUNT, Usage, check_token_count

__all__ = ["Display", "Estimate", "EstimateSource", "StateFigures", "StreamHandle", "TokenState"]

EstimateSource = Literal["exact", "delta", "full"]
ESTIMATE_SOURCES: tuple[str, ...] = ("exact", "delta", "full")

Status = Literal["idle", "streaming"]


@dataclass(frozen=True, slots=True)
class Estimate:
    """A pre-/mid-stream input-token estimate and how it was made (RFC ``currentEstimate``).

    ``exact``: a tokenizer counted the whole request; ``delta``: last reported input plus an
    estimate of what was appended since; ``full``: a heuristic over the whole request.
    """

    input_tokens: int
    source: EstimateSource

    def __post_init__(self) -> None:
        """Check the count (normalized or refused) and the source."""
        input_tokens = self.input_tokens
        if type(input_tokens) is not int or not 0 <= input_tokens <= MAX_TOKEN_COUNT:
            checked = check_token_count("estimate input_tokens", input_tokens)
            if checked is None:
                raise ValueError("estimate input_tokens must be a token count, got None")
            object.__setattr__(self, "input_tokens", checked)
        if self.source not in ESTIMATE_SOURCES:
            raise ValueError(
                f"estimate source must be one of {', '.join(ESTIMATE_SOURCES)}; got {self.source!r}"
            )


@dataclass(frozen=True, slots=True)
class Display:
    """What a UI shows for an agent: one token value, its share of the context, and its kind."""

    tokens: int | None
    percent: float | None
    is_estimate: bool

    @property
    def ratio(self) -> float | None:
        """``percent`` as a 0..1 ratio (the ``otel_tokens.context.utilization`` value)."""
        return None if self.percent is None else self.percent / 100.0


class StateFigures(NamedTuple):
    """An agent's state figures at one moment (see :meth:`TokenState.figures`)."""

    turn_count: int
    total_output_tokens: int
    max_observed_input_tokens: int | None
    context_utilization: float | None  # the displayed share of the context window, 0..1


class StreamHandle:
    """Opaque ticket for one streaming call of one TokenState; ends exactly once."""

    __slots__ = ("_id", "_owner")

    def __init__(self, owner: TokenState, ident: int) -> None:
        self._owner = owner
        self._id = ident

    def __repr__(self) -> str:
        return f"<StreamHandle {self._id}>"


class TokenState:
    """Per-agent token state with the RFC 00040 invariants; thread-safe."""

    __slots__ = (
        "_lock",
        "_ids",
        "_input_tokens",
        "_output_tokens",
        "_max_input_tokens",
        "_turn_count",
        "_total_output_tokens",
        "_max_observed_input_tokens",
        "_streams",
    )

    def __init__(self, max_input_tokens: int | None = None) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._input_tokens: int | None = None
        self._output_tokens: int | None = None
        self._max_input_tokens = _check_window(max_input_tokens)
        self._turn_count = 0
        self._total_output_tokens = 0
        self._max_observed_input_tokens: int | None = None
        # open streams, in the order their estimate was last set: id -> Estimate | None
        self._streams: dict[int, Estimate | None] = {}

    # -- read side ------------------------------------------------------------------------
    @property
    def input_tokens(self) -> int | None:
        """Reported input tokens of the last completed turn that reported them."""
        return self._input_tokens

    @property
    def output_tokens(self) -> int | None:
        """Output tokens of the last completed turn that reported them."""
        return self._output_tokens

    @property
    def max_input_tokens(self) -> int | None:
        """The model's context window, the denominator of the displayed percentage."""
        return self._max_input_tokens

    @max_input_tokens.setter
    def max_input_tokens(self, value: int | None) -> None:
        self._max_input_tokens = _check_window(value)

    @property
    def turn_count(self) -> int:
        """Completed turns (failed or cancelled calls are not turns)."""
        return self._turn_count

    @property
    def total_output_tokens(self) -> int:
        """Output tokens summed over every completed turn."""
        return self._total_output_tokens

    @property
    def max_observed_input_tokens(self) -> int | None:
        """Largest reported input of any turn (the legacy, misnamed ``totalInputTokens``)."""
        return self._max_observed_input_tokens

    @property
    def status(self) -> Status:
        """``streaming`` while any stream of this agent is open, else ``idle``."""
        return "streaming" if self._streams else "idle"

    @property
    def current_estimate(self) -> Estimate | None:
        """The live estimate (only while streaming; None otherwise)."""
        with self._lock:
            return self._current_estimate()

    def _current_estimate(self) -> Estimate | None:
        for estimate in reversed(self._streams.values()):
            if estimate is not None:
                return estimate
        return None

    def display(self) -> Display:
        """The Display Invariant: value, percentage and estimate flag from one value."""
        with self._lock:
            estimate = self._current_estimate()
            if estimate is not None:
                tokens: int | None = estimate.input_tokens
                is_estimate = True
            else:
                tokens = self._input_tokens
                is_estimate = False
            window = self._max_input_tokens
        percent = None if tokens is None or not window else tokens * 100.0 / window
        return Display(tokens=tokens, percent=percent, is_estimate=is_estimate)

    def figures(self) -> StateFigures:
        """Turn count, total output, max observed input and the displayed context ratio, read
        together under one lock (what a call's span reports of its agent after the call)."""
        with self._lock:
            return self._figures()

    def _figures(self) -> StateFigures:
        estimate = self._current_estimate() if self._streams else None  # none: no stream
        tokens = estimate.input_tokens if estimate is not None else self._input_tokens
        window = self._max_input_tokens
        return StateFigures(
            turn_count=self._turn_count,
            total_output_tokens=self._total_output_tokens,
            max_observed_input_tokens=self._max_observed_input_tokens,
            context_utilization=None
            if tokens is None or not window
            else tokens * 100.0 / window / 100.0,
        )

    # -- transitions ----------------------------------------------------------------------
    def start_streaming(self, estimate: Estimate | None = None) -> StreamHandle:
        """Mark a call of this agent as streaming; returns the handle that must end it."""
        if estimate is not None and not isinstance(estimate, Estimate):
            raise TypeError(f"estimate must be an Estimate or None, got {type(estimate).__name__}")
        with self._lock:
            ident = next(self._ids)
            self._streams[ident] = estimate
        return StreamHandle(self, ident)

    def set_estimate(self, handle: StreamHandle, estimate: Estimate) -> None:
        """Replace the estimate of an open stream (e.g. as more of the request is known)."""
        if not isinstance(estimate, Estimate):
            raise TypeError(f"estimate must be an Estimate, got {type(estimate).__name__}")
        with self._lock:
            ident = self._open(handle, "set an estimate on")
            del self._streams[ident]  # re-insert: the most recent estimate is the one shown
            self._streams[ident] = estimate

    def complete(self, usage: Usage, handle: StreamHandle | None = None) -> StateFigures:
        """Apply a completed call's usage: one turn, its output, its reported input; returns
        the :meth:`figures` right after it (read under the same lock: one lock per call).

        ``handle`` is the stream this completion ends (None for a non-streamed call). Input
        is taken only from reported usage (invariant 2): when a turn's input is unknown or
        only ``estimated``, ``input_tokens`` keeps the last reported value, so the displayed
        context does not vanish; likewise an unknown output keeps ``output_tokens``.
        """
        if not isinstance(usage, Usage):
            raise TypeError(f"usage must be a Usage, got {type(usage).__name__}")
        reported_input = usage.input_tokens if usage.source != "estimated" else None
        output = usage.output_tokens
        with self._lock:
            if handle is not None:
                del self._streams[self._open(handle, "complete")]
            if reported_input is not None:
                self._input_tokens = reported_input
            if output is not None:
                self._output_tokens = output
                self._total_output_tokens += output
            self._turn_count += 1
            observed = self._max_observed_input_tokens
            if reported_input is not None and (observed is None or reported_input > observed):
                self._max_observed_input_tokens = reported_input
            return self._figures()

    def fail(self, handle: StreamHandle | None = None) -> None:
        """A call failed or was cancelled: its estimate is cleared and no turn is counted."""
        if handle is None:
            return
        with self._lock:
            del self._streams[self._open(handle, "fail")]

    cancel = fail

    def _open(self, handle: StreamHandle, action: str) -> int:
        if not isinstance(handle, StreamHandle):
            raise TypeError(f"handle must be a StreamHandle, got {type(handle).__name__}")
        if handle._owner is not self:
            raise InvalidTransitionError(f"cannot {action} a stream of another TokenState")
        if handle._id not in self._streams:
            raise InvalidTransitionError(
                f"cannot {action} {handle!r}: that stream has already ended"
            )
        return handle._id

    # -- a dormant agent's state --------------------------------------------------------------
    def snapshot(self) -> tuple[Any, ...]:
        """The figures a dormant agent keeps (no stream is open when an agent goes dormant)."""
        with self._lock:
            return (
                self._input_tokens,
                self._output_tokens,
                self._max_input_tokens,
                self._turn_count,
                self._total_output_tokens,
                self._max_observed_input_tokens,
            )

    @classmethod
    def from_snapshot(cls, figures: tuple[Any, ...]) -> TokenState:
        """The state :meth:`snapshot` kept."""
        state = cls(max_input_tokens=figures[2])
        (
            state._input_tokens,
            state._output_tokens,
            _,
            state._turn_count,
            state._total_output_tokens,
            state._max_observed_input_tokens,
        ) = figures
        return state

    # -- serialization (RFC camelCase names) ----------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The RFC's ``TokenState`` shape; absent values are omitted, as optional TS fields."""
        with self._lock:
            estimate = self._current_estimate()
            out: dict[str, Any] = {
                "inputTokens": self._input_tokens,
                "outputTokens": self._output_tokens,
                "maxInputTokens": self._max_input_tokens,
                "turnCount": self._turn_count,
                "totalOutputTokens": self._total_output_tokens,
                "maxObservedInputTokens": self._max_observed_input_tokens,
                "status": self.status,
            }
        if estimate is not None:
            out["currentEstimate"] = {
                "inputTokens": estimate.input_tokens,
                "source": estimate.source,
            }
        return {k: v for k, v in out.items() if v is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TokenState:
        """Restore from :meth:`to_dict` output or a legacy record.

        Legacy ``totalInputTokens`` becomes ``maxObservedInputTokens``; a stale
        ``estimatedInputTokens`` or ``currentEstimate`` is dropped: no stream of this process
        is open, so an estimate could only be stale (invariant 1).
        """
        if not isinstance(data, Mapping):
            raise TypeError(f"TokenState.from_dict expects a mapping, got {type(data).__name__}")
        known = {
            "inputTokens",
            "outputTokens",
            "maxInputTokens",
            "turnCount",
            "totalOutputTokens",
            "maxObservedInputTokens",
            "status",
            "currentEstimate",
            "totalInputTokens",
            "estimatedInputTokens",
        }
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown TokenState field(s): {', '.join(unknown)}")
        state = cls(max_input_tokens=data.get("maxInputTokens"))
        state._input_tokens = check_token_count("inputTokens", data.get("inputTokens"))
        state._output_tokens = check_token_count("outputTokens", data.get("outputTokens"))
        state._turn_count = check_token_count("turnCount", data.get("turnCount")) or 0
        state._total_output_tokens = (
            check_token_count("totalOutputTokens", data.get("totalOutputTokens")) or 0
        )
        observed = [
            check_token_count(key, data.get(key))
            for key in ("maxObservedInputTokens", "totalInputTokens", "inputTokens")
        ]
        known_observed = [v for v in observed if v is not None]
        state._max_observed_input_tokens = max(known_observed) if known_observed else None
        return state

    def __repr__(self) -> str:
        return f"TokenState({self.to_dict()!r})"


def _check_window(value: Any) -> int | None:
    checked = check_token_count("max_input_tokens", value)
    if checked == 0:
        raise ValueError("max_input_tokens must be positive, got 0")
    return checked
