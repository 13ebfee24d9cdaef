"""GitHub Copilot CLI output: ``--output-format json`` JSONL, the text-mode usage summary and
the ``--usage-output-file`` JSON (seed 002).

JSONL: output tokens are the sum of ``assistant.message`` ``outputTokens`` (deltas repeat
the same text and are never counted or used when the message itself arrived); premium
requests and durations come from the final ``result`` line; input and cache tokens never
reach stdout, so they stay unknown unless the usage file is read. Lines that are not JSON
are kept as text. When the output holds no JSON event at all, the text-mode summary
(stderr, or the end of stdout) is parsed instead and marked ``parsed_text``.
"""

from __future__ import annotations

import re
from typing import Any

from ...usage import Usage
from .run import AgentRun, Reader, dict_of

__all__ = ["parse", "parse_summary", "parse_usage_file", "merge_usage_file"]

_TOOL_EVENTS = ("tool.execution_start", "assistant.tool_call")


def parse(
    stdout: str | bytes | None,
    *,
    stderr: str | bytes | None = None,
    exit_code: int | None = None,
    usage_file: str | bytes | None = None,
) -> AgentRun:
    """Read one Copilot run from its stdout (JSONL or text), stderr and optional usage file."""
    reader = Reader()
    raw = reader.text(stdout)
    run = _parse_jsonl(raw, reader, exit_code)
    if run is None:  # no JSON event at all: text mode (lines that looked like JSON are text)
        reader.errors = 0
        run = _parse_text(raw, reader.text(stderr), reader, exit_code)
    if usage_file is not None:
        run = merge_usage_file(run, usage_file)
    return run


def _parse_jsonl(raw: str, reader: Reader, exit_code: int | None) -> AgentRun | None:
    pieces: list[str | None] = []  # text lines, and None where a message's text goes
    messages: list[tuple[str, str | None, int | None]] = []  # (content, model, tokens)
    message_slot: list[int] = []  # index in pieces of each message
    seen_ids: dict[str, int] = {}  # messageId -> index in messages
    deltas: dict[str, list[str]] = {}  # messageId -> delta texts without a message yet
    delta_slot: dict[str, int] = {}
    events = 0
    tools = tool_requests = 0
    model: str | None = None
    result: dict[str, Any] | None = None
    error: str | None = None
    for event, line in reader.lines(raw):
        if event is None:
            pieces.append(line)
            continue
        events += 1
        kind = event.get("type")
        data = dict_of(event.get("data"))
        seen_model = data.get("model")
        if kind == "assistant.message":
            content = data.get("content")
            content = content if isinstance(content, str) else ""
            tokens = reader.count(data.get("outputTokens"))
            msg_model = seen_model if isinstance(seen_model, str) and seen_model else None
            requests = data.get("toolRequests")
            if isinstance(requests, list):
                tool_requests += len(requests)
            msg_id = data.get("messageId")
            if isinstance(msg_id, str):
                deltas.pop(msg_id, None)
                slot = delta_slot.pop(msg_id, None)
                if msg_id in seen_ids:  # the same message again: keep the last copy
                    messages[seen_ids[msg_id]] = (content, msg_model, tokens)
                    continue
                seen_ids[msg_id] = len(messages)
            else:
                slot = None
            if slot is None:
                slot = len(pieces)
                pieces.append(None)
            messages.append((content, msg_model, tokens))
            message_slot.append(slot)
        elif kind == "assistant.message_delta":
            msg_id = data.get("messageId")
            text = data.get("deltaContent")
            if isinstance(msg_id, str) and isinstance(text, str) and msg_id not in seen_ids:
                if msg_id not in deltas:
                    deltas[msg_id] = []
                    delta_slot[msg_id] = len(pieces)
                    pieces.append(None)
                deltas[msg_id].append(text)
        elif kind in _TOOL_EVENTS:
            tools += 1
        elif kind == "result":
            result = event
        elif kind in ("session.error", "error"):
            error = reader.string(data.get("message") or event.get("message")) or str(kind)
        if isinstance(seen_model, str) and seen_model:
            model = seen_model
    if not events:
        return None
    # a message whose deltas arrived but whose final event did not (truncated stream)
    for msg_id, parts in deltas.items():
        messages.append(("".join(parts), None, None))
        message_slot.append(delta_slot[msg_id])
    last = max((i for i, m in enumerate(messages) if m[0].strip()), default=None)
    out = [p for p in pieces if p is not None]
    if last is not None:
        keep = message_slot[last]
        out = [messages[last][0] if i == keep else p for i, p in enumerate(pieces)
               if p is not None or i == keep]  # fmt: skip
    per_model: dict[str | None, int] = {}
    counted = False
    for _content, msg_model, tokens in messages:
        if tokens is None:
            continue
        counted = True
        key = msg_model or model
        per_model[key] = per_model.get(key, 0) + tokens
    usage = tuple(
        u for u in (reader.usage(output_tokens=n, model=m) for m, n in per_model.items()) if u
    ) if counted else ()  # fmt: skip

    premium = api_ms = session_ms = session_id = None
    result_code = None
    if result is not None:
        stats = dict_of(result.get("usage"))
        premium = reader.amount(stats.get("premiumRequests"))
        api_ms = reader.amount(stats.get("totalApiDurationMs"))
        session_ms = reader.amount(stats.get("sessionDurationMs"))
        session_id = reader.string(result.get("sessionId"))
        code = result.get("exitCode")
        result_code = code if type(code) is int else None
    code = exit_code if exit_code is not None else result_code
    if error is None:
        if code not in (None, 0):
            error = f"exit code {code}"
        elif result is None:
            error = "no result event (output truncated)"
    return AgentRun(
        cli="copilot", text="\n".join(out), usage=usage, premium_requests=premium,
        exit_code=code, error=error, session_id=session_id, tool_calls=tools or tool_requests,
        model_calls=len(messages) - len(deltas), duration_ms=session_ms, api_duration_ms=api_ms,
        output_format="jsonl", parse_errors=reader.errors, raw=raw,
    )  # fmt: skip


