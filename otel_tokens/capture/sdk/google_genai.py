"""The ``google-genai`` SDK: Gemini API and Vertex AI, sync (``client.models``) and async
(``client.aio.models``), whole responses and streams; one call per billed request.

Usage from ``usage_metadata`` (what genai-prices' own Google extractor reads, and the
semantic conventions' meaning, see :mod:`otel_tokens.usage`):

* input = ``prompt_token_count`` (cached content included) + ``tool_use_prompt_token_count``;
  cache read = ``cached_content_token_count``;
* output = ``candidates_token_count`` + ``thoughts_token_count``, reasoning =
  ``thoughts_token_count`` (inside output);
* the API leaves zero counts out of its JSON (proto3): with ``usage_metadata`` present, an
  absent prompt or candidates count is 0; cache and reasoning are recorded when reported;
* streams: every chunk carries the running totals, the last one wins;
* audio tokens (``*_tokens_details`` with modality ``AUDIO``) are billed units
  (:class:`~otel_tokens.usage.Billing`), priced at the model's audio rates.

The response model is ``model_version``; ``gen_ai.provider.name`` is ``gcp.vertex_ai`` for a
Vertex AI client, else ``gcp.gemini``.

``embed_content`` (each request it sends: ``_embed_content``): the input tokens of
``usage_metadata`` where the answer has one, else the sum of each embedding's
``statistics.token_count`` (Vertex AI), and Vertex's ``metadata.billable_character_count`` as
a billed unit (``input_characters``). The Gemini API's ``batchEmbedContents`` answers with
no usage: the call is recorded with its usage unknown (``usage_missing``), never 0.
"""

from __future__ import annotations

from typing import Any, Callable

from ...endpoints import server_of
from ..lifecycle import Operation, operation_wrapper, sdk_field
from ..wire.gemini import (
    GenerateAccumulator,
    contents_request,
    embed_content_request,
    embed_content_response,
    error_status,
    generate_response,
)

__all__ = ["wrapper"]

_get = sdk_field


# -- the client ---------------------------------------------------------------------------
def _provider(instance: Any) -> str:
    return (
        "gcp.vertex_ai"
        if getattr(getattr(instance, "_api_client", None), "vertexai", False)
        else "gcp.gemini"
    )


def _server(instance: Any) -> tuple[str | None, int | None]:
    """(address, port) of the client's base URL."""
    options = getattr(getattr(instance, "_api_client", None), "_http_options", None)
    url = getattr(options, "base_url", None)
    return server_of(url) if isinstance(url, str) else (None, None)


def _always(_kwargs: dict[str, Any]) -> bool:
    return True


_OPERATIONS = {
    "generate": Operation(
        "chat", _provider, _server, contents_request, generate_response, failure=error_status
    ),
    "generate_stream": Operation(
        "chat",
        _provider,
        _server,
        contents_request,
        generate_response,
        GenerateAccumulator,
        is_stream=_always,
        failure=error_status,
    ),
    "embed": Operation(
        "embeddings",
        _provider,
        _server,
        embed_content_request,
        embed_content_response,
        failure=error_status,
    ),
}


def wrapper(name: str, is_async: bool) -> Callable[..., Any]:
    """The wrapt wrapper of one patched method (:mod:`.google_genai_patches` installs it)."""
    return operation_wrapper(_OPERATIONS[name], is_async)
