"""Google's Gemini API on the wire (Vertex AI's ``publishers/google/models`` paths too):
``models/{model}:generateContent``, ``:streamGenerateContent`` (server-sent events with
``alt=sse``, else one JSON array) and ``:embedContent``. The JSON is camelCase
(``usageMetadata.promptTokenCount``); its keys are read in the ``google-genai`` SDK's
spelling and the SDK capture's readers (:mod:`..sdk.google_genai`) do the rest: thoughts,
cached content, tool-use prompts and audio tokens."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from ...request import Request, output_limit
from ...usage import Usage
from ..sdk.google_genai import _Accumulator, _response
from ..lifecycle import Response
from .base import Wire, embed_request

__all__ = ["SUFFIXES", "recognise"]

SUFFIXES: tuple[str, ...] = ()  # recognised by the ``:method`` ending of the path instead


@lru_cache(maxsize=512)
def _snake_key(key: str) -> str:
    """``promptTokenCount`` -> ``prompt_token_count``."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", key).lower()


def snake(value: Any) -> Any:
    """Decoded JSON with every key in snake_case, as google-genai's objects name them."""
    if type(value) is dict:
        return {_snake_key(k) if isinstance(k, str) else k: snake(v) for k, v in value.items()}
    if type(value) is list:
        return [snake(item) for item in value]
    return value


def _model(path: str, body: dict[str, Any]) -> str | None:
    """The model the path names (``.../models/gemini-2.5-flash:generateContent``)."""
    name = path.rpartition("/models/")[2].partition(":")[0]
    return name or None


def _request(body: dict[str, Any], model: str | None) -> Request:
    """``contents``, the system instruction, tools and the output limit of a request."""
    contents = body.get("contents")
    if not isinstance(contents, list):
        contents = [] if contents is None else [contents]
    config = body.get("generationConfig")
    limit = config.get("maxOutputTokens") if isinstance(config, dict) else None
    return Request(
        "gemini_contents",
        model,
        contents,
        system=body.get("systemInstruction"),
        tools=body.get("tools") or (),
        max_output_tokens=output_limit(limit),
    )


def _generated(body: Any) -> Response:
    return _response(snake(body))


def _streamed(path: str, body: dict[str, Any]) -> bool:
    return True


def _embed_request(body: dict[str, Any], model: str | None) -> Request:
    return embed_request(body.get("content"), model)


def _embedded(body: Any) -> Response:
    """An embedding: its input tokens when the answer reports them (``usageMetadata``)."""
    meta = snake(body).get("usage_metadata") if isinstance(body, dict) else None
    tokens = meta.get("prompt_token_count") if isinstance(meta, dict) else None
    return Response(Usage(input_tokens=tokens) if tokens is not None else None)


_GENERATE = Wire("chat", _request, _generated, model=_model, streams=lambda path, body: False)
_STREAM = Wire(
    "chat",
    _request,
    _generated,
    lambda body: _Accumulator(body, body),
    streams=_streamed,
    model=_model,
    event=snake,
)
_EMBED = Wire(
    "embeddings", _embed_request, _embedded, model=_model, streams=lambda path, body: False
)
_METHODS = {"generateContent": _GENERATE, "streamGenerateContent": _STREAM, "embedContent": _EMBED}


def recognise(path: str) -> Wire | None:
    """The Gemini request a POST to ``path`` is, or None."""
    if "/models/" not in path:
        return None
    return _METHODS.get(path.rpartition(":")[2])