# -- the text-mode usage summary ------------------------------------------------------------
_NUMBER = r"(\d[\d,]*(?:\.\d+)?\s*[kKmM]?)"
_ITEM = re.compile(_NUMBER + r"\s+(in|input|out|output|cached|cache read|cache write|"
                   r"cache written|written|reasoning)\b", re.IGNORECASE)  # fmt: skip
_PREMIUM = re.compile(r"(?:Est\.\s*)?" + r"(\d+(?:\.\d+)?)\s+Premium request", re.IGNORECASE)
_CURRENT_REQUESTS = re.compile(r"^\s*Requests\s+(\d+(?:\.\d+)?)\s+Premium", re.IGNORECASE)
_CURRENT_TOKENS = re.compile(r"^\s*Tokens\s+↑\s*" + _NUMBER + r"(?:\s*\(([^)]*)\))?"
                             r"(?:\s*•\s*↓\s*" + _NUMBER + r"(?:\s*\(([^)]*)\))?)?")  # fmt: skip
_TOTAL_PREMIUM = re.compile(r"^\s*Total usage est:\s*(\d+(?:\.\d+)?)\s+Premium", re.IGNORECASE)
_SECONDS = r"([\d.]+)\s*(ms|s|m|h)"
_API_TIME = re.compile(r"^\s*(?:API time spent|Total duration \(API\)):\s*" + _SECONDS)
_SESSION_TIME = re.compile(r"^\s*(?:Total session time|Total duration \(wall\)):\s*" + _SECONDS)
_MODEL_LINE = re.compile(r"^\s+([A-Za-z0-9][\w.:/-]*)\s+(.*\d.*)$")
_SUMMARY_START = re.compile(r"^\s*(Changes|Requests|Tokens|Resume|Total usage est:|API time spent|"
                            r"Total session time|Total duration|Total code changes|"
                            r"Breakdown by AI model|Usage by model)\b")  # fmt: skip
_SCALE = {"k": 1_000, "m": 1_000_000}
_UNIT_MS = {"ms": 1.0, "s": 1000.0, "m": 60_000.0, "h": 3_600_000.0}


def _number(text: str) -> int:
    """``48.2k`` -> 48200, ``1,234`` -> 1234 (the display is rounded: an approximation)."""
    text = text.replace(",", "").strip()
    scale = _SCALE.get(text[-1].lower(), 1)
    if scale != 1:
        text = text[:-1].strip()
    return int(round(float(text) * scale))


