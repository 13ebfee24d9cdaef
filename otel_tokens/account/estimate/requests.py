"""What a request contains, as countable pieces: the one entry every caller uses.

Each request shape (``Request.api``) is rendered by its wire format's renderer, looked up in
one table (:data:`.renderers.RENDERERS`; a module per format in ``renderers/``). Seed 003:
an agent under-counted assistant turns 2-15x because its estimate skipped the tool-call
envelope and a second call site kept its own, drifting copy: every message goes through
:func:`render_message`, every preamble through :func:`render_preamble`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...request import Api, Request
from .renderers import FALLBACK, RENDERERS
from .rendering import Rendering, field, items_of, structured_schema

__all__ = ["Api", "Rendering", "Request", "field", "render_message", "render_request"]

STRUCTURED_OUTPUT_OVERHEAD = 0  # the schema's JSON is all a response format costs (measured)


def render_message(api: Api, message: Any, model: str | None = None) -> Rendering:
    """One message or input item, whatever its API and shape: THE helper every caller uses."""
    return RENDERERS.get(api, FALLBACK).message(message, model)


def messages_of(request: Request) -> Sequence[Any]:
    """The request's messages as a sequence (a Responses string input is one item)."""
    messages = request.messages
    if type(messages) is list or type(messages) is tuple:  # the common case, before the ABC check
        return messages
    if isinstance(messages, (str, bytes)):
        return [messages]
    if messages is None:
        return []
    return messages if isinstance(messages, Sequence) else list(items_of(messages))


def after_compaction(api: Api, messages: Sequence[Any]) -> Sequence[Any]:
    """The messages the model is shown, as the API's renderer says (all, for most)."""
    shown = RENDERERS.get(api, FALLBACK).shown
    return messages if shown is None else shown(messages)


def render_preamble(request: Request) -> Rendering:
    """Everything but the messages: system prompt, tool definitions, request framing (the
    API's renderer), then what server-run tools and an output schema add (any API)."""
    preamble = RENDERERS.get(request.api, FALLBACK).preamble
    out = Rendering() if preamble is None else preamble(request)
    if out.server and not out.complete:  # what server-run tools return: learnt per model
        out.guess(server_kind(request.tools), 0)  # and set of such tools (none: nothing unknown)
    if request.response_format is not None:
        schema = structured_schema(request.response_format)
        if schema is not None:
            out.texts.append(schema)
            out.fixed += STRUCTURED_OUTPUT_OVERHEAD
    return out


def server_kind(tools: Any) -> str:
    """The kind a request's server-run tools are learnt under: ``server:`` and their types,
    sorted (what web search returns says nothing of what a tool search loads)."""
    kinds = {str(field(tool, "type")) for tool in items_of(tools)}
    return "server:" + "+".join(sorted(kinds - {"None", "function", "custom"}))


def render_request(request: Request) -> tuple[Rendering, list[Rendering]]:
    """The preamble and each message, rendered."""
    return render_preamble(request), [
        render_message(request.api, m, request.model) for m in messages_of(request)
    ]
