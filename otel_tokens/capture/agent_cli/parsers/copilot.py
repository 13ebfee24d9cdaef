"""GitHub Copilot CLI output: ``--output-format json`` JSONL, the text-mode usage summary and
the ``--usage-output-file`` JSON (seed 002). Verified against Copilot CLI 1.0.102.

JSONL: in 1.0.102 stdout carries **no usage at all** (``assistant.message`` has no
``outputTokens``, no usage event reaches stdout): exact usage comes from the usage file, which
the instrumentor asks for by default. Older releases put ``outputTokens`` on each
``assistant.message`` (summed per model; deltas repeat the same text and are never counted).
Premium requests and durations come from the final ``result`` line; ``session.error`` (with
its HTTP ``statusCode``) is a failed run. Lines that are not JSON are kept as text. When the
output holds no JSON event at all, the text-mode summary (stderr, or the end of stdout) is
read instead: ``Tokens ↑ 12.0k (6.0k cached) • ↓ 1.5k (633 reasoning)``; figures the display
rounded to k/m are marked ``estimated`` (exact ones, such as the reasoning, stay exact in
value). :func:`silent_output` rebuilds what ``-s`` prints from the JSON output.
"""

from __future__ import annotations

import re
from typing import Any

from ....usage import Usage
from .run import AgentRun, Reader, dict_of, exit_failure, http_status

__all__ = ["merge_usage_file", "parse", "parse_summary", "parse_usage_file", "silent_output"]

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
    seen = _Events(reader)
    for event, line in reader.lines(raw):
        seen.add(event, line)
    if not seen.count:
        return None
    seen.close_deltas()
    premium = api_ms = session_ms = session_id = result_code = None
    if seen.result is not None:
        stats = dict_of(seen.result.get("usage"))
        premium = reader.amount(stats.get("premiumRequests"))
        api_ms = reader.amount(stats.get("totalApiDurationMs"))
        session_ms = reader.amount(stats.get("sessionDurationMs"))
        session_id = reader.string(seen.result.get("sessionId"))
        code = seen.result.get("exitCode")
        result_code = code if type(code) is int else None
    code = exit_code if exit_code is not None else result_code
    error, error_type = seen.error, seen.error_type
    if error is None:
        error, error_type = exit_failure(code)
    if error is None and seen.result is None:
        error, error_type = "no result event (output cut)", "truncated_output"
    return AgentRun(
        cli="copilot",
        text=seen.text(),
        usage=seen.usage(),
        premium_requests=premium,
        exit_code=code,
        error=error,
        error_type=error_type,
        session_id=session_id,
        tool_calls=seen.tools or seen.tool_requests,
        model_calls=seen.model_calls(),
        duration_ms=session_ms,
        api_duration_ms=api_ms,
        output_format="jsonl",
        model=seen.model,
        parse_errors=reader.errors,
        raw=raw,
    )


