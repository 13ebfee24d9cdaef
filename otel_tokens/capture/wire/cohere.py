"""Cohere's API on the wire: v2 chat (``POST /v2/chat``, whole or streamed as server-sent
events ``message-start`` ... ``message-end``) and embed (``/v2/embed``, ``/v1/embed``).

Cohere reports two counts: ``billed_units`` (what the bill counts) and ``tokens`` (what the
model read and wrote, the prompt template included). The tokens recorded are the billed
units, as the price applies to them; ``tokens`` stands in when no billed units are given.
Chat answers carry usage in ``usage`` (v2), embeddings in ``meta``; an answer names no
model: the requested one is the model."""

from __future__ import annotations

from typing import Any

from ...request import Request, output_limit
from ...usage import Usage
from ..lifecycle import Response
from ..lifecycle import sdk_field as _get
from ..stream import Accumulator
from .base import Wire, by_suffix, embed_request

__all__ = ["SUFFIXES", "recognise"]


def _usage(block: Any, response_id: Any) -> Usage | None:
    """The usage of a ``usage`` or ``meta`` block: billed units, else tokens."""
    if not isinstance(block, dict):
        return None
    counts = block.get("billed_units") or block.get("tokens")
    if not isinstance(counts, dict):
        return None
    return Usage(
        input_tokens=counts.get("input_tokens"),
        output_tokens=counts.get("output_tokens"),
        response_id=response_id if isinstance(response_id, str) else None,
    )


def _reason(value: Any) -> tuple[str, ...]:
    """A finish reason as Cohere names it, lower case (``COMPLETE`` -> ``complete``)."""
    return (value.lower(),) if isinstance(value, str) and value else ()


def _chat_request(body: dict[str, Any], model: str | None) -> Request:
    """Cohere's v2 messages are OpenAI-shaped (role, content): estimated as OpenAI chat."""
    return Request(
        "openai_chat",
        model,
        body.get("messages") or [],
        tools=body.get("tools") or (),
        max_output_tokens=output_limit(body.get("max_tokens")),
    )


def _chat_response(body: Any) -> Response:
    rid = _get(body, "id")
    usage = _usage(_get(body, "usage") or _get(body, "meta"), rid)
    return Response(
        usage, None, rid if isinstance(rid, str) else None, _reason(_get(body, "finish_reason"))
    )


class _ChatAccumulator(Accumulator):
    """v2 chat stream events: the text of ``content-delta``, the usage and finish reason of
    ``message-end``."""

    def add(self, event: Any) -> bool:
        kind = _get(event, "type")
        if kind == "message-start":
            rid = _get(event, "id")
            self.response_id = rid if isinstance(rid, str) else self.response_id
        elif kind == "content-delta":
            text = _get(_get(_get(_get(event, "delta"), "message"), "content"), "text")
            if isinstance(text, str) and text:
                self.text.append(text)
        elif kind == "message-end":
            delta = _get(event, "delta")
            self.finish_reasons = list(_reason(_get(delta, "finish_reason")))
            usage = _usage(_get(delta, "usage"), self.response_id)
            if usage is not None:
                self.usage = usage
        return True


def _embed_request(body: dict[str, Any], model: str | None) -> Request:
    return embed_request(body.get("texts") or body.get("inputs"), model)


def _embed_response(body: Any) -> Response:
    rid = _get(body, "id")
    return Response(
        _usage(_get(body, "meta") or _get(body, "usage"), rid),
        None,
        rid if isinstance(rid, str) else None,
    )


_CHAT = Wire("chat", _chat_request, _chat_response, lambda body: _ChatAccumulator())
_EMBED = Wire("embeddings", _embed_request, _embed_response)
_ROUTES = {"/v2/chat": _CHAT, "/v2/embed": _EMBED, "/v1/embed": _EMBED}
SUFFIXES = tuple(_ROUTES)


def recognise(path: str) -> Wire | None:
    """The Cohere request a POST to ``path`` is, or None."""
    return by_suffix(_ROUTES.items(), path)
