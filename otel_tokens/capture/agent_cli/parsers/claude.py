"""Claude Code output: ``--output-format json`` (one result object, or with ``--verbose`` an
array of events) and ``stream-json`` (JSONL events). Verified against Claude Code 2.1.330.

Totals come from the final ``result`` event only: ``modelUsage`` per model, each with its own
tokens and ``costUSD`` (a subagent on another model has its own entry; ``usage`` covers the
main loop only), ``thinkingTokens`` counted as reasoning inside output, and
``total_cost_usd`` (``thinkingTokens: 0`` is printed when the API sent no thinking figure:
unknown, not a reported 0). Claude's ``inputTokens`` excludes the cache; :class:`Usage` input includes
it (input = inputTokens + cache read + cache write).

Traps of the real output: every ``assistant`` event of stream-json repeats its message's usage
*from message_start* (``output_tokens: 1``), never the final figure, and one message shows as
one event per content block. A run without its ``result`` (killed, crashed, stdout cut) is
failed; its input figures are taken from those events and its output is left unknown (the
account step estimates it from the text), all marked estimated. An API failure ends with
``is_error: true`` even when ``subtype`` says ``success``, the HTTP status in
``api_error_status`` and, in stream-json, a ``<synthetic>`` assistant message with zero usage:
a failed run, its status as ``error_type``; ``<synthetic>`` is never a model.
"""

from __future__ import annotations

from typing import Any

from ....usage import Usage
from .run import AgentRun, Reader, add, dict_of, exit_failure, http_status, plain_run, sum_usage

__all__ = ["parse"]

SYNTHETIC = "<synthetic>"


def parse(
    stdout: str | bytes | None,
    *,
    stderr: str | bytes | None = None,
    exit_code: int | None = None,
) -> AgentRun:
    """Read one Claude Code run from its ``json`` or ``stream-json`` stdout."""
    reader = Reader()
    raw = reader.text(stdout)
    doc = reader.load(raw)
    if type(doc) is dict:
        events, fmt = [doc], "json"
    elif type(doc) is list:
        events, fmt = doc, "json"
    else:
        events = [event for event, _line in reader.lines(raw) if event is not None]
        fmt = "stream-json"
        if not events:
            return plain_run("claude", raw, exit_code)
    seen = _Events(reader)
    for event in events:
        seen.add(event)
    if seen.result is not None:
        run = _from_result(reader, seen, seen.result)
    else:
        run = _from_messages(reader, seen)
    if exit_code not in (None, 0) and run.error is None:
        message, kind = exit_failure(exit_code)
        run = run.replace(error=message, error_type=kind)
    return run.replace(
        exit_code=exit_code,
        output_format=fmt,
        parse_errors=reader.errors,
        raw=raw,
        tool_calls=seen.tool_calls() if fmt == "stream-json" else None,
    )