class _Events:
    """What the JSONL events of one run say: messages (final copies win over deltas), tools,
    the result line, a session error."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self.count = self.tools = self.tool_requests = 0
        self.pieces: list[str | None] = []  # text lines, and None where a message's text goes
        self.messages: list[tuple[str, str | None, int | None]] = []  # (content, model, tokens)
        self.slots: list[int] = []  # index in pieces of each message
        self.ids: dict[str, int] = {}  # messageId -> index in messages
        self.deltas: dict[str, list[str]] = {}  # messageId -> delta texts, no message yet
        self.delta_slots: dict[str, int] = {}
        self.model: str | None = None
        self.result: dict[str, Any] | None = None
        self.error: str | None = None
        self.error_type: str | None = None
        self.open_deltas = 0

    def add(self, event: dict[str, Any] | None, line: str) -> None:
        if event is None:
            self.pieces.append(line)
            return
        self.count += 1
        kind = event.get("type")
        data = dict_of(event.get("data"))
        if kind == "assistant.message":
            self._message(data)
        elif kind == "assistant.message_delta":
            self._delta(data)
        elif kind in _TOOL_EVENTS:
            self.tools += 1
        elif kind == "result":
            self.result = event
        elif kind in ("session.error", "error"):
            message = self.reader.string(data.get("message") or event.get("message"))
            self.error = message or str(kind)
            self.error_type = http_status(data.get("statusCode")) or "agent_error"
        model = data.get("model")
        if isinstance(model, str) and model:
            self.model = model

    def _message(self, data: dict[str, Any]) -> None:
        content = data.get("content") if isinstance(data.get("content"), str) else ""
        model = (
            data.get("model") if isinstance(data.get("model"), str) and data.get("model") else None
        )
        entry = (content, model, self.reader.count(data.get("outputTokens")))
        if isinstance(data.get("toolRequests"), list):
            self.tool_requests += len(data["toolRequests"])
        msg_id = data.get("messageId")
        slot = None
        if isinstance(msg_id, str):
            self.deltas.pop(msg_id, None)
            slot = self.delta_slots.pop(msg_id, None)
            if msg_id in self.ids:  # the same message again: keep the last copy
                self.messages[self.ids[msg_id]] = entry
                return
            self.ids[msg_id] = len(self.messages)
        if slot is None:
            slot = len(self.pieces)
            self.pieces.append(None)
        self.messages.append(entry)
        self.slots.append(slot)

    def _delta(self, data: dict[str, Any]) -> None:
        msg_id, text = data.get("messageId"), data.get("deltaContent")
        if isinstance(msg_id, str) and isinstance(text, str) and msg_id not in self.ids:
            if msg_id not in self.deltas:
                self.deltas[msg_id] = []
                self.delta_slots[msg_id] = len(self.pieces)
                self.pieces.append(None)
            self.deltas[msg_id].append(text)

    def close_deltas(self) -> None:
        """A message whose deltas arrived but whose final event did not (cut output)."""
        for msg_id, parts in self.deltas.items():
            self.messages.append(("".join(parts), None, None))
            self.slots.append(self.delta_slots[msg_id])
        self.open_deltas = len(self.deltas)

    def model_calls(self) -> int:
        return len(self.messages) - self.open_deltas

    def text(self) -> str:
        """The text lines, with the last message that said something in its place."""
        last = max((i for i, m in enumerate(self.messages) if m[0].strip()), default=None)
        if last is None:
            return "\n".join(p for p in self.pieces if p is not None)
        keep = self.slots[last]
        return "\n".join(
            self.messages[last][0] if i == keep else p
            for i, p in enumerate(self.pieces)
            if p is not None or i == keep
        )

    def usage(self) -> tuple[Usage, ...]:
        """Output tokens per model, from messages that carry them (older releases only)."""
        per_model: dict[str | None, int] = {}
        for _content, model, tokens in self.messages:
            if tokens is not None:
                key = model or self.model
                per_model[key] = per_model.get(key, 0) + tokens
        made = (self.reader.usage(output_tokens=n, model=m) for m, n in per_model.items())
        return tuple(u for u in made if u is not None)


def silent_output(jsonl: str | bytes | None) -> str:
    """What ``copilot -p ... -s`` prints for the run whose JSON output this is: every assistant
    message's content, each followed by a blank line (Copilot CLI 1.0.102)."""
    reader = Reader()
    seen = _Events(reader)
    for event, line in reader.lines(reader.text(jsonl)):
        seen.add(event, line)
    seen.close_deltas()
    return "".join(content + "\n\n" for content, _model, _tokens in seen.messages if content)


