"""The ``anthropic`` SDK (before 2.0 on httpx, 2.x on httpx2), beta API included.

Patched, sync and async: ``messages.create`` (``stream=True`` too), ``messages.parse``,
``messages.stream()`` (the stream manager, with ``text_stream``, ``get_final_message()``,
``until_done()``), and the same under ``beta.messages``. Legacy text completions
(``completions.create``) are left out; ``messages.count_tokens`` is not billed and not patched.

Usage (the semantic conventions' meaning, see :mod:`otel_tokens.usage`):

* input = ``input_tokens`` + ``cache_read_input_tokens`` + ``cache_creation_input_tokens``,
  with ``cache_read_tokens`` and ``cache_write_tokens`` recorded beside it;
* output = ``output_tokens`` (reasoning inside it: ``output_tokens_details.thinking_tokens``
  when the API reports it);
* streams: ``message_start`` gives the input side, each ``message_delta`` the running
  totals (the last value of each field wins); the output count of ``message_start`` is a
  placeholder and is never taken as the answer.

The bill beyond tokens (:class:`~otel_tokens.usage.Billing`): web searches
(``server_tool_use.web_search_requests``), 1-hour cache writes
(``cache_creation.ephemeral_1h_input_tokens``), batch processing, priority tier and fast
speed. ``usage.iterations`` entries of type ``compaction`` and ``advisor_message`` are billed
on top of the top-level usage (which holds only the ``message``/``fallback_message``
iterations): each becomes a part of the call, priced at its own model (the request's for a
compaction, the advisor's for an advisor sub-inference).

``anthropic`` >= 2 emits its own OpenTelemetry span per call. One call must have one GenAI
span, so an instrumented call runs on a copy of the client made with the SDK's own
``open_telemetry`` option with ``traces.enabled = False`` (see docs/anthropic.md); the
SDK's spans for every other method stay as they are.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Callable


from ... import faults
from ...endpoints import endpoint
from ...request import Request, output_limit
from ...settings import current
from ...usage import Billing, Usage, check_sent_usage, check_token_count
from .anthropic_patches import DEPENDENCIES, install, uninstall
from ..managers import managed
from ..lifecycle import Operation, Response, operation_wrapper, sdk_field, server_of
from ..stream import Accumulator

__all__ = ["DEPENDENCIES", "install", "uninstall", "wrapper"]



# -- reading requests and responses --------------------------------------------------------
_get = sdk_field


def _client(instance: Any) -> Any:
    return getattr(instance, "_client", None)


_PLATFORMS = {"AnthropicBedrock": "aws.bedrock", "AnthropicVertex": "gcp.vertex_ai"}


def _endpoint(instance: Any) -> tuple[str, str | None, int | None]:
    """(provider, server address, port): the platform of a Bedrock or Vertex client, else the
    provider its base URL names (:mod:`otel_tokens.endpoints`: z.ai, DeepSeek, ...)."""
    client = _client(instance)
    url = getattr(client, "base_url", None)
    address, port = server_of(url)
    platform = _PLATFORMS.get(type(client).__name__.removeprefix("Async"))
    if platform is None:
        name = getattr(client, "_gen_ai_provider_name", None)  # anthropic >= 2
        platform = name if isinstance(name, str) and name and name != "anthropic" else None
    found = endpoint(url, address, "anthropic", platform, current().provider_urls)
    return found.provider, address, port


def _provider(instance: Any) -> str:
    return _endpoint(instance)[0]


def _server(instance: Any) -> tuple[str | None, int | None]:
    return server_of(getattr(_client(instance), "base_url", None))


_TOKEN_FIELDS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def _fields(usage: Any) -> dict[str, Any]:
    """What an Anthropic usage block reports (absent or null fields left out): the token
    counts, and what else is billed (web searches, 1-hour cache writes, the service tier and
    speed, the iterations billed apart)."""
    out: dict[str, Any] = {}
    for name in _TOKEN_FIELDS:  # not a token count (a boolean, a string): ValueError, as for every SDK
        value = check_token_count(name, _get(usage, name))
        if value is not None:
            out[name] = value
    thinking = check_token_count("thinking_tokens", _get(_get(usage, "output_tokens_details"), "thinking_tokens"))
    if thinking is not None:
        out["thinking_tokens"] = thinking
    searches = _get(_get(usage, "server_tool_use"), "web_search_requests")
    if searches:
        out["web_searches"] = searches
    hour = _get(_get(usage, "cache_creation"), "ephemeral_1h_input_tokens")
    if hour:
        out["cache_write_1h_tokens"] = hour
        out["cache_write_5m_tokens"] = _get(_get(usage, "cache_creation"), "ephemeral_5m_input_tokens") or 0
    for name in ("service_tier", "speed"):
        value = _get(usage, name)
        if isinstance(value, str):
            out[name] = value
    iterations = _get(usage, "iterations")
    if iterations:
        out["iterations"] = iterations
    return out


def _usage(fields: dict[str, Any], model: str | None, response_id: str | None) -> Usage | None:
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
        input_tokens=inp, output_tokens=output,
        cache_read_tokens=read if inp is not None else None,
        cache_write_tokens=write if inp is not None else None,
        reasoning_tokens=reasoning, model=model, provider=None, response_id=response_id,
    )  # fmt: skip


#: a response's ``usage.service_tier``/``speed`` -> genai-prices' price context
_CONTEXTS = {("service_tier", "batch"): ("processing", "batch"),
             ("service_tier", "priority"): ("service_tier", "priority"),
             ("speed", "fast"): ("speed", "fast")}  # fmt: skip
_BILLED = ("web_searches", "cache_write_1h_tokens", "cache_write_5m_tokens")


def _billing(fields: dict[str, Any]) -> Billing | None:
    """Billed beyond the token classes: web searches, 1-hour cache writes, batch/priority/fast."""
    context = dict(_CONTEXTS[(k, fields[k])] for k in ("service_tier", "speed") if (k, fields.get(k)) in _CONTEXTS)
    units = {k: fields[k] for k in _BILLED if k in fields}
    return Billing.of(context, units) if context or units else None


#: iterations billed on top of the top-level usage (message and fallback iterations are in it)
_APART = ("compaction", "advisor_message")


def _parts(fields: dict[str, Any], usage: Usage | None, model: str | None,
           response_id: str | None) -> tuple[Usage, ...]:  # fmt: skip
    """The response's usage and, after it, each iteration billed apart (compaction at the
    request's model, an advisor's sub-inference at the advisor's model); () when none."""
    extra = []
    for item in fields.get("iterations") or ():
        if _get(item, "type") in _APART:
            part = _usage(_fields(item), _get(item, "model") or model, response_id)
            if part is not None:
                extra.append(part)
    if not extra or usage is None:
        return ()
    return (usage, *extra)


