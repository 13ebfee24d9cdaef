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
from ...endpoints import endpoint, server_of
from ...settings import current
from .anthropic_patches import DEPENDENCIES, install, uninstall
from ..managers import managed
from ..lifecycle import Operation, operation_wrapper, sdk_field
from ..wire.anthropic import MessagesAccumulator, messages_request, messages_response

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


_MESSAGES = Operation(
    "chat",
    _provider,
    _server,
    messages_request,
    messages_response,
    MessagesAccumulator,
    client=_endpoint,
)


# -- one GenAI span per call: the SDK's own span (anthropic >= 2) routed off ---------------
_twins: weakref.WeakKeyDictionary[Any, tuple[tuple[Any, ...], Any, dict[type, Any]]] = (
    weakref.WeakKeyDictionary()
)
_twins_lock = threading.Lock()


def _signature(client: Any) -> tuple[Any, ...]:
    """What a copy of the client inherits and the application may assign to afterwards."""
    return (
        getattr(client, "api_key", None),
        getattr(client, "auth_token", None),
        getattr(client, "base_url", None),
        getattr(client, "max_retries", None),
        getattr(client, "timeout", None),
    )


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
        twin = client.with_options(
            open_telemetry={**options, "traces": {**traces, "enabled": False}}
        )
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