# -- the text-mode usage summary ------------------------------------------------------------
_NUMBER = r"(\d[\d,]*(?:\.\d+)?\s*[kKmM]?)"
_ITEM = re.compile(
    _NUMBER + r"\s+(in|input|out|output|cached|cache read|cache write|"
    r"cache written|written|reasoning)\b",
    re.IGNORECASE,
)
_PREMIUM = re.compile(r"(?:Est\.\s*)?" + r"(\d+(?:\.\d+)?)\s+Premium request", re.IGNORECASE)
_CURRENT_REQUESTS = re.compile(r"^\s*Requests\s+(\d+(?:\.\d+)?)\s+Premium", re.IGNORECASE)
_CURRENT_TOKENS = re.compile(
    r"^\s*Tokens\s+↑\s*" + _NUMBER + r"(?:\s*\(([^)]*)\))?"
    r"(?:\s*•\s*↓\s*" + _NUMBER + r"(?:\s*\(([^)]*)\))?)?"
)
_TOTAL_PREMIUM = re.compile(r"^\s*Total usage est:\s*(\d+(?:\.\d+)?)\s+Premium", re.IGNORECASE)
_SECONDS = r"([\d.]+)\s*(ms|s|m|h)"
_API_TIME = re.compile(r"^\s*(?:API time spent|Total duration \(API\)):\s*" + _SECONDS)
_SESSION_TIME = re.compile(r"^\s*(?:Total session time|Total duration \(wall\)):\s*" + _SECONDS)
_MODEL_LINE = re.compile(r"^\s+([A-Za-z0-9][\w.:/-]*)\s+(.*\d.*)$")
_SUMMARY_START = re.compile(
    r"^\s*(Changes|Requests|Tokens|Resume|Total usage est:|API time spent|"
    r"Total session time|Total duration|Total code changes|"
    r"Breakdown by AI model|Usage by model)\b"
)
_SCALE = {"k": 1_000, "m": 1_000_000}
_UNIT_MS = {"ms": 1.0, "s": 1000.0, "m": 60_000.0, "h": 3_600_000.0}


def _number(text: str) -> int:
    """``48.2k`` -> 48200, ``1,234`` -> 1234 (the display is rounded: an approximation)."""
    text = text.replace(",", "").strip()
    scale = _SCALE.get(text[-1].lower(), 1)
    if scale != 1:
        text = text[:-1].strip()
    return int(round(float(text) * scale))


def _figure(text: str) -> tuple[int, bool]:
    """(the number, whether the display rounded it to k/m)."""
    return _number(text), text.strip()[-1:].lower() in _SCALE


def _items(text: str) -> dict[str, tuple[int, bool]]:
    found: dict[str, tuple[int, bool]] = {}
    for number, label in _ITEM.findall(text):
        label = label.lower()
        key = {
            "in": "input",
            "out": "output",
            "cached": "cache read",
            "cache written": "cache write",
            "written": "cache write",
        }.get(label, label)
        found[key] = _figure(number)
    return found


def _usage_of(
    reader: Reader,
    items: dict[str, tuple[int, bool]],
    model: str | None,
    premium: float | None = None,
) -> Usage | None:
    """A record of summary figures; ``estimated`` when any was rounded (``12.0k``), else
    ``parsed_text``."""
    rounded = any(approx for _value, approx in items.values())
    value = {key: number for key, (number, _approx) in items.items()}
    return reader.usage(
        input_tokens=value.get("input"),
        output_tokens=value.get("output"),
        cache_read_tokens=value.get("cache read"),
        cache_write_tokens=value.get("cache write"),
        reasoning_tokens=value.get("reasoning"),
        premium_requests=premium,
        model=model,
        source="estimated" if rounded else "parsed_text",
    )


def parse_summary(text: str | bytes | None) -> AgentRun:
    """The text-mode usage summary alone (every layout); rounded figures marked estimated."""
    reader = Reader()
    return _parse_text("", reader.text(text), reader, None)