def _messages_request(kwargs: dict[str, Any]) -> Request:
    thinking = _get(kwargs, "thinking")
    structured = _get(kwargs, "output_config") or _get(kwargs, "output_format")  # a JSON schema
    tools = _get(kwargs, "tools") or []
    servers = _get(kwargs, "mcp_servers")  # MCP servers the API calls itself: server-run tools
    if isinstance(servers, list) and isinstance(tools, list):
        tools = tools + [{"type": "mcp_server", **s} for s in servers if isinstance(s, dict)]
    return Request(
        "anthropic_messages", _get(kwargs, "model"), _get(kwargs, "messages") or [],
        system=_get(kwargs, "system"), tools=tools,
        thinking=_get(thinking, "type") == "enabled",
        response_format=structured if isinstance(structured, dict) else None,
        max_output_tokens=output_limit(_get(kwargs, "max_tokens")),
    )  # fmt: skip


def _messages_response(result: Any) -> Response:
    model, rid = _get(result, "model"), _get(result, "id")
    reason = _get(result, "stop_reason")
    usage = _get(result, "usage")
    if usage is None:
        return Response(None, model, rid, (str(reason),) if reason else ())
    fields = _fields(usage)
    parsed = _usage(fields, model, rid)
    return Response(parsed, model, rid, (str(reason),) if reason else (), _billing(fields),
                    _parts(fields, parsed, model, rid))  # fmt: skip


