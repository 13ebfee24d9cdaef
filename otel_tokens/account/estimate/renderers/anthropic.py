"""Anthropic Messages (``anthropic_messages``) rendered for the estimate: content blocks
(text, images, tool use and results, thinking carried back, documents), the system prompt,
tool definitions and the system text the API adds for tools, thinking and output schemas.
The wire format's readers are ``capture/wire/anthropic.py`` and ``capture/sdk/anthropic.py``.
"""

from __future__ import annotations

import re
from typing import Any

from ....request import Request
from ..images import anthropic_image_tokens, size_from_base64
from ..media import ANTHROPIC_PER_PDF_PAGE, pdf_pages
from ..rendering import Renderer, Rendering, as_json, field, items_of, structured_schema
from ..text import heuristic_tokens
from .openai import ENCRYPTED_REASONING_CHARS_PER_TOKEN

__all__ = [
    "ANTHROPIC_PER_MESSAGE",
    "ANTHROPIC_PER_TOOL_RESULT",
    "ANTHROPIC_PER_TOOL_USE",
    "ANTHROPIC_REQUEST_OVERHEAD",
    "RENDERERS",
    "anthropic_blocks",
]

ANTHROPIC_PER_MESSAGE = 4
ANTHROPIC_REQUEST_OVERHEAD = 4
#: the tool-use system prompt: documented 346, which the Claude 3 and 4.0/4.1 models
#: measure; models from 4.5 on measure more (fitted on half A of the peer corpus: the median
#: residual of its complete estimates with tools, +89 over the 420 counted before, issue 48)
ANTHROPIC_TOOL_SYSTEM_PROMPT = 346
ANTHROPIC_TOOL_SYSTEM_PROMPT_45 = 510
#: a forced tool (``tool_choice`` ``any`` or ``tool``) on models from 4.5 on: system text
#: beyond ``auto``'s (fitted on half B's three such requests, +103 to +130; half A holds none;
#: held out: 12 requests at 0.71x-0.73x before). The 4.0 models measure about +24: none
ANTHROPIC_FORCED_TOOL_PROMPT = 105
ANTHROPIC_PER_TOOL_USE = 10
ANTHROPIC_PER_TOOL_RESULT = 6
ANTHROPIC_THINKING_PROMPT = 30  # the system text extended thinking adds (measured)
ANTHROPIC_STRUCTURED_OUTPUT_PROMPT = 143  # the system text a JSON-schema output adds (measured)
#: Anthropic server tools (by type prefix): tokens their definition adds beyond its JSON
#: (measured on half of the peer corpus, confirmed on the other half; the tool search's
#: refitted on half A with the 4.5 models' tool prompt: 300 less its median residual, -73);
#: their results and the rest are learnt per model (the estimate is marked incomplete)
ANTHROPIC_SERVER_TOOLS = (("advisor", 1950), ("tool_search_tool", 227))
#: a request whose tool search has not loaded tools yet: the search's round, billed within
#: the call, counted at least as the 300 fitted before for the definition did (chosen)
ANTHROPIC_SEARCH_ROUND = 73


def anthropic_blocks(content: Any, out: Rendering) -> None:
    if isinstance(content, str):
        out.texts.append(content)
        return
    for block in items_of(content):
        kind = field(block, "type")
        if isinstance(block, str):
            out.texts.append(block)
        elif kind == "text":
            out.texts.append(field(block, "text") or "")
        elif kind == "image":
            source = field(block, "source")
            data = field(source, "data") if field(source, "type") == "base64" else None
            size = size_from_base64(data) if data else None
            if size is None:
                out.guess("image", anthropic_image_tokens(None))
            else:
                out.fixed += anthropic_image_tokens(size)
        elif kind in ("tool_use", "server_tool_use"):
            out.texts.append(f"{field(block, 'id') or ''}{field(block, 'name') or ''}")
            out.texts.append(as_json(field(block, "input") or {}))
            out.fixed += ANTHROPIC_PER_TOOL_USE
        elif kind == "tool_result":
            out.texts.append(field(block, "tool_use_id") or "")
            anthropic_blocks(field(block, "content"), out)
            out.fixed += ANTHROPIC_PER_TOOL_RESULT
        elif kind == "thinking":  # billed only within its turn (see Rendering.carried)
            out.carried += heuristic_tokens(field(block, "thinking") or "")
        elif kind == "redacted_thinking":  # encrypted: its size approximates its tokens
            data = field(block, "data") or ""
            out.carried += round(len(data) / ENCRYPTED_REASONING_CHARS_PER_TOKEN)
            out.complete = False
        elif kind == "document":
            _anthropic_document(field(block, "source"), out)
        elif block is not None:
            out.texts.append(as_json(block))