class _Summary:
    """The figures of a text-mode usage summary, line by line."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self.usage: list[Usage] = []
        self.premium: float | None = None
        self.api_ms: float | None = None
        self.session_ms: float | None = None
        self.in_models = False

    def line(self, line: str) -> bool:
        """Read one line; True when it belonged to the summary."""
        if m := _CURRENT_REQUESTS.match(line) or _TOTAL_PREMIUM.match(line):
            self.premium = float(m.group(1))
        elif m := _CURRENT_TOKENS.match(line):
            self._tokens(m)
        elif m := _API_TIME.match(line):
            self.api_ms = float(m.group(1)) * _UNIT_MS[m.group(2)]
        elif m := _SESSION_TIME.match(line):
            self.session_ms = float(m.group(1)) * _UNIT_MS[m.group(2)]
        elif re.match(r"^\s*(Breakdown by AI model|Usage by model):", line):
            self.in_models = True
        elif self.in_models and (m := _MODEL_LINE.match(line)):
            items = _items(m.group(2))
            if not items:
                self.in_models = False
                return True
            p = _PREMIUM.search(m.group(2))
            self._add(_usage_of(self.reader, items, m.group(1), float(p.group(1)) if p else None))
        else:
            self.in_models = self.in_models and line.strip() != ""
            return False
        return True

    def _tokens(self, m: re.Match[str]) -> None:
        items = {"input": _figure(m.group(1))}
        items.update({k: v for k, v in _items(m.group(2) or "").items() if k != "input"})
        if m.group(3):
            items["output"] = _figure(m.group(3))
            items.update(
                {k: v for k, v in _items(m.group(4) or "").items() if k not in ("input", "output")}
            )
        self._add(_usage_of(self.reader, items, None))

    def _add(self, usage: Usage | None) -> None:
        if usage is not None:
            self.usage.append(usage)


def _read_summary(summary: _Summary, block: str) -> int | None:
    """Feed a block's lines; the index of its first summary line, or None."""
    first = None
    for index, line in enumerate(block.splitlines()):
        try:
            if summary.line(line) and first is None:
                first = index
        except (ValueError, OverflowError, IndexError):
            summary.reader.errors += 1
    return first


def _parse_text(out: str, err: str, reader: Reader, exit_code: int | None) -> AgentRun:
    summary = _Summary(reader)
    text_lines = out.splitlines()
    if _read_summary(summary, err) is None:
        summary_at = _read_summary(summary, out)
        if summary_at is not None:  # the summary printed into stdout is not the agent's text
            while summary_at > 0 and _SUMMARY_START.match(text_lines[summary_at - 1]):
                summary_at -= 1
            text_lines = text_lines[:summary_at]
    error, error_type = exit_failure(exit_code)
    return AgentRun(
        cli="copilot",
        text="\n".join(text_lines).strip("\n"),
        usage=tuple(summary.usage),
        premium_requests=summary.premium,
        exit_code=exit_code,
        error=error,
        error_type=error_type,
        duration_ms=summary.session_ms,
        api_duration_ms=summary.api_ms,
        output_format="text",
        parse_errors=reader.errors,
        raw=out,
    )


# -- the --usage-output-file JSON -----------------------------------------------------------
def parse_usage_file(data: str | bytes | None) -> AgentRun:
    """The ``--usage-output-file`` JSON: input, cache, output and reasoning tokens per model,
    premium requests (``totalPremiumRequestCost``) and the number of model requests."""
    reader = Reader()
    raw = reader.text(data)
    doc = reader.load(raw)
    if type(doc) is not dict:
        return AgentRun(
            cli="copilot", output_format="usage_file", raw=raw, parse_errors=1 if raw.strip() else 0
        )
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
            # the file says 0 when the API sent no cache-write figure: unknown, not 0
            cache_write_tokens=reader.count(u.get("cacheWriteTokens")) or None,
            reasoning_tokens=reader.count(u.get("reasoningTokens")),
            premium_requests=reader.amount(req.get("cost")),
            model=str(model),
        )
        if part is not None:
            usage.append(part)
    return AgentRun(
        cli="copilot",
        usage=tuple(usage),
        premium_requests=reader.amount(doc.get("totalPremiumRequestCost")),
        model_calls=requests,
        api_duration_ms=reader.amount(doc.get("totalApiDurationMs")),
        output_format="usage_file",
        parse_errors=reader.errors,
        raw=raw,
    )


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
