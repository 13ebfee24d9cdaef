"""OpenAI Codex CLI ``exec --json`` output (JSONL). Verified against codex-cli 0.169.0.

Usage comes from ``turn.completed``, whose figures are the **thread's** running totals: a run
that resumes a thread (``codex exec ... resume <thread>``, possibly in another process) prints
the whole thread's tokens. The parser reports them as they are, marked ``cumulative`` with the
thread id (``thread.started``) as the session; the account step keeps each thread's last totals
and records only the increase. Cached tokens are inside input, reasoning inside output. Codex
prints ``cache_write_input_tokens: 0`` when the API sent no such figure: a 0 there is unknown,
not a reported 0. The stream names no model (the ``-m`` flag does, read by the instrumentor)
and no cost. ``{"type":"error"}`` lines without a ``turn.failed`` are notices (reconnects); a
``turn.failed`` is a failed run with no tokens, its HTTP status as ``error_type`` when the
message gives one.
"""

from __future__ import annotations

import re
from typing import Any

from ....usage import Usage
from .run import AgentRun, Reader, dict_of, exit_failure, http_status, plain_run

__all__ = ["parse"]

_TOOL_ITEMS = ("command_execution", "file_change", "mcp_tool_call", "web_search", "tool_call")
_STATUS = re.compile(r"\bstatus(?: code)?:? (\d{3})\b", re.IGNORECASE)


def parse(
    stdout: str | bytes | None,
    *,
    stderr: str | bytes | None = None,
    exit_code: int | None = None,
) -> AgentRun:
    """Read one ``codex exec --json`` run."""
    reader = Reader()
    raw = reader.text(stdout)
    seen = _Events(reader)
    other = []
    for event, line in reader.lines(raw):
        if event is None:
            other.append(line)
        else:
            seen.add(event)
    if not seen.count:
        return plain_run("codex", raw, exit_code)
    usage: tuple[Usage, ...] = ()
    if seen.usage is not None and seen.error is None:
        total = _usage(reader, seen.usage)
        usage = (total,) if total is not None else ()
    error, error_type = seen.error, seen.error_type
    if error is None:
        error, error_type = exit_failure(exit_code)
    if error is None and seen.usage is None:
        error, error_type = "no turn.completed event (output cut)", "truncated_output"
    return AgentRun(
        cli="codex",
        text=seen.text or "\n".join(other),
        usage=usage,
        exit_code=exit_code,
        error=error,
        error_type=error_type,
        session_id=seen.thread_id,
        cumulative=bool(usage) and seen.thread_id is not None,
        tool_calls=len(seen.tool_ids) + seen.anonymous_tools,
        turns=seen.turns,
        output_format="jsonl",
        notices=tuple(seen.notices),
        parse_errors=reader.errors,
        raw=raw,
    )


class _Events:
    """What the events of one run say."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self.count = self.turns = self.anonymous_tools = 0
        self.thread_id: str | None = None
        self.usage: dict[str, Any] | None = None  # the last turn.completed's
        self.error: str | None = None
        self.error_type: str | None = None
        self.notices: list[str] = []
        self.tool_ids: set[str] = set()
        self.text = ""

    def add(self, event: dict[str, Any]) -> None:
        self.count += 1
        kind = event.get("type")
        if kind == "thread.started":
            self.thread_id = self.reader.string(event.get("thread_id")) or self.thread_id
        elif kind == "turn.completed":
            self.turns += 1
            self.usage = dict_of(event.get("usage"))
        elif kind == "turn.failed":
            self.turns += 1
            message = dict_of(event.get("error")).get("message")
            self.error = message if isinstance(message, str) and message else "turn failed"
            found = _STATUS.search(self.error)
            self.error_type = (http_status(found.group(1)) if found else None) or "agent_error"
        elif kind == "error":
            message = event.get("message")
            self.notices.append(message if isinstance(message, str) else "error")
        elif kind in ("item.started", "item.updated", "item.completed"):
            self._item(kind, dict_of(event.get("item")))

    def _item(self, kind: str, item: dict[str, Any]) -> None:
        item_type = item.get("type") or item.get("item_type")
        if item_type in _TOOL_ITEMS:
            if isinstance(item.get("id"), str):
                self.tool_ids.add(item["id"])
            elif kind == "item.completed":
                self.anonymous_tools += 1
        elif item_type in ("agent_message", "assistant_message") and kind == "item.completed":
            said = item.get("text")
            if isinstance(said, str) and said.strip():
                self.text = said


def _usage(reader: Reader, figures: dict[str, Any]) -> Usage | None:
    write = reader.count(figures.get("cache_write_input_tokens"))
    return reader.usage(
        input_tokens=reader.count(figures.get("input_tokens")),
        output_tokens=reader.count(figures.get("output_tokens")),
        cache_read_tokens=reader.count(figures.get("cached_input_tokens")),
        cache_write_tokens=write or None,  # Codex prints 0 when the API sent no such figure
        reasoning_tokens=reader.count(figures.get("reasoning_output_tokens")),
    )
