"""Ollama's native API on the wire: ``/api/chat``, ``/api/generate`` (streamed by default,
as newline-delimited JSON, unless the body says ``"stream": false``) and ``/api/embed``.
Usage is ``prompt_eval_count`` (input) and ``eval_count`` (output), in the last object
(``"done": true``); a prompt Ollama had cached reports no ``prompt_eval_count``."""

from __future__ import annotations

from typing import Any

from ...request import Request, output_limit
from ...usage import Usage
from ..lifecycle import Response
from ..lifecycle import sdk_field as _get
from ..stream import Accumulator
from .base import Wire, by_suffix, embed_request

__all__ = ["SUFFIXES", "recognise"]


def _usage(body: Any, model: Any) -> Usage:
    return Usage(
        input_tokens=_get(body, "prompt_eval_count"),
        output_tokens=_get(body, "eval_count"),
        model=model if isinstance(model, str) else None,
    )


def _reasons(body: Any) -> tuple[str, ...]:
    reason = _get(body, "done_reason")
    return (reason,) if isinstance(reason, str) and reason else ()


def _answer(body: Any) -> Response:
    """A whole answer (``"stream": false``), or the last object of a stream."""
    model = _get(body, "model")
    return Response(
        _usage(body, model), model if isinstance(model, str) else None, None, _reasons(body)
    )


def _embedded(body: Any) -> Response:
    model = _get(body, "model")
    return Response(
        Usage(
            input_tokens=_get(body, "prompt_eval_count"),
            model=model if isinstance(model, str) else None,
        ),
        model if isinstance(model, str) else None,
    )


class _Accumulator(Accumulator):
    """Stream objects: the text of each (``message.content`` or ``response``), the usage of
    the last (``done``)."""

    def add(self, event: Any) -> bool:
        text = _get(_get(event, "message"), "content") or _get(event, "response")
        if isinstance(text, str) and text:
            self.text.append(text)
        if _get(event, "done") is True:
            answer = _answer(event)
            self.usage, self.model = answer.usage, answer.model
            self.finish_reasons = list(answer.finish_reasons)
        return True


def _streams(path: str, body: dict[str, Any]) -> bool:
    return body.get("stream") is not False  # Ollama streams unless told not to


def _limit(body: dict[str, Any]) -> int | None:
    options = body.get("options")
    return output_limit(options.get("num_predict")) if isinstance(options, dict) else None


def _chat_request(body: dict[str, Any], model: str | None) -> Request:
    return Request(
        "openai_chat",
        model,
        body.get("messages") or [],
        tools=body.get("tools") or (),
        max_output_tokens=_limit(body),
    )


def _generate_request(body: dict[str, Any], model: str | None) -> Request:
    prompt = body.get("prompt")
    return Request(
        "openai_completions",
        model,
        [prompt] if isinstance(prompt, str) else [],
        system=body.get("system"),
        max_output_tokens=_limit(body),
    )


def _embed_request(body: dict[str, Any], model: str | None) -> Request:
    return embed_request(body.get("input"), model)


_ROUTES = {
    "/api/chat": Wire("chat", _chat_request, _answer, lambda body: _Accumulator(), _streams),
    "/api/generate": Wire(
        "text_completion", _generate_request, _answer, lambda body: _Accumulator(), _streams
    ),
    "/api/embed": Wire("embeddings", _embed_request, _embedded, streams=lambda path, body: False),
}
SUFFIXES = tuple(_ROUTES)


def recognise(path: str) -> Wire | None:
    """The Ollama request a POST to ``path`` is, or None."""
    return by_suffix(_ROUTES.items(), path)