class _MessagesAccumulator(Accumulator):
    """Raw Messages stream events: running usage, model, id, stop reason and output text."""

    def __init__(self, given: dict[str, Any] | None = None, sent: dict[str, Any] | None = None) -> None:
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
            fields = _fields(_get(message, "usage"))
            # the output count here is a placeholder (final only from message_delta on)
            fields.pop("output_tokens", None)
            fields.pop("thinking_tokens", None)
            self._merge(fields)
        elif kind == "message_delta":
            reason = _get(_get(event, "delta"), "stop_reason")
            if reason:
                self.finish_reasons = [str(reason)]
            self._merge(_fields(_get(event, "usage")))
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
        self.usage = _usage(self._fields, self.model, self.response_id)
        self.billing = _billing(self._fields)
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
            usage = (data.get("message") or {}).get("usage") if sse.event == "message_start" else data.get("usage")
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

_MESSAGES = Operation("chat", _provider, _server, _messages_request, _messages_response,
                      _MessagesAccumulator, client=_endpoint)  # fmt: skip


# -- one GenAI span per call: the SDK's own span (anthropic >= 2) routed off ---------------
_twins: weakref.WeakKeyDictionary[Any, tuple[tuple[Any, ...], Any, dict[type, Any]]] = (
    weakref.WeakKeyDictionary()
)
_twins_lock = threading.Lock()


def _signature(client: Any) -> tuple[Any, ...]:
    """What a copy of the client inherits and the application may assign to afterwards."""
    return (
        getattr(client, "api_key", None), getattr(client, "auth_token", None),
        getattr(client, "base_url", None), getattr(client, "max_retries", None),
        getattr(client, "timeout", None),
    )  # fmt: skip


def _untraced(instance: Any) -> Any:
    """``instance`` (a messages resource) on a client whose own call spans are off.

    The resource itself when the SDK has no native tracing (before 2.0) or its client has it
    off already; else the same resource class on a copy of the client made with the SDK's
    ``with_options(open_telemetry=...)``, tracing disabled, everything else kept. The copy
    is cached per client and remade when the application reassigns a copied setting.
    """
    client = _client(instance)
    options = getattr(client, "open_telemetry", None)
    if not isinstance(options, dict):
        return instance  # anthropic < 2: no span of its own
    traces = options.get("traces") or {}
    if not traces.get("enabled", True):
        return instance
    signature = _signature(client)
    entry = _twins.get(client)
    if entry is None or entry[0] != signature:
        twin = client.with_options(open_telemetry={**options, "traces": {**traces, "enabled": False}})
        entry = (signature, twin, {})
        with _twins_lock:
            _twins[client] = entry
    resources = entry[2]
    resource = resources.get(type(instance))
    if resource is None:
        resource = resources[type(instance)] = type(instance)(entry[1])
    return resource


def _target(wrapped: Callable[..., Any], instance: Any) -> Callable[..., Any]:
    """The original method, bound to the untraced twin of ``instance`` when there is one."""
    try:
        resource = _untraced(instance)
    except Exception as exc:
        faults.report("internal", exc)
        return wrapped
    if resource is instance:
        return wrapped
    # another instrumentation's wrapper under ours (wrapt) is bound to the twin too, so that
    # it still runs; else the plain function
    inner = getattr(wrapped, "_self_parent", None)
    if inner is not None and hasattr(inner, "__get__"):
        return inner.__get__(resource, type(resource))
    func = getattr(wrapped, "__func__", None)
    return wrapped if func is None else func.__get__(resource, type(resource))


def _call_wrapper(is_async: bool) -> Callable[..., Any]:
    inner = operation_wrapper(_MESSAGES, is_async)

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        return inner(_target(wrapped, instance), instance, args, kwargs)

    return wrapper


# -- messages.stream(): the manager's deferred request, observed -----------------------------
def _stream_wrapper(is_async: bool) -> Callable[..., Any]:
    inner = operation_wrapper(_MESSAGES, is_async)

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        manager = _target(wrapped, instance)(*args, **kwargs)
        return managed(manager, inner, instance, {**kwargs, "stream": True}, is_async)

    return wrapper


_WRAPPERS = {"call": _call_wrapper, "stream": _stream_wrapper}


def wrapper(name: str, is_async: bool) -> Callable[..., Any]:
    """The wrapt wrapper of one patched method (:mod:`.anthropic_patches` installs it)."""
    return _WRAPPERS[name](is_async)
