"""Google Gemini CLI output: ``--output-format json`` (one object) and ``stream-json`` (JSONL).
Verified against Gemini CLI 0.61.0.

JSON: ``stats.models[model].tokens`` per model (the router model and the main model apart;
``roles`` repeat the model totals and are not added again): input = ``prompt`` (which includes
``cached``) + ``tool`` (tool-use prompt tokens, billed as input on top of ``prompt``); output =
``candidates`` + ``thoughts`` (reasoning, inside output). stream-json: the final ``result``
event's ``stats.models`` carry ``total_tokens``, ``input_tokens`` and ``output_tokens`` (the
candidates) but no thoughts or tool figure; so that no billed token vanishes, output = total -
input and reasoning = total - input - candidates. The default model's alias ``auto`` is never
recorded as a model.

Failures: an API error exits with the HTTP status mod 256 (400 -> 144): in JSON mode stdout is
empty and the JSON error object (``{"error": {"type", "message", "code"}}``) ends stderr after
stack traces; in stream-json a ``result`` event with ``status: "error"``. An untrusted workspace
exits 55 with a plain-text message on stderr. Each is a failed run; tokens billed before the
failure (the ``stats`` of the error's result) are kept.
"""

from __future__ import annotations

from typing import Any

from ....usage import Usage
from .run import AgentRun, Reader, add, dict_of, exit_failure, http_status

__all__ = ["parse"]

UNTRUSTED_WORKSPACE = 55  # FatalUntrustedWorkspaceError's exit code
AUTO = "auto"  # the default model's alias: not a model


def parse(
    stdout: str | bytes | None,
    *,
    stderr: str | bytes | None = None,
    exit_code: int | None = None,
) -> AgentRun:
    """Read one Gemini CLI run from its ``json`` or ``stream-json`` stdout (and stderr)."""
    reader = Reader()
    raw = reader.text(stdout)
    doc = reader.load(raw)
    if type(doc) is dict and doc.get("type") is None:
        run = _from_json(doc, reader)
    elif raw.strip():
        run = _from_stream(raw, reader)
    else:
        run = _from_stderr(reader.text(stderr), reader)
    if run.error is None:
        message, kind = exit_failure(exit_code)
        run = run.replace(error=message, error_type=kind)
    if run.error is not None:  # tokens billed before the failure (in its stats) are kept
        run = run.replace(error_type=_failure_type(run.error_type, exit_code))
    return run.replace(exit_code=exit_code, parse_errors=reader.errors, raw=raw)


def _failure_type(found: str | None, exit_code: int | None) -> str:
    """The HTTP status when the error or the exit code (status mod 256) gives it."""
    if found not in (None, "exit_code", "agent_error"):
        return found  # type: ignore[return-value]
    if exit_code == UNTRUSTED_WORKSPACE:
        return "untrusted_workspace"
    if exit_code is not None and 144 <= exit_code <= 255:  # 400..511, mod 256
        return http_status(exit_code + 256) or "exit_code"
    if found is None and exit_code not in (None, 0):
        return "exit_code"
    return found or "agent_error"


def _error(value: Any) -> tuple[str | None, str | None]:
    """(message, error type) of a JSON ``error`` object."""
    if value is None:
        return None, None
    if isinstance(value, dict):
        message = value.get("message")
        return (
            message if isinstance(message, str) and message else "error",
            http_status(value.get("code")) or "agent_error",
        )
    return str(value) or "error", "agent_error"


def _from_stderr(text: str, reader: Reader) -> AgentRun:
    """A run that printed nothing on stdout: the JSON error object that ends stderr, if any."""
    start = text.rfind("\n{")
    doc = reader.load(text[start + 1 :] if start >= 0 else text)
    message, kind = _error(dict_of(doc).get("error")) if type(doc) is dict else (None, None)
    if message is None and text.strip():
        message = text.strip().splitlines()[-1]
    return AgentRun(
        cli="gemini",
        error=message,
        error_type=kind,
        output_format="json",
        session_id=reader.string(dict_of(doc).get("session_id")),
    )


def _from_json(doc: dict[str, Any], reader: Reader) -> AgentRun:
    stats = dict_of(doc.get("stats"))
    usage: list[Usage] = []
    requests: int | None = None
    latency: float | None = None
    for model, entry in dict_of(stats.get("models")).items():
        entry = dict_of(entry)
        api = dict_of(entry.get("api"))
        requests = add(requests, reader.count(api.get("totalRequests")))
        latency = add(latency, reader.amount(api.get("totalLatencyMs")))
        part = _json_usage(reader, dict_of(entry.get("tokens")), str(model))
        if part is not None:
            usage.append(part)
    error, error_type = _error(doc.get("error"))
    text = doc.get("response")
    return AgentRun(
        cli="gemini",
        text=text if isinstance(text, str) else "",
        usage=tuple(usage),
        error=error,
        error_type=error_type,
        session_id=reader.string(doc.get("session_id")),
        tool_calls=reader.count(dict_of(stats.get("tools")).get("totalCalls")),
        model_calls=requests,
        api_duration_ms=latency,
        output_format="json",
    )


