"""OpenAI's wire format, spoken by most providers and gateways: chat completions, Responses,
embeddings and legacy completions (Azure OpenAI's ``/openai/deployments/{name}/...`` paths
too, the deployment naming the model when the body does not). The readers are the
``openai`` SDK capture's own (:mod:`..sdk.openai`), which read decoded JSON as they read
the SDK's objects; Groq's ``x_groq`` usage, DeepSeek's cache counts and OpenRouter's cost
are read there (:mod:`.compatible`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...request import Request
from ..sdk.openai import (
    _chat_request,
    _chat_response,
    _ChatAccumulator,
    _completions_request,
    _completions_response,
    _CompletionsAccumulator,
    _embeddings_request,
    _embeddings_response,
    _responses_request,
    _responses_response,
    _ResponsesAccumulator,
)
from .base import Wire

__all__ = ["SUFFIXES", "recognise"]


def _model(path: str, body: dict[str, Any]) -> str | None:
    """The body's model, else an Azure deployment's name (``.../deployments/{name}/...``)."""
    model = body.get("model")
    if isinstance(model, str):
        return model
    _, found, after = path.partition("/deployments/")
    return (after.split("/", 1)[0] or None) if found else None


def _described(read: Callable[[dict[str, Any]], Request]) -> Callable[..., Request]:
    """``read(body)`` with the model named by the path when the body names none."""

    def request(body: dict[str, Any], model: str | None) -> Request:
        found = read(body)
        return found if found.model or model is None else found._replace(model=model)

    return request


def _stream(kind: type) -> Callable[[dict[str, Any]], Any]:
    """A stream accumulator of ``kind`` for a request body (the body is what was sent: no
    usage chunk to hide)."""
    return lambda body: kind(body, body)


def _goes_on(event: bytes) -> bool:
    """A chat or completions chunk, as sent, of one choice that goes on (its finish reason
    null): it adds text, and at most a running usage (read at the end when no usage was read
    after it). A chunk without a choice (the usage chunk), with a choice that ends, or with
    several choices, is read at once. A key followed by ``:`` is never inside a JSON string
    (its quotes would be escaped)."""
    values = event.split(b'"finish_reason":')  # one choice: two parts
    return len(values) == 2 and values[1].lstrip()[:4] == b"null"


_CHAT = Wire(
    "chat",
    _described(_chat_request),
    _chat_response,
    _stream(_ChatAccumulator),
    model=_model,
    plain=_goes_on,
)
_RESPONSES = Wire(
    "chat",
    _described(_responses_request),
    _responses_response,
    _stream(_ResponsesAccumulator),
    model=_model,
)
_EMBEDDINGS = Wire(
    "embeddings", _described(_embeddings_request), _embeddings_response, model=_model
)
_COMPLETIONS = Wire(
    "text_completion",
    _described(_completions_request),
    _completions_response,
    _stream(_CompletionsAccumulator),
    model=_model,
    plain=_goes_on,
)

#: path suffix -> request shape, the more specific first
_ROUTES = (
    ("/chat/completions", _CHAT),
    ("/responses", _RESPONSES),
    ("/embeddings", _EMBEDDINGS),
    ("/completions", _COMPLETIONS),
)
SUFFIXES = tuple(suffix for suffix, _ in _ROUTES)


def recognise(path: str) -> Wire | None:
    """The OpenAI-shaped request a POST to ``path`` is, or None."""
    for suffix, wire in _ROUTES:
        if path.endswith(suffix):
            return wire
    return None