def _items(text: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for number, label in _ITEM.findall(text):
        label = label.lower()
        key = {"in": "input", "out": "output", "cached": "cache read",
               "cache written": "cache write", "written": "cache write"}.get(label, label)  # fmt: skip
        found[key] = _number(number)
    return found


def _usage_of(reader: Reader, items: dict[str, int], model: str | None,
              premium: float | None = None) -> Usage | None:  # fmt: skip
    return reader.usage(
        input_tokens=items.get("input"), output_tokens=items.get("output"),
        cache_read_tokens=items.get("cache read"), cache_write_tokens=items.get("cache write"),
        reasoning_tokens=items.get("reasoning"), premium_requests=premium, model=model,
        source="parsed_text",
    )  # fmt: skip


def parse_summary(text: str | bytes | None) -> AgentRun:
    """The text-mode usage summary alone (all three layouts), figures marked ``parsed_text``."""
    reader = Reader()
    return _parse_text("", reader.text(text), reader, None)


def _parse_text(out: str, err: str, reader: Reader, exit_code: int | None) -> AgentRun:
    usage: list[Usage] = []
    premium = api_ms = session_ms = None
    found = False
    text_lines = out.splitlines()
    summary_at = None
    for source_name, block in (("err", err), ("out", out)):
        lines = block.splitlines()
        in_models = False
        for index, line in enumerate(lines):
            try:
                if m := _CURRENT_REQUESTS.match(line):
                    premium = float(m.group(1))
                elif m := _TOTAL_PREMIUM.match(line):
                    premium = float(m.group(1))
                elif m := _CURRENT_TOKENS.match(line):
                    items = {"input": _number(m.group(1))}
                    items.update({k: v for k, v in _items(m.group(2) or "").items()
                                  if k != "input"})  # fmt: skip
                    if m.group(3):
                        items["output"] = _number(m.group(3))
                        items.update({k: v for k, v in _items(m.group(4) or "").items()
                                      if k not in ("input", "output")})  # fmt: skip
                    if (u := _usage_of(reader, items, None)) is not None:
                        usage.append(u)
                elif m := _API_TIME.match(line):
                    api_ms = float(m.group(1)) * _UNIT_MS[m.group(2)]
                elif m := _SESSION_TIME.match(line):
                    session_ms = float(m.group(1)) * _UNIT_MS[m.group(2)]
                elif re.match(r"^\s*(Breakdown by AI model|Usage by model):", line):
                    in_models = True
                elif in_models and (m := _MODEL_LINE.match(line)):
                    items = _items(m.group(2))
                    if items:
                        p = _PREMIUM.search(m.group(2))
                        part = _usage_of(reader, items, m.group(1),
                                         float(p.group(1)) if p else None)  # fmt: skip
                        if part is not None:
                            usage.append(part)
                    else:
                        in_models = False
                else:
                    in_models = in_models and not line.strip() == ""
                    continue
            except (ValueError, OverflowError, IndexError):
                reader.errors += 1
                continue
            found = True
            if source_name == "out" and summary_at is None:
                summary_at = index
        if found and source_name == "err":
            break
    if summary_at is not None:  # the summary printed into stdout is not the agent's text
        start = summary_at
        while start > 0 and _SUMMARY_START.match(text_lines[start - 1]):
            start -= 1
        text_lines = text_lines[:start]
    error = f"exit code {exit_code}" if exit_code not in (None, 0) else None
    return AgentRun(
        cli="copilot", text="\n".join(text_lines).strip("\n"), usage=tuple(usage),
        premium_requests=premium, exit_code=exit_code, error=error, duration_ms=session_ms,
        api_duration_ms=api_ms, output_format="text", parse_errors=reader.errors, raw=out,
    )  # fmt: skip


# -- the --usage-output-file JSON -----------------------------------------------------------
def parse_usage_file(data: str | bytes | None) -> AgentRun:
    """The ``--usage-output-file`` JSON: input, cache, output and reasoning tokens per model,
    premium requests (``totalPremiumRequestCost``) and the number of model requests."""
    reader = Reader()
    raw = reader.text(data)
    doc = reader.load(raw)
    if type(doc) is not dict:
        return AgentRun(cli="copilot", output_format="usage_file", raw=raw,
                        parse_errors=1 if raw.strip() else 0)  # fmt: skip
    usage: list[Usage] = []
    requests: int | None = None
    for model, metrics in dict_of(doc.get("modelMetrics")).items():
        metrics = dict_of(metrics)
        u = dict_of(metrics.get("usage"))
        req = dict_of(metrics.get("requests"))
        count = reader.count(req.get("count"))
        if count is not None:
            requests = (requests or 0) + count
        part = reader.usage(
            input_tokens=reader.count(u.get("inputTokens")),
            output_tokens=reader.count(u.get("outputTokens")),
            cache_read_tokens=reader.count(u.get("cacheReadTokens")),
            cache_write_tokens=reader.count(u.get("cacheWriteTokens")),
            reasoning_tokens=reader.count(u.get("reasoningTokens")),
            premium_requests=reader.amount(req.get("cost")), model=str(model),
        )  # fmt: skip
        if part is not None:
            usage.append(part)
    return AgentRun(
        cli="copilot", usage=tuple(usage),
        premium_requests=reader.amount(doc.get("totalPremiumRequestCost")),
        model_calls=requests, api_duration_ms=reader.amount(doc.get("totalApiDurationMs")),
        output_format="usage_file", parse_errors=reader.errors, raw=raw,
    )  # fmt: skip


def merge_usage_file(run: AgentRun, data: str | bytes | None) -> AgentRun:
    """``run`` with the usage file's per-model figures (they carry input and cache tokens,
    which stdout never does); the stream's own premium requests and counts are kept."""
    extra = parse_usage_file(data)
    changes: dict[str, Any] = {"parse_errors": run.parse_errors + extra.parse_errors}
    if extra.usage:
        changes["usage"] = extra.usage
    if run.premium_requests is None and extra.premium_requests is not None:
        changes["premium_requests"] = extra.premium_requests
    if run.api_duration_ms is None and extra.api_duration_ms is not None:
        changes["api_duration_ms"] = extra.api_duration_ms
    if extra.model_calls is not None:
        changes["model_calls"] = extra.model_calls
    return run.replace(**changes)