class _Events:
    """What the events of one run say, message by message."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self.result: dict[str, Any] | None = None
        self.session_id: str | None = None
        self.model: str | None = None  # from the init event
        self.order: list[str] = []  # message ids in order
        self.messages: dict[str, tuple[str | None, dict[str, Any]]] = {}  # id -> (model, usage)
        self.blocks: dict[str, list[dict[str, Any]]] = {}  # id -> content blocks
        self.tool_ids: set[str] = set()
        self.anonymous_tools = 0

    def add(self, event: Any) -> None:
        if type(event) is not dict:
            self.reader.errors += 1
            return
        kind = event.get("type")
        if kind == "result":
            self.result = event
        elif kind == "system" and event.get("subtype") == "init":
            self.session_id = self.reader.string(event.get("session_id")) or self.session_id
            self.model = self.reader.string(event.get("model")) or self.model
        elif kind == "assistant":
            self._message(dict_of(event.get("message")))
        if self.session_id is None and isinstance(event.get("session_id"), str):
            self.session_id = event["session_id"] or None

    def _message(self, message: dict[str, Any]) -> None:
        msg_id = message.get("id")
        if not isinstance(msg_id, str):
            msg_id = f"#{len(self.order)}"
        if msg_id not in self.messages:
            self.order.append(msg_id)
            self.blocks[msg_id] = []
        model = message.get("model")
        self.messages[msg_id] = (
            model if isinstance(model, str) else None,
            dict_of(message.get("usage")),
        )
        content = message.get("content")
        for block in content if isinstance(content, list) else ():
            block = dict_of(block)
            self.blocks[msg_id].append(block)
            if block.get("type") == "tool_use":
                if isinstance(block.get("id"), str):
                    self.tool_ids.add(block["id"])
                else:
                    self.anonymous_tools += 1

    def tool_calls(self) -> int:
        return len(self.tool_ids) + self.anonymous_tools

    def last_text(self) -> str:
        """The last message that said something."""
        for msg_id in reversed(self.order):
            said = "".join(
                b.get("text", "")
                for b in self.blocks[msg_id]
                if b.get("type") == "text" and isinstance(b.get("text"), str)
            )
            if said.strip():
                return said
        return ""

    def model_calls(self) -> int | None:
        real = [m for m in self.order if self.messages[m][0] != SYNTHETIC]
        return len(real) if self.order else None


def _from_result(reader: Reader, seen: _Events, result: dict[str, Any]) -> AgentRun:
    """The run as its final ``result`` event reports it."""
    usage = [
        part
        for model, figures in dict_of(result.get("modelUsage")).items()
        if (part := _model_usage(reader, str(model), dict_of(figures))) is not None
    ]
    if not usage:
        part = _api_usage(reader, seen.model, dict_of(result.get("usage")))
        if part is not None:
            usage.append(part)
    error = error_type = None
    is_error = result.get("is_error")
    subtype = result.get("subtype")
    if is_error if type(is_error) is bool else subtype not in ("success", None):
        message = result.get("result") if isinstance(result.get("result"), str) else None
        errors = result.get("errors")
        if not message and isinstance(errors, list) and errors:
            message = "; ".join(str(e) for e in errors)
        error = message or (str(subtype) if subtype else "error")
        error_type = http_status(result.get("api_error_status")) or "agent_error"
    text = result["result"] if isinstance(result.get("result"), str) else seen.last_text()
    return AgentRun(
        cli="claude",
        text=text,
        usage=tuple(usage),
        error=error,
        error_type=error_type,
        cost_usd=reader.amount(result.get("total_cost_usd")),
        session_id=reader.string(result.get("session_id")) or seen.session_id,
        turns=reader.count(result.get("num_turns")),
        model_calls=seen.model_calls(),
        duration_ms=reader.amount(result.get("duration_ms")),
        api_duration_ms=reader.amount(result.get("duration_api_ms")),
    )


def _from_messages(reader: Reader, seen: _Events) -> AgentRun:
    """A run cut before its ``result``: input as each message started, output unknown, all
    marked estimated; the run failed."""
    per_model: dict[str | None, Usage] = {}
    for msg_id in seen.order:
        model, figures = seen.messages[msg_id]
        if model == SYNTHETIC:
            continue
        part = _api_usage(reader, model or seen.model, {**figures, "output_tokens": None})
        if part is not None:
            part = part.replace(source="estimated")
            key = part.model
            per_model[key] = sum_usage((per_model[key], part)) if key in per_model else part
    return AgentRun(
        cli="claude",
        text=seen.last_text(),
        usage=tuple(per_model.values()),
        error="no result event (output cut)",
        error_type="truncated_output",
        session_id=seen.session_id,
        model_calls=seen.model_calls(),
    )


def _model_usage(reader: Reader, model: str, figures: dict[str, Any]) -> Usage | None:
    """One ``modelUsage`` entry (camelCase, input excluding the cache); None for the
    ``<synthetic>`` model of an API failure or an entry with no tokens at all."""
    if model == SYNTHETIC:
        return None
    fresh = reader.count(figures.get("inputTokens"))
    read = reader.count(figures.get("cacheReadInputTokens"))
    write = reader.count(figures.get("cacheCreationInputTokens"))
    output = reader.count(figures.get("outputTokens"))
    if not any((fresh, read, write, output)):
        return None  # a model listed without usage (a failed first call): nothing billed
    return reader.usage(
        input_tokens=add(add(fresh, read), write) if fresh is not None else None,
        output_tokens=output,
        cache_read_tokens=read,
        cache_write_tokens=write,
        # Claude Code prints thinkingTokens: 0 when the API sent no thinking figure: unknown
        reasoning_tokens=reader.count(figures.get("thinkingTokens")) or None,
        cost_usd=reader.amount(figures.get("costUSD")),
        model=model,
    )


def _api_usage(reader: Reader, model: str | None, figures: dict[str, Any]) -> Usage | None:
    """An Anthropic API ``usage`` block (snake_case, input excluding the cache)."""
    fresh = reader.count(figures.get("input_tokens"))
    read = reader.count(figures.get("cache_read_input_tokens"))
    write = reader.count(figures.get("cache_creation_input_tokens"))
    thinking = reader.count(dict_of(figures.get("output_tokens_details")).get("thinking_tokens"))
    output = reader.count(figures.get("output_tokens"))
    if not any((fresh, read, write, output)) and output is not None:
        return None  # an all-zero block (a failed call, the <synthetic> message): nothing billed
    return reader.usage(
        input_tokens=add(add(fresh, read), write) if fresh is not None else None,
        output_tokens=output,
        cache_read_tokens=read,
        cache_write_tokens=write,
        reasoning_tokens=thinking if output is not None else None,
        model=None if model == SYNTHETIC else model,
    )
