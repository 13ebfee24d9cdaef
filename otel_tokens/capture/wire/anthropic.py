"""Anthropic's Messages API: its readers (requests, responses, stream events) and its wire
form (``POST /v1/messages``, whole or streamed as named server-sent events: ``message_start``,
``content_block_delta``, ``message_delta``, ...). Shared by the ``anthropic`` SDK capture
(:mod:`..sdk.anthropic`), Bedrock's Claude models, Message Batches results and the HTTP layer:
cache classes, thinking, web searches, 1-hour cache writes and the iterations billed apart."""

from __future__ import annotations

from typing import Any

from ... import faults
from ...request import Request, output_limit
from ...usage import Billing, Usage, check_sent_usage, check_token_count
from ..lifecycle import Response, sdk_field
from ..stream import Accumulator
from .base import Wire

__all__ = [
    "SUFFIXES",
    "MessagesAccumulator",
    "fields_billing",
    "fields_usage",
    "messages_request",
    "messages_response",
    "recognise",
    "usage_fields",
]

_get = sdk_field


_TOKEN_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


def usage_fields(usage: Any) -> dict[str, Any]:
    """What an Anthropic usage block reports (absent or null fields left out): the token
    counts, and what else is billed (web searches, 1-hour cache writes, the service tier and
    speed, the iterations billed apart)."""
    out: dict[str, Any] = {}
    for (
        name
    ) in _TOKEN_FIELDS:  # not a token count (a boolean, a string): ValueError, as for every SDK
        value = check_token_count(name, _get(usage, name))
        if value is not None:
            out[name] = value
    thinking = check_token_count(
        "thinking_tokens", _get(_get(usage, "output_tokens_details"), "thinking_tokens")
    )
    if thinking is not None:
        out["thinking_tokens"] = thinking
    searches = _get(_get(usage, "server_tool_use"), "web_search_requests")
    if searches:
        out["web_searches"] = searches
    hour = _get(_get(usage, "cache_creation"), "ephemeral_1h_input_tokens")
    if hour:
        out["cache_write_1h_tokens"] = hour
        out["cache_write_5m_tokens"] = (
            _get(_get(usage, "cache_creation"), "ephemeral_5m_input_tokens") or 0
        )
    for name in ("service_tier", "speed"):
        value = _get(usage, name)
        if isinstance(value, str):
            out[name] = value
    iterations = _get(usage, "iterations")
    if iterations:
        out["iterations"] = iterations
    return out


def fields_usage(
    fields: dict[str, Any], model: str | None, response_id: str | None
) -> Usage | None:
    """A Usage from Anthropic's fields: input reported inclusive of both cache classes."""
    fresh = fields.get("input_tokens")
    output = fields.get("output_tokens")
    if fresh is None and output is None and "cache_read_input_tokens" not in fields:
        return None
    read = fields.get("cache_read_input_tokens")
    write = fields.get("cache_creation_input_tokens")
    inp = None if fresh is None else fresh + (read or 0) + (write or 0)
    reasoning = fields.get("thinking_tokens")
    if reasoning is not None and (output is None or reasoning > output):
        reasoning = None
    return Usage(
        input_tokens=inp,
        output_tokens=output,
        cache_read_tokens=read if inp is not None else None,
        cache_write_tokens=write if inp is not None else None,
        reasoning_tokens=reasoning,
        model=model,
        provider=None,
        response_id=response_id,
    )


#: a response's ``usage.service_tier``/``speed`` -> genai-prices' price context
_CONTEXTS = {
    ("service_tier", "batch"): ("processing", "batch"),
    ("service_tier", "priority"): ("service_tier", "priority"),
    ("speed", "fast"): ("speed", "fast"),
}
_BILLED = ("web_searches", "cache_write_1h_tokens", "cache_write_5m_tokens")


def fields_billing(fields: dict[str, Any]) -> Billing | None:
    """Billed beyond the token classes: web searches, 1-hour cache writes, batch/priority/fast."""
    context = dict(
        _CONTEXTS[(k, fields[k])]
        for k in ("service_tier", "speed")
        if (k, fields.get(k)) in _CONTEXTS
    )
    units = {k: fields[k] for k in _BILLED if k in fields}
    return Billing.of(context, units) if context or units else None


#: iterations billed on top of the top-level usage (message and fallback iterations are in it)
_APART = ("compaction", "advisor_message")


def _parts(
    fields: dict[str, Any], usage: Usage | None, model: str | None, response_id: str | None
) -> tuple[Usage, ...]:
    """The response's usage and, after it, each iteration billed apart (compaction at the
    request's model, an advisor's sub-inference at the advisor's model); () when none."""
    extra = []
    for item in fields.get("iterations") or ():
        if _get(item, "type") in _APART:
            part = fields_usage(usage_fields(item), _get(item, "model") or model, response_id)
            if part is not None:
                extra.append(part)
    if not extra or usage is None:
        return ()
    return (usage, *extra)