def _anthropic_document(source: Any, out: Rendering) -> None:
    """A document block: text as text, a PDF by its pages, anything else one page, marked."""
    kind = field(source, "type")
    if kind == "text":
        out.texts.append(field(source, "data") or "")
    elif kind == "content":
        anthropic_blocks(field(source, "content"), out)
    else:
        data = field(source, "data") if kind == "base64" else None
        pages = pdf_pages(data) if isinstance(data, str) else None
        if pages is None:
            out.guess("file", ANTHROPIC_PER_PDF_PAGE)
        else:
            out.fixed += ANTHROPIC_PER_PDF_PAGE * pages


def _anthropic_message(message: Any, model: str | None) -> Rendering:
    out = Rendering(fixed=ANTHROPIC_PER_MESSAGE)
    content = field(message, "content")
    anthropic_blocks(content, out)
    out.opens_turn = field(message, "role") == "user" and (
        isinstance(content, str)
        or any(field(block, "type") != "tool_result" for block in items_of(content))
    )
    return out


def _anthropic_tools(tools: Any, messages: Any = ()) -> Rendering:
    """Tool definitions; server tools marked (incomplete: what they return is unknown)
    unless they only search for tools and ``messages`` show the tools loaded."""
    out = Rendering()
    searches_only = True
    for tool in items_of(tools):
        # deferred ones too (``defer_loading``), as measured: so the complete estimates of
        # requests with deferred tools reach p90 9.6% (shared) and 11.2% (held-out
        # recordings); counting only those a tool search loaded, 16% on both (issue 48)
        out.texts.append(as_json(tool))
        kind = field(tool, "type")
        if kind not in (None, "custom") and field(tool, "input_schema") is None:
            out.server = True  # a server tool (web search, code execution)
            searches_only = searches_only and str(kind).startswith("tool_search_tool")
            out.fixed += next((n for p, n in ANTHROPIC_SERVER_TOOLS if str(kind).startswith(p)), 0)
    if out.server and not (searches_only and _tools_loaded(messages)):
        out.complete = False
        if searches_only:  # before any search: its round is billed within the call
            out.fixed += ANTHROPIC_SEARCH_ROUND
    return out


_VERSION = re.compile(r"claude-(?:[a-z]+-)?(\d+)(?:-(\d)(?!\d))?")


def _from_45(model: str | None) -> bool:
    """A Claude model of version 4.5 or later, by name (an unknown name: a current one)."""
    found = _VERSION.search((model or "").lower())
    if found is None:
        return True
    return (int(found[1]), int(found[2] or 0)) >= (4, 5)


def _tool_prompt(request: Request) -> int:
    """The system text the API adds for tools: by model generation and tool choice."""
    if not _from_45(request.model):
        return ANTHROPIC_TOOL_SYSTEM_PROMPT
    forced = field(request.tool_choice, "type") in ("any", "tool")
    return ANTHROPIC_TOOL_SYSTEM_PROMPT_45 + (ANTHROPIC_FORCED_TOOL_PROMPT if forced else 0)


#: content blocks saying tools were loaded: a tool search's result, a tool added to the
#: conversation (a client's tool search returns a tool result of tool references)
_LOADED_TOOLS = ("tool_search_tool_result", "tool_addition")


def _tools_loaded(messages: Any) -> bool:
    """Whether the messages show tools loaded: a request whose server tools only search for
    tools then needs no search (the tools are counted: deferred ones are), so its estimate
    is complete (9 of 10 such requests of the peer corpus within 6% of the bill; 15 of 16
    held out; the miss searched again: 0.45x)."""
    return any(
        _loads_tools(block)
        for message in items_of(messages)
        for block in items_of(field(message, "content"))
    )


def _loads_tools(block: Any) -> bool:
    kind = field(block, "type")
    if kind == "tool_result":
        return any(field(b, "type") == "tool_reference" for b in items_of(field(block, "content")))
    return kind in _LOADED_TOOLS


def _preamble(request: Request) -> Rendering:
    """The request's framing, system prompt, tool definitions (with the tool-use system
    prompt) and the system text thinking and an output schema add."""
    out = Rendering(fixed=ANTHROPIC_REQUEST_OVERHEAD)
    if request.system:
        anthropic_blocks(request.system, out)
    tools = _anthropic_tools(request.tools, request.messages)
    if tools.texts:
        tools.fixed += _tool_prompt(request)
    out.add(tools)
    if request.thinking:
        out.fixed += ANTHROPIC_THINKING_PROMPT
    if request.response_format is not None and structured_schema(request.response_format):
        out.fixed += ANTHROPIC_STRUCTURED_OUTPUT_PROMPT  # not for effort or task budgets
    return out


#: the request shapes this module renders
RENDERERS = {"anthropic_messages": Renderer(_anthropic_message, _preamble)}
