"""OpenAI Codex CLI ``exec --json`` output (JSONL).

Usage comes from ``turn.completed`` events; it is cumulative over the thread, so the last
one is the run's figure, and a run that resumes a thread reports only its own delta when
the previous totals are given (``previous``). Cached tokens are inside input, reasoning
inside output. ``{"type":"error"}`` lines (reconnect notices) are kept as notices, not
failures; ``turn.failed`` is a failure whatever the exit code. The stream names no model
and no cost.
"""

from __future__ import annotations

from typing import Any

from ...usage import TOKEN_CLASSES, Usage
from .run import AgentRun, Reader, dict_of

__all__ = ["parse", "delta"]

_TOOL_ITEMS = ("command_execution", "file_change", "mcp_tool_call", "web_search", "tool_call")


def parse(
    stdout: str | bytes | None,
    *,
    stderr: str | bytes | None = None,
    exit_code: int | None = None,
    previous: Usage | None = None,
) -> AgentRun:
    """Read one ``codex exec --json`` run; ``previous``: the thread's totals before it."""
    reader = Reader()
    raw = reader.text(stdout)
    other: list[str] = []
    events = 0
    last_usage: dict[str, Any] | None = None
    turns = 0
    thread_id = None
    error: str | None = None
    notices: list[str] = []
    tool_ids: set[str] = set()
    anonymous_tools = 0
    text = ""
    for event, line in reader.lines(raw):
        if event is None:
            other.append(line)
            continue
        events += 1
        kind = event.get("type")
        if kind == "thread.started":
            thread_id = reader.string(event.get("thread_id")) or thread_id
        elif kind == "turn.completed":
            turns += 1
            last_usage = dict_of(event.get("usage"))
        elif kind == "turn.failed":
            turns += 1
            message = dict_of(event.get("error")).get("message")
            error = message if isinstance(message, str) and message else "turn failed"
        elif kind == "error":
            message = event.get("message")
            notices.append(message if isinstance(message, str) else "error")
        elif kind in ("item.started", "item.updated", "item.completed"):
            item = dict_of(event.get("item"))
            item_type = item.get("type") or item.get("item_type")
            if item_type in _TOOL_ITEMS:
                item_id = item.get("id")
                if isinstance(item_id, str):
                    tool_ids.add(item_id)
                elif kind == "item.completed":
                    anonymous_tools += 1
            elif item_type in ("agent_message", "assistant_message") and kind == "item.completed":
                said = item.get("text")
                if isinstance(said, str) and said.strip():
                    text = said
    if not events:
        return AgentRun(cli="codex", text=raw.strip("\n"), exit_code=exit_code,
                        error=f"exit code {exit_code}" if exit_code not in (None, 0) else None,
                        raw=raw)  # fmt: skip
    usage: tuple[Usage, ...] = ()
    if last_usage is not None:
        total = reader.usage(
            input_tokens=reader.count(last_usage.get("input_tokens")),
            output_tokens=reader.count(last_usage.get("output_tokens")),
            cache_read_tokens=reader.count(last_usage.get("cached_input_tokens")),
            cache_write_tokens=reader.count(last_usage.get("cache_write_input_tokens")),
            reasoning_tokens=reader.count(last_usage.get("reasoning_output_tokens")),
        )  # fmt: skip
        if total is not None and previous is not None:
            own = delta(total, previous)
            if own is None:
                reader.errors += 1  # totals went down: not the same thread after all
            else:
                total = own
        if total is not None:
            usage = (total,)
    if error is None:
        if exit_code not in (None, 0):
            error = f"exit code {exit_code}"
        elif last_usage is None:
            error = "no turn.completed event (output truncated)"
    if other and not text:
        text = "\n".join(other)
    return AgentRun(
        cli="codex", text=text, usage=usage, exit_code=exit_code, error=error,
        session_id=thread_id, tool_calls=len(tool_ids) + anonymous_tools, turns=turns,
        output_format="jsonl", notices=tuple(notices), parse_errors=reader.errors, raw=raw,
    )  # fmt: skip


def delta(total: Usage, previous: Usage) -> Usage | None:
    """``total - previous`` per token class (a resumed thread's own usage), or None when a
    class went down (the totals are not of the same thread)."""
    values: dict[str, int | None] = {}
    for name in TOKEN_CLASSES:
        now, before = getattr(total, name), getattr(previous, name)
        if now is None or before is None:
            values[name] = now
            continue
        if now < before:
            return None
        values[name] = now - before
    try:
        return total.replace(**values)
    except ValueError:
        return None
