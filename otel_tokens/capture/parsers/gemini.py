"""Google Gemini CLI output: ``--output-format json`` (one object) and ``stream-json`` (JSONL).

JSON: ``stats.models[model].tokens`` per model; ``prompt`` includes ``cached``; output is
``candidates`` + ``thoughts`` (candidates exclude thoughts; reasoning counts inside output);
``roles`` repeat the model totals and are not added again. stream-json: the final ``result``
event's ``stats`` (per model when ``models`` is there); the stream has no thoughts figure,
so reasoning = total − input − output, added to output.
"""

from __future__ import annotations

from typing import Any

from ...usage import Usage
from .run import AgentRun, Reader, add, dict_of

__all__ = ["parse"]


def parse(
    stdout: str | bytes | None,
    *,
    stderr: str | bytes | None = None,
    exit_code: int | None = None,
) -> AgentRun:
    """Read one Gemini CLI run from its ``json`` or ``stream-json`` stdout."""
    reader = Reader()
    raw = reader.text(stdout)
    doc = reader.load(raw)
    if type(doc) is dict and doc.get("type") is None:
        return _parse_json(doc, reader, raw, exit_code)
    return _parse_stream(raw, reader, exit_code)


def _error_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, dict):
        message = value.get("message")
        return message if isinstance(message, str) and message else "error"
    return str(value) or "error"


def _parse_json(doc: dict[str, Any], reader: Reader, raw: str, exit_code: int | None) -> AgentRun:
    stats = dict_of(doc.get("stats"))
    usage: list[Usage] = []
    requests: int | None = None
    latency: float | None = None
    for model, entry in dict_of(stats.get("models")).items():
        entry = dict_of(entry)
        tokens = dict_of(entry.get("tokens"))
        api = dict_of(entry.get("api"))
        count = reader.count(api.get("totalRequests"))
        requests = add(requests, count)
        ms = reader.amount(api.get("totalLatencyMs"))
        if ms is not None:
            latency = (latency or 0.0) + ms
        cached = reader.count(tokens.get("cached"))
        prompt = reader.count(tokens.get("prompt"))
        if prompt is None:
            fresh = reader.count(tokens.get("input"))
            prompt = add(fresh, cached) if fresh is not None else None
        candidates = reader.count(tokens.get("candidates"))
        thoughts = reader.count(tokens.get("thoughts"))
        part = reader.usage(
            input_tokens=prompt, cache_read_tokens=cached,
            output_tokens=add(candidates, thoughts), reasoning_tokens=thoughts, model=str(model),
        )  # fmt: skip
        if part is not None:
            usage.append(part)
    tools = dict_of(stats.get("tools"))
    error = _error_text(doc.get("error"))
    if error is None and exit_code not in (None, 0):
        error = f"exit code {exit_code}"
    text = doc.get("response")
    return AgentRun(
        cli="gemini", text=text if isinstance(text, str) else "", usage=tuple(usage),
        exit_code=exit_code, error=error, session_id=reader.string(doc.get("session_id")),
        tool_calls=reader.count(tools.get("totalCalls")), model_calls=requests,
        api_duration_ms=latency, output_format="json", parse_errors=reader.errors, raw=raw,
    )  # fmt: skip


def _stream_usage(reader: Reader, stats: dict[str, Any], model: str | None) -> Usage | None:
    total = reader.count(stats.get("total_tokens"))
    prompt = reader.count(stats.get("input_tokens"))
    cached = reader.count(stats.get("cached"))
    if prompt is None:
        fresh = reader.count(stats.get("input"))
        prompt = add(fresh, cached) if fresh is not None else None
    output = reader.count(stats.get("output_tokens"))
    reasoning = None
    if total is not None and prompt is not None and output is not None:
        reasoning = total - prompt - output
        if reasoning < 0:
            reader.errors += 1
            reasoning = None
    return reader.usage(
        input_tokens=prompt, cache_read_tokens=cached, output_tokens=add(output, reasoning),
        reasoning_tokens=reasoning, model=model,
    )  # fmt: skip


def _parse_stream(raw: str, reader: Reader, exit_code: int | None) -> AgentRun:
    segments: list[list[str]] = [[]]
    other: list[str] = []
    events = 0
    result: dict[str, Any] | None = None
    session_id = model = None
    tool_ids: set[str] = set()
    anonymous_tools = 0
    error: str | None = None
    notices: list[str] = []
    for event, line in reader.lines(raw):
        if event is None:
            other.append(line)
            continue
        events += 1
        kind = event.get("type")
        if kind == "init":
            session_id = reader.string(event.get("session_id")) or session_id
            model = reader.string(event.get("model")) or model
        elif kind == "message" and event.get("role") == "assistant":
            content = event.get("content")
            if isinstance(content, str):
                if event.get("delta") is True:
                    segments[-1].append(content)
                else:
                    segments.append([content])
        elif kind == "tool_use":
            tool_id = event.get("tool_id")
            if isinstance(tool_id, str):
                tool_ids.add(tool_id)
            else:
                anonymous_tools += 1
            if segments[-1]:
                segments.append([])
        elif kind == "error":
            message = event.get("message")
            message = message if isinstance(message, str) and message else "error"
            if event.get("severity") == "error":
                error = message
            else:
                notices.append(message)
        elif kind == "result":
            result = event
    if not events:
        return AgentRun(cli="gemini", text=raw.strip("\n"), exit_code=exit_code,
                        error=f"exit code {exit_code}" if exit_code not in (None, 0) else None,
                        raw=raw)  # fmt: skip
    said = [s for s in segments if "".join(s).strip()]
    text = "".join(said[-1]) if said else "\n".join(other)
    usage: list[Usage] = []
    tools: int | None = len(tool_ids) + anonymous_tools
    duration = None
    if result is not None:
        stats = dict_of(result.get("stats"))
        for name, figures in dict_of(stats.get("models")).items():
            part = _stream_usage(reader, dict_of(figures), str(name))
            if part is not None:
                usage.append(part)
        if not usage:
            part = _stream_usage(reader, stats, model)
            if part is not None:
                usage.append(part)
        reported_tools = reader.count(stats.get("tool_calls"))
        if reported_tools is not None:
            tools = reported_tools
        duration = reader.amount(stats.get("duration_ms"))
        status = result.get("status")
        if status not in ("success", None) and error is None:
            error = _error_text(result.get("error")) or str(status)
    elif error is None:
        error = "no result event (output truncated)"
    if error is None and exit_code not in (None, 0):
        error = f"exit code {exit_code}"
    return AgentRun(
        cli="gemini", text=text, usage=tuple(usage), exit_code=exit_code, error=error,
        session_id=session_id, tool_calls=tools, duration_ms=duration,
        output_format="stream-json", notices=tuple(notices), parse_errors=reader.errors,
        raw=raw,
    )  # fmt: skip
