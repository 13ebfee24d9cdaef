"""The ``openai`` SDK (1.x, 2.x on httpx; 3.x on httpx2), Azure OpenAI clients included.

Patched, sync and async, every billed endpoint: ``chat.completions.create``/``.parse``,
``responses.create``/``.parse``/``.compact``/``.retrieve`` (a ``background=True`` response's
usage arrives only when it is retrieved: each response id counts once, however often it is
polled), legacy ``completions.create``, ``embeddings.create``,
``audio.transcriptions``/``translations.create`` (tokens, or seconds of audio), and the
Assistants ``beta.threads.runs`` (``create``, ``retrieve``, ``submit_tool_outputs``, the
``stream()`` helpers; a run's usage counts once, when it ends). Token-count endpoints
(``responses.input_tokens.count``) are not billed and not patched. ``responses.stream()``,
``chat.completions.stream()``, the ``*_and_poll`` helpers, ``with_raw_response`` and
``with_streaming_response`` go through the patched methods (raw responses: see
:mod:`..raw`).

Usage: ``prompt_tokens`` (input, cache reads included as ``prompt_tokens_details.cached_tokens``),
``completion_tokens`` (output, reasoning included as ``completion_tokens_details.reasoning_tokens``);
the Responses API's ``input_tokens``, ``output_tokens`` and their details alike. The bill
beyond tokens (:class:`~otel_tokens.usage.Billing`): the response's ``service_tier`` (flex,
priority), audio tokens, web searches (``tool_usage.web_search``, else the searching
``web_search_call`` items) and file searches (``file_search_call`` items).

``OTEL_TOKENS_OPENAI_INCLUDE_USAGE=true`` asks streamed chat completions for usage
(``stream_options.include_usage``) when the caller did not, and hides the extra usage-only
chunk from the caller, so code that reads ``chunk.choices[0]`` keeps working.
"""

from __future__ import annotations

from typing import Any

from ...endpoints import endpoint, server_of
from ...settings import current
from ...handler import get_handler
from .openai_patches import DEPENDENCIES, install, uninstall
from ..lifecycle import (
    Operation,
    Response,
    operation_wrapper,
    sdk_field,
)
from ..wire.openai import (
    ChatAccumulator,
    CompletionsAccumulator,
    ResponsesAccumulator,
    RetrievedAccumulator,
    RunAccumulator,
    TranscriptionAccumulator,
    chat_request,
    chat_response,
    completions_request,
    completions_response,
    embeddings_request,
    embeddings_response,
    responses_request,
    responses_response,
    run_response,
    transcription_response,
)
from ..managers import managed
from ..sent import expect_cost, note_header_cost, take_cost

__all__ = ["DEPENDENCIES", "install", "uninstall", "wrapper"]


# -- reading requests and responses --------------------------------------------------------
_get = sdk_field


_AZURE = ("AzureOpenAI", "AsyncAzureOpenAI")


def _client(instance: Any) -> tuple[str, str | None, int | None]:
    """(provider, server address, port) of a resource's client, in one step: the provider
    named by the client's endpoint (:mod:`otel_tokens.endpoints`), Azure by its client, kept
    per URL object (a client keeps its own; one set anew is a new object), client class and
    settings' overrides; the address and port from :func:`~otel_tokens.endpoints.server_of`."""
    client = getattr(instance, "_client", None)
    # the URL the ``base_url`` property returns (openai 3's imports a module per read)
    url = getattr(client, "_base_url", None) or getattr(client, "base_url", None)
    address, port = server_of(url)
    overrides = current().provider_urls
    hit = _clients.get(id(url))
    if hit is None or hit[0] is not url or hit[1] is not type(client) or hit[2] is not overrides:
        platform = "azure.ai.openai" if type(client).__name__ in _AZURE else None
        found = endpoint(url, address, "openai", platform, overrides)
        if len(_clients) >= 256:  # clients come and go: keep it small
            _clients.clear()
        # holding the URL keeps its id from being reused; a provider's own API (its URL
        # pattern matched) adds no gateway's cost header: none is read (see sent.expect_cost)
        hit = _clients[id(url)] = (
            url,
            type(client),
            overrides,
            found.provider,
            found.price_id is None,
        )
    expect_cost(gateway=hit[4])  # a cost noted for an earlier response is not this call's
    return hit[3], address, port


