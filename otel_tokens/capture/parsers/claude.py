"""Claude Code output: ``--output-format json`` (one result object, or with ``--verbose`` an
array of events) and ``stream-json`` (JSONL events).

Totals come from the final ``result`` event: ``modelUsage`` per model (its ``usage`` block
covers the main loop only) and ``total_cost_usd``. Without a result (a truncated stream) the
``assistant`` events are used, de-duplicated by message id (Claude Code repeats one message
per content block, with the same usage), keeping the last copy. ``is_error`` decides failure
whenever present, whatever ``subtype`` says. Claude's ``inputTokens`` excludes the cache;
:class:`Usage` input includes it, so input = inputTokens + cache read + cache write.
"""

from __future__ import annotations

from typing import Any

from ...usage import Usage
from .run import AgentRun, Reader, add, dict_of, sum_usage

__all__ = ["parse"]


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
        events: list[Any] = [doc]
        fmt = "json"
    elif type(doc) is list:
        events = doc
        fmt = "json"
    else:
        events = []
        other: list[str] = []
        for event, line in reader.lines(raw):
            if event is None:
                other.append(line)
            else:
                events.append(event)
        fmt = "stream-json" if events else "text"
        if not events:
            code = exit_code
            return AgentRun(cli="claude", text=raw.strip("\n"), exit_code=code,
                            error=f"exit code {code}" if code not in (None, 0) else None,
                            output_format=fmt, raw=raw)  # fmt: skip

    result: dict[str, Any] | None = None
    messages: dict[str, tuple[str | None, dict[str, Any]]] = {}  # id -> (model, usage)
    blocks: dict[str, list[Any]] = {}  # id -> content blocks, in order
    order: list[str] = []
    tool_ids: set[str] = set()
    tool_blocks = 0
    session_id = init_model = None
    for event in events:
        if type(event) is not dict:
            reader.errors += 1
            continue
        kind = event.get("type")
        if kind == "result":
            result = event
        elif kind == "system" and event.get("subtype") == "init":
            session_id = reader.string(event.get("session_id")) or session_id
            init_model = reader.string(event.get("model")) or init_model
        elif kind == "assistant":
            message = dict_of(event.get("message"))
            msg_id = message.get("id")
            if not isinstance(msg_id, str):
                msg_id = f"#{len(order)}"
            if msg_id not in messages:
                order.append(msg_id)
                blocks[msg_id] = []
            model = message.get("model")
            messages[msg_id] = (model if isinstance(model, str) else None,
                                dict_of(message.get("usage")))  # fmt: skip
            content = message.get("content")
            if isinstance(content, list):
                for block in content:
                    block = dict_of(block)
                    blocks[msg_id].append(block)
                    if block.get("type") == "tool_use":
                        block_id = block.get("id")
                        if isinstance(block_id, str):
                            tool_ids.add(block_id)
                        else:
                            tool_blocks += 1
        if session_id is None and isinstance(event.get("session_id"), str):
            session_id = event["session_id"] or None

    text = ""
    for msg_id in reversed(order):  # the last message that said something
        said = "".join(b.get("text", "") for b in blocks[msg_id]
                       if b.get("type") == "text" and isinstance(b.get("text"), str))  # fmt: skip
        if said.strip():
            text = said
            break
    tools: int | None = len(tool_ids) + tool_blocks if fmt == "stream-json" else None
    model_calls = len(order) if fmt == "stream-json" or order else None
    cost = turns = duration = api_duration = None
    error: str | None = None
    usage: list[Usage] = []
    if result is not None:
        if isinstance(result.get("result"), str):
            text = result["result"]
        session_id = reader.string(result.get("session_id")) or session_id
        cost = reader.amount(result.get("total_cost_usd"))
        turns = reader.count(result.get("num_turns"))
        duration = reader.amount(result.get("duration_ms"))
        api_duration = reader.amount(result.get("duration_api_ms"))
        for model, figures in dict_of(result.get("modelUsage")).items():
            part = _model_usage(reader, str(model), dict_of(figures))
            if part is not None:
                usage.append(part)
        if not usage:
            part = _api_usage(reader, init_model, dict_of(result.get("usage")))
            if part is not None:
                usage.append(part.replace(cost_usd=None))
        is_error = result.get("is_error")
        subtype = result.get("subtype")
        failed = is_error if type(is_error) is bool else subtype not in ("success", None)
        if failed:
            message = result.get("result") if isinstance(result.get("result"), str) else None
            errors = result.get("errors")
            if not message and isinstance(errors, list) and errors:
                message = "; ".join(str(e) for e in errors)
            error = message or (str(subtype) if subtype else "error")
    else:
        per_model: dict[str | None, Usage] = {}
        for msg_id in order:
            model, figures = messages[msg_id]
            part = _api_usage(reader, model or init_model, figures)
            if part is not None:
                key = part.model
                per_model[key] = sum_usage((per_model[key], part)) if key in per_model else part
        usage = list(per_model.values())
        error = "no result event (output truncated)"
    if exit_code not in (None, 0) and error is None:
        error = f"exit code {exit_code}"
    return AgentRun(
        cli="claude", text=text, usage=tuple(usage), cost_usd=cost, exit_code=exit_code,
        error=error, session_id=session_id, tool_calls=tools, model_calls=model_calls,
        turns=turns, duration_ms=duration, api_duration_ms=api_duration, output_format=fmt,
        parse_errors=reader.errors, raw=raw,
    )  # fmt: skip


def _model_usage(reader: Reader, model: str, figures: dict[str, Any]) -> Usage | None:
    """One ``modelUsage`` entry (camelCase, input excluding the cache)."""
    fresh = reader.count(figures.get("inputTokens"))
    read = reader.count(figures.get("cacheReadInputTokens"))
    write = reader.count(figures.get("cacheCreationInputTokens"))
    return reader.usage(
        input_tokens=add(add(fresh, read), write) if fresh is not None else None,
        output_tokens=reader.count(figures.get("outputTokens")),
        cache_read_tokens=read, cache_write_tokens=write,
        cost_usd=reader.amount(figures.get("costUSD")), model=model,
    )  # fmt: skip


def _api_usage(reader: Reader, model: str | None, figures: dict[str, Any]) -> Usage | None:
    """An Anthropic API ``usage`` block (snake_case, input excluding the cache)."""
    fresh = reader.count(figures.get("input_tokens"))
    read = reader.count(figures.get("cache_read_input_tokens"))
    write = reader.count(figures.get("cache_creation_input_tokens"))
    return reader.usage(
        input_tokens=add(add(fresh, read), write) if fresh is not None else None,
        output_tokens=reader.count(figures.get("output_tokens")),
        cache_read_tokens=read, cache_write_tokens=write, model=model,
    )  # fmt: skip
