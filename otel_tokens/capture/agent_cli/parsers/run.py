"""`AgentRun`: what one agent-CLI invocation did, as read from its output.

Every CLI parser returns one. A figure the output does not carry is None, never 0; bad
pieces of output are counted in ``parse_errors`` (the instrumentor reports them as
``otel_tokens.instrumentation.errors{kind=parse}``), never raised.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from typing import Any, Iterator

from ....usage import MAX_TOKEN_COUNT, USAGE_SOURCES, Usage, check_token_count

__all__ = ["AgentRun", "Reader"]


@dataclass(frozen=True, slots=True)
class AgentRun:
    """One CLI run: reconstructed text, usage per model, premium requests, cost and status.

    ``usage`` holds one :class:`Usage` per model (possibly none); ``cost_usd`` and
    ``premium_requests`` are the run's own totals when the CLI reported them. Durations are
    in milliseconds. ``raw`` is the output the record was read from, kept aside.

    ``error_type`` is the low-cardinality kind of a failure (``error.type``): the HTTP status
    of an API error (``"400"``), ``truncated_output`` (no final result), ``exit_code``,
    ``untrusted_workspace`` or ``agent_error``; ``error`` is the message. ``cumulative``: the
    usage is the conversation's running total (a resumed Codex thread), not this run's own.
    """

    cli: str
    text: str = ""
    usage: tuple[Usage, ...] = ()
    premium_requests: float | None = None
    cost_usd: float | None = None
    exit_code: int | None = None
    error: str | None = None
    session_id: str | None = None
    tool_calls: int | None = None
    model_calls: int | None = None
    turns: int | None = None
    duration_ms: float | None = None
    api_duration_ms: float | None = None
    output_format: str = "text"
    notices: tuple[str, ...] = ()
    parse_errors: int = 0
    error_type: str | None = None
    cumulative: bool = False
    model: str | None = None  # the model the output names (when no usage record carries it)
    raw: str = field(default="", repr=False)

    @property
    def failed(self) -> bool:
        """True when the CLI reported an error or exited non-zero."""
        return self.error is not None or (self.exit_code is not None and self.exit_code != 0)

    @property
    def models(self) -> tuple[str, ...]:
        """Models that have usage, in the order they appear."""
        return tuple(u.model for u in self.usage if u.model)

    @property
    def total(self) -> Usage | None:
        """The run's usage summed over models, with the run-level cost and premium requests
        (None when the output reported no usage at all)."""
        if not self.usage and self.premium_requests is None and self.cost_usd is None:
            return None
        total = sum_usage(self.usage)
        changes: dict[str, Any] = {}
        if self.premium_requests is not None:
            changes["premium_requests"] = self.premium_requests
        if self.cost_usd is not None:
            changes["cost_usd"] = self.cost_usd
        if len(self.usage) == 1:
            changes["model"] = self.usage[0].model
        return total.replace(**changes)

    def replace(self, **changes: Any) -> AgentRun:
        """A copy with ``changes`` applied."""
        return replace(self, **changes)


class Reader:
    """Shared helpers of the parsers: decoding, JSON lines, checked numbers, error count."""

    __slots__ = ("errors",)

    def __init__(self) -> None:
        self.errors = 0

    @staticmethod
    def text(data: str | bytes | bytearray | None) -> str:
        """Output as text (undecodable bytes replaced, never an error)."""
        if data is None:
            return ""
        if isinstance(data, (bytes, bytearray, memoryview)):
            return bytes(data).decode("utf-8", "replace")
        return data if isinstance(data, str) else str(data)

    def lines(self, text: str) -> Iterator[tuple[dict[str, Any] | None, str]]:
        """Each non-blank line as ``(event, line)``: event is the decoded JSON object, or
        None for a line of plain text. A broken JSON line (truncated, interleaved) is
        skipped and counted: it is neither an event nor the agent's text."""
        loads = json.loads
        for line in text.splitlines():
            stripped = line.strip()
            if not stripped:
                continue
            if stripped[0] == "{":
                try:
                    obj = loads(stripped)
                except (ValueError, RecursionError):
                    self.errors += 1
                    continue
                if type(obj) is dict:
                    yield obj, line
                    continue
            yield None, line

    def load(self, text: str) -> Any:
        """The whole text as one JSON document, or None (no error counted)."""
        stripped = text.strip()
        if not stripped or stripped[0] not in "{[":
            return None
        try:
            return json.loads(stripped)
        except (ValueError, RecursionError):
            return None

    def count(self, value: Any) -> int | None:
        """A token count or event count by the one rule (``usage.check_token_count``), else
        None (error counted unless the value is simply absent)."""
        if type(value) is int and 0 <= value <= MAX_TOKEN_COUNT:  # the common case, kept cheap
            return value
        try:
            return check_token_count("count", value)
        except ValueError:
            self.errors += 1
            return None

    def amount(self, value: Any) -> float | None:
        """A non-negative finite number (premium requests, USD, milliseconds), else None."""
        if value is None:
            return None
        if type(value) in (int, float) and math.isfinite(value) and value >= 0:
            return float(value)
        self.errors += 1
        return None

    def string(self, value: Any) -> str | None:
        """A non-empty string, else None (error counted for a non-string)."""
        if value is None:
            return None
        if isinstance(value, str):
            return value or None
        self.errors += 1
        return None

    def usage(self, **values: Any) -> Usage | None:
        """A :class:`Usage`, or None when it has no figure; inconsistent figures (cache above
        input, reasoning above output) are dropped and counted, never raised."""
        try:
            usage = Usage(**values)
        except (ValueError, TypeError):
            self.errors += 1
            for name in ("cache_read_tokens", "cache_write_tokens", "reasoning_tokens"):
                values[name] = None
            try:
                usage = Usage(**values)
            except (ValueError, TypeError):
                return None
        if usage.is_empty:
            return None
        return usage


def sum_usage(parts: Any) -> Usage:
    """Parts summed; a sum that breaks the record's rules (cache above input, from parts of
    which some did not report input) keeps only the classes that still add up."""
    total = Usage()
    for part in parts:
        try:
            total = total + part
        except ValueError:
            merged = {
                name: add(getattr(total, name), getattr(part, name))
                for name in ("input_tokens", "output_tokens")
            }
            total = Usage(
                **merged,
                premium_requests=add(total.premium_requests, part.premium_requests),
                cost_usd=add(total.cost_usd, part.cost_usd),
                model=total.model if total.model == part.model else None,
                source=max(total.source, part.source, key=USAGE_SOURCES.index),
            )
    return total


def dict_of(value: Any) -> dict[str, Any]:
    """``value`` when it is a dict, else an empty one (for tolerant nested access)."""
    return value if type(value) is dict else {}


def add(a: Any, b: Any) -> Any:
    """None-aware sum of two counts."""
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def http_status(value: Any) -> str | None:
    """An HTTP error status (400-599) as ``error.type`` text, or None."""
    if type(value) is int and 400 <= value <= 599:
        return str(value)
    if isinstance(value, str) and value.isdigit():
        return http_status(int(value))
    return None


def exit_failure(exit_code: int | None) -> tuple[str | None, str | None]:
    """(message, error type) of a non-zero exit code alone."""
    if exit_code in (None, 0):
        return None, None
    return f"exit code {exit_code}", "exit_code"


def plain_run(cli: str, raw: str, exit_code: int | None) -> AgentRun:
    """A run whose output held no event of the CLI's format: its text, its exit status."""
    error, kind = exit_failure(exit_code)
    return AgentRun(
        cli=cli, text=raw.strip("\n"), exit_code=exit_code, error=error, error_type=kind, raw=raw
    )