_clients: dict[int, tuple[Any, type, Any, str, bool]] = {}


def _provider(instance: Any) -> str:
    return _client(instance)[0]


def _costed(read: Any) -> Any:
    """``read``, with the gateway's reported cost (when its response had one) on the usage:
    a reported bill wins over a computed price."""

    def with_cost(result: Any) -> Response:
        answer = read(result)
        cost = take_cost()
        if cost is None or answer.usage is None:
            return answer
        return answer._replace(usage=answer.usage.replace(cost_usd=cost))

    return with_cost


def _server(instance: Any) -> tuple[str | None, int | None]:
    return server_of(getattr(getattr(instance, "_client", None), "base_url", None))


def _with_stream_usage(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Ask for usage in the stream when opted in and the caller did not."""
    if kwargs.get("stream") is not True or not get_handler().settings.openai_include_usage:
        return kwargs
    options = _get(kwargs, "stream_options") or {}
    if not isinstance(options, dict) or "include_usage" in options:
        return kwargs
    return {**kwargs, "stream_options": {**options, "include_usage": True}}


def _conversation(kwargs: dict[str, Any]) -> str | None:
    """A Responses request's ``conversation`` (an id, or ``{"id": ...}``)."""
    value = _get(kwargs, "conversation")
    value = _get(value, "id") if value is not None and not isinstance(value, str) else value
    return value if isinstance(value, str) and value else None


def _run_request(kwargs: dict[str, Any]) -> None:
    return None  # the thread's messages live on the server: no estimate


#: every openai operation's: its client read in one step, a raw response's cost header read
_OPENAI: dict[str, Any] = {"client": _client, "raw_headers": note_header_cost}
_CHAT = Operation(
    "chat",
    _provider,
    _server,
    chat_request,
    _costed(chat_response),
    ChatAccumulator,
    prepare=_with_stream_usage,
    **_OPENAI,
)
_RESPONSES = Operation(
    "chat",
    _provider,
    _server,
    responses_request,
    _costed(responses_response),
    ResponsesAccumulator,
    once="openai.responses",
    conversation=_conversation,
    **_OPENAI,
)
_RETRIEVE = Operation(
    "chat",
    _provider,
    _server,
    _run_request,
    responses_response,
    RetrievedAccumulator,
    once="openai.responses",
    **_OPENAI,
)
_EMBEDDINGS = Operation(
    "embeddings", _provider, _server, embeddings_request, _costed(embeddings_response), **_OPENAI
)
_COMPLETIONS = Operation(
    "text_completion",
    _provider,
    _server,
    completions_request,
    _costed(completions_response),
    CompletionsAccumulator,
    prepare=_with_stream_usage,
    **_OPENAI,
)
_TRANSCRIPTIONS = Operation(
    "transcription",
    _provider,
    _server,
    _run_request,
    transcription_response,
    TranscriptionAccumulator,
    **_OPENAI,
)
_RUNS = Operation(
    "invoke_agent",
    _provider,
    _server,
    _run_request,
    run_response,
    RunAccumulator,
    once="openai.runs",
    **_OPENAI,
)

_OPERATIONS = {
    "chat": _CHAT,
    "responses": _RESPONSES,
    "retrieve": _RETRIEVE,
    "embeddings": _EMBEDDINGS,
    "completions": _COMPLETIONS,
    "transcriptions": _TRANSCRIPTIONS,
    "runs": _RUNS,
}


def _runs_stream_wrapper(is_async: bool) -> Any:
    """``runs.stream()``, ``create_and_stream()``, ``submit_tool_outputs_stream()``: managers
    whose deferred request is observed as a streamed run."""
    inner = operation_wrapper(_RUNS, is_async)

    def run_stream(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        return managed(
            wrapped(*args, **kwargs), inner, instance, {**kwargs, "stream": True}, is_async
        )

    return run_stream


def wrapper(name: str, is_async: bool) -> Any:
    """The wrapt wrapper of one operation (:mod:`.openai_patches` installs it)."""
    if name == "runs_stream":
        return _runs_stream_wrapper(is_async)
    return operation_wrapper(_OPERATIONS[name], is_async)