def _json_usage(reader: Reader, tokens: dict[str, Any], model: str) -> Usage | None:
    cached = reader.count(tokens.get("cached"))
    prompt = reader.count(tokens.get("prompt"))
    if prompt is None:
        fresh = reader.count(tokens.get("input"))
        prompt = add(fresh, cached) if fresh is not None else None
    thoughts = reader.count(tokens.get("thoughts"))
    return reader.usage(
        input_tokens=add(prompt, reader.count(tokens.get("tool"))) if prompt is not None else None,
        cache_read_tokens=cached,
        reasoning_tokens=thoughts,
        output_tokens=add(reader.count(tokens.get("candidates")), thoughts),
        model=None if model == AUTO else model,
    )


def _stream_usage(reader: Reader, stats: dict[str, Any], model: str | None) -> Usage | None:
    """One model's stream-json figures: every billed token kept (output = total - input)."""
    total = reader.count(stats.get("total_tokens"))
    prompt = reader.count(stats.get("input_tokens"))
    cached = reader.count(stats.get("cached"))
    if prompt is None:
        fresh = reader.count(stats.get("input"))
        prompt = add(fresh, cached) if fresh is not None else None
    candidates = reader.count(stats.get("output_tokens"))
    output, reasoning = candidates, None
    if total is not None and prompt is not None and candidates is not None:
        if total >= prompt + candidates:
            output, reasoning = total - prompt, total - prompt - candidates
        else:
            reader.errors += 1
    return reader.usage(
        input_tokens=prompt,
        cache_read_tokens=cached,
        output_tokens=output,
        reasoning_tokens=reasoning,
        model=None if model == AUTO else model,
    )


def _from_stream(raw: str, reader: Reader) -> AgentRun:
    seen = _Stream(reader)
    for event, line in reader.lines(raw):
        seen.add(event, line)
    if not seen.count:
        return AgentRun(cli="gemini", text=raw.strip("\n"), output_format="text")
    usage: list[Usage] = []
    tools: int | None = seen.tool_calls()
    duration = None
    error, error_type = seen.error, None
    result = seen.result
    if result is not None:
        stats = dict_of(result.get("stats"))
        for name, figures in dict_of(stats.get("models")).items():
            part = _stream_usage(reader, dict_of(figures), str(name))
            if part is not None:
                usage.append(part)
        if not usage and (part := _stream_usage(reader, stats, seen.model)) is not None:
            usage.append(part)
        tools = reader.count(stats.get("tool_calls")) if "tool_calls" in stats else tools
        duration = reader.amount(stats.get("duration_ms"))
        if result.get("status") not in ("success", None) and error is None:
            error, error_type = _error(result.get("error"))
            error = error or str(result.get("status"))
    elif error is None:
        error, error_type = "no result event (output cut)", "truncated_output"
    return AgentRun(
        cli="gemini",
        text=seen.text(),
        usage=tuple(usage),
        error=error,
        error_type=error_type,
        session_id=seen.session_id,
        tool_calls=tools,
        duration_ms=duration,
        output_format="stream-json",
        notices=tuple(seen.notices),
    )


class _Stream:
    """What the events of one stream-json run say."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self.count = self.anonymous_tools = 0
        self.segments: list[list[str]] = [[]]
        self.other: list[str] = []
        self.result: dict[str, Any] | None = None
        self.session_id: str | None = None
        self.model: str | None = None
        self.tool_ids: set[str] = set()
        self.error: str | None = None
        self.notices: list[str] = []

    def add(self, event: dict[str, Any] | None, line: str) -> None:
        if event is None:
            self.other.append(line)
            return
        self.count += 1
        kind = event.get("type")
        if kind == "init":
            self.session_id = self.reader.string(event.get("session_id")) or self.session_id
            self.model = self.reader.string(event.get("model")) or self.model
        elif kind == "message" and event.get("role") == "assistant":
            content = event.get("content")
            if isinstance(content, str):
                if event.get("delta") is True:
                    self.segments[-1].append(content)
                else:
                    self.segments.append([content])
        elif kind == "tool_use":
            if isinstance(event.get("tool_id"), str):
                self.tool_ids.add(event["tool_id"])
            else:
                self.anonymous_tools += 1
            if self.segments[-1]:
                self.segments.append([])
        elif kind == "error":
            message = event.get("message")
            message = message if isinstance(message, str) and message else "error"
            if event.get("severity") == "error":
                self.error = message
            else:
                self.notices.append(message)
        elif kind == "result":
            self.result = event

    def tool_calls(self) -> int:
        return len(self.tool_ids) + self.anonymous_tools

    def text(self) -> str:
        said = [s for s in self.segments if "".join(s).strip()]
        return "".join(said[-1]) if said else "\n".join(self.other)