def messages_request(kwargs: dict[str, Any]) -> Request:
    thinking = _get(kwargs, "thinking")
    structured = _get(kwargs, "output_config") or _get(kwargs, "output_format")  # a JSON schema
    tools = _get(kwargs, "tools") or []
    servers = _get(kwargs, "mcp_servers")  # MCP servers the API calls itself: server-run tools
    if isinstance(servers, list) and isinstance(tools, list):
        tools = tools + [{"type": "mcp_server", **s} for s in servers if isinstance(s, dict)]
    return Request(
        "anthropic_messages",
        _get(kwargs, "model"),
        _get(kwargs, "messages") or [],
        system=_get(kwargs, "system"),
        tools=tools,
        thinking=_get(thinking, "type") == "enabled",
        response_format=structured if isinstance(structured, dict) else None,
        max_output_tokens=output_limit(_get(kwargs, "max_tokens")),
        tool_choice=_get(kwargs, "tool_choice"),
    )


def messages_response(result: Any) -> Response:
    model, rid = _get(result, "model"), _get(result, "id")
    reason = _get(result, "stop_reason")
    usage = _get(result, "usage")
    if usage is None:
        return Response(None, model, rid, (str(reason),) if reason else ())
    fields = usage_fields(usage)
    parsed = fields_usage(fields, model, rid)
    return Response(
        parsed,
        model,
        rid,
        (str(reason),) if reason else (),
        fields_billing(fields),
        _parts(fields, parsed, model, rid),
    )


class MessagesAccumulator(Accumulator):
    """Raw Messages stream events: running usage, model, id, stop reason and output text."""

    def __init__(
        self, given: dict[str, Any] | None = None, sent: dict[str, Any] | None = None
    ) -> None:
        super().__init__()
        self._fields: dict[str, Any] = {}

    def add(self, event: Any) -> bool:
        kind = _get(event, "type")
        if kind == "content_block_delta":
            delta = _get(event, "delta")
            text = _get(delta, "text") or _get(delta, "thinking") or _get(delta, "partial_json")
            if text and isinstance(text, str):
                self.text.append(text)
        elif kind == "message_start":
            message = _get(event, "message")
            self.model = _get(message, "model") or self.model
            self.response_id = _get(message, "id") or self.response_id
            fields = usage_fields(_get(message, "usage"))
            # the output count here is a placeholder (final only from message_delta on)
            fields.pop("output_tokens", None)
            fields.pop("thinking_tokens", None)
            self._merge(fields)
        elif kind == "message_delta":
            reason = _get(_get(event, "delta"), "stop_reason")
            if reason:
                self.finish_reasons = [str(reason)]
            self._merge(usage_fields(_get(event, "usage")))
        return True

    def watch(self, stream: Any) -> None:
        """Check the raw usage of the stream's events before the SDK validates them (it turns
        ``true`` into 1 and ``"10"`` into 10 there, unlike in a whole message): one rule for
        token counts on every path."""
        decoder = getattr(stream, "_decoder", None)
        if decoder is not None and hasattr(decoder, "iter_bytes"):
            stream._decoder = _RawUsageCheck(decoder, self)

    def _merge(self, fields: dict[str, Any]) -> None:
        if not fields:
            return
        self._fields.update(fields)  # running totals: the last value of each field wins
        self.usage = fields_usage(self._fields, self.model, self.response_id)
        self.billing = fields_billing(self._fields)
        self.parts = _parts(self._fields, self.usage, self.model, self.response_id)


class _RawUsageCheck:
    """The SDK's SSE decoder, passing every event on; the usage of ``message_start`` and
    ``message_delta`` is checked as sent (a count that is not an integer marks the stream's
    usage unusable)."""

    __slots__ = ("_decoder", "_acc")

    def __init__(self, decoder: Any, acc: Accumulator) -> None:
        self._decoder, self._acc = decoder, acc

    def iter_bytes(self, chunks: Any) -> Any:
        for sse in self._decoder.iter_bytes(chunks):
            if sse.event in _USAGE_EVENTS:
                self._check(sse)
            yield sse

    async def aiter_bytes(self, chunks: Any) -> Any:
        async for sse in self._decoder.aiter_bytes(chunks):
            if sse.event in _USAGE_EVENTS:
                self._check(sse)
            yield sse

    def _check(self, sse: Any) -> None:
        try:
            data = sse.json()
            usage = (
                (data.get("message") or {}).get("usage")
                if sse.event == "message_start"
                else data.get("usage")
            )
            check_sent_usage(usage)  # raises: a count in it is not a token count
        except ValueError as exc:
            if not self._acc.invalid:
                faults.report("usage_invalid", exc)
            self._acc.invalid = True
        except Exception as exc:  # the SDK reports what it cannot parse itself
            faults.report("parse", exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._decoder, name)


_USAGE_EVENTS = frozenset(("message_start", "message_delta"))


# -- HTTP: a POST recognised by its path ----------------------------------------------------
def _request(body: dict[str, Any], model: str | None) -> Request:
    return messages_request(body)


_MESSAGES = Wire("chat", _request, messages_response, lambda body: MessagesAccumulator())
SUFFIXES = ("/v1/messages",)


def recognise(path: str) -> Wire | None:
    """The Messages request a POST to ``path`` is, or None (``/v1/messages/batches`` and
    ``count_tokens`` are not a model's answer)."""
    return _MESSAGES if path.endswith(SUFFIXES) else None
