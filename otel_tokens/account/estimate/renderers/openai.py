"""OpenAI's request shapes rendered for the estimate: chat completions (``openai_chat``),
Responses (``openai_responses``), embeddings and legacy completions (plain text). The wire
format's readers are ``capture/wire/openai.py`` and ``capture/sdk/openai.py``.

Every chat message, whatever its shape (a dict or an SDK object), counts its text and
content parts, every tool call's whole envelope (seed 003: skipping it under-counted
assistant turns 2-15x), tool results, images and the per-message framing; the tool
definitions are rendered once per request, as OpenAI shows them to the model.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import partial
from typing import Any

from ....request import Request
from ..images import openai_image_tokens, size_from_base64
from ..media import (
    OPENAI_FILE_ITEM,
    OPENAI_PER_PDF_PAGE,
    TEXT_TYPES,
    audio_tokens,
    inline_text,
    pdf_pages,
)
from ..rendering import Renderer, Rendering, as_json, field, items_of

__all__ = ["RENDERERS", "openai_reasoning_model"]

# Framing, in tokens: OpenAI's published counting recipe for chat messages (3 per message,
# 1 per name, 3 to prime the reply); the rest measured on recorded API traffic (the shared
# cassettes), where each constant is the consistent residual of one feature.
OPENAI_PER_MESSAGE = 3
OPENAI_PER_NAME = 1
OPENAI_REPLY_PRIMING = 3
RESPONSES_REPLY_PRIMING = 4
#: tokens fewer that a reasoning model's reply priming takes, per API (measured)
REASONING_PRIMING_SAVING = {"openai_chat": 1, "openai_responses": 2}
OPENAI_TOOLS_OVERHEAD = 8  # wrapping of the function namespace
OPENAI_PER_TOOL_CALL = 12  # the rendering of one call around its name and arguments
OPENAI_PER_TOOL_RESULT = 5  # a tool result's framing beyond a message's
#: OpenAI reasoning models on chat completions: what function tools add beyond their text
#: (the tool-calling instructions of their chat format; Responses adds none; measured: +78
#: on gpt-5 and gpt-5-mini with one tool, 0 on gpt-4o)
OPENAI_REASONING_CHAT_TOOLS = 78
#: an encrypted reasoning item carried back (Responses): ciphertext characters of an empty
#: item, and characters per reasoning token beyond it (measured on recorded follow-ups)
ENCRYPTED_REASONING_EMPTY = 1000
ENCRYPTED_REASONING_CHARS_PER_TOKEN = 4.7
#: Responses hosted tools: tokens of the instructions the API adds (measured); what the tool
#: returns (search results, retrieved chunks, code output) is billed as input within the
#: call and unknown before it
#: an ``additional_tools`` input item (tools made available mid-conversation): what the API
#: adds beyond the item's function definitions (fitted on half A: +79 to +84 unexplained in
#: its four complete requests; half B and held out: +79 to +112 before, issue 48)
RESPONSES_ADDITIONAL_TOOLS = 80
#: a hosted tool search whose tools the input already shows loaded (a ``tool_search_output``
#: item, its tools counted): its instructions (fitted on half A: its 8 such requests measure
#: 148-160 below the 300 of the table below, which also holds the search's round that a
#: first request, before any search, is billed within the call)
RESPONSES_TOOL_SEARCH_LOADED = 145
RESPONSES_HOSTED_TOOLS = {
    "web_search": 267,
    "web_search_preview": 267,
    "file_search": 800,
    "tool_search": 300,
}


def _openai_part(part: Any, out: Rendering, model: str | None) -> None:
    kind = field(part, "type")
    if isinstance(part, str):
        out.texts.append(part)
    elif kind in ("text", "input_text", "output_text", "refusal"):
        out.texts.append(field(part, "text") or field(part, "refusal") or "")
    elif kind in ("image_url", "input_image"):
        image = field(part, "image_url")
        url = field(image, "url") if not isinstance(image, str) else image
        detail = field(image, "detail") if not isinstance(image, str) else field(part, "detail")
        size = size_from_base64(url) if isinstance(url, str) and url.startswith("data:") else None
        if size is None and detail != "low":
            out.guess("image", openai_image_tokens(None, detail, model))
        else:
            out.fixed += openai_image_tokens(size, detail, model)
    elif kind == "input_audio":
        audio = field(part, "input_audio")
        data = field(audio, "data")
        if isinstance(data, str):
            out.fixed += audio_tokens(data, field(audio, "format"))
        else:
            out.guess("file", OPENAI_FILE_ITEM)
    elif kind in ("input_file", "file"):
        _openai_file(field(part, "file") or part, out)
    elif part is not None:
        text = field(part, "text")
        out.texts.append(text if isinstance(text, str) else as_json(part))


def _openai_file(file: Any, out: Rendering) -> None:
    """A file given inline: a text file as its text; a PDF by its pages at a per-page figure
    (OpenAI shows the model each page's text and image; no published count), marked; a file
    by id or URL, a per-item figure, marked."""
    data = field(file, "file_data")
    mime = data[5 : data.find(";", 5)] if isinstance(data, str) and data.startswith("data:") else ""
    text = inline_text(data) if mime.startswith("text/") or mime in TEXT_TYPES else None
    if text is not None:
        out.texts.append(text)
        return
    pages = pdf_pages(data) if mime == "application/pdf" else None
    out.guess("file", OPENAI_PER_PDF_PAGE * pages if pages else OPENAI_FILE_ITEM)


def _openai_content(content: Any, out: Rendering, model: str | None) -> None:
    if isinstance(content, str):
        out.texts.append(content)
        return
    for part in items_of(content):
        _openai_part(part, out, model)


def _openai_tool_call(call: Any, out: Rendering) -> None:
    """One tool call's envelope as OpenAI renders it: the function name, the arguments and
    the syntax around them (OPENAI_PER_TOOL_CALL). OpenAI does not show the model call ids:
    recorded usage confirms it, so ids are not counted here."""
    function = field(call, "function")
    name = field(function, "name") if function is not None else field(call, "name")
    arguments = field(function, "arguments") if function is not None else field(call, "arguments")
    out.texts.append(name or "")
    out.texts.append(as_json(arguments or ""))
    out.fixed += OPENAI_PER_TOOL_CALL


def _openai_chat_message(message: Any, model: str | None) -> Rendering:
    # one getter for the message's shape (:func:`field`'s rule), chosen once: a dict's own
    # ``get``, or an object's attributes
    get = message.get if isinstance(message, dict) else partial(getattr, message)
    role = get("role", None)
    out = Rendering(fixed=OPENAI_PER_MESSAGE, opens_turn=role == "user")
    out.texts.append(role or "")
    name = get("name", None)
    if name:
        out.texts.append(name)
        out.fixed += OPENAI_PER_NAME
    content = get("content", None)
    if isinstance(content, str):
        out.texts.append(content)
    else:
        _openai_content(content, out, model)
    if role == "tool" or get("tool_call_id", None):
        out.fixed += OPENAI_PER_TOOL_RESULT
    calls = get("tool_calls", None)
    if calls is not None:
        for call in items_of(calls):
            _openai_tool_call(call, out)
    legacy = get("function_call", None)
    if legacy is not None:
        _openai_tool_call({"function": legacy}, out)
    return out


def _responses_item(item: Any, model: str | None) -> Rendering:
    kind = field(item, "type")
    if kind in ("function_call", "custom_tool_call"):
        out = Rendering(fixed=OPENAI_PER_MESSAGE)
        _openai_tool_call(item, out)
        return out
    if kind in ("function_call_output", "custom_tool_call_output"):
        out = Rendering(fixed=OPENAI_PER_MESSAGE + OPENAI_PER_TOOL_RESULT)
        output = field(item, "output")
        if isinstance(output, str):
            out.texts.append(output)
        else:
            _openai_content(output, out, model)
        return out
    if kind == "reasoning":
        return _reasoning_item(item)
    if kind == "compaction":  # the compacted conversation, encrypted: sized like reasoning
        tokens = _encrypted_tokens(field(item, "encrypted_content"))
        return Rendering(fixed=tokens or 0, complete=False)
    if field(item, "tools") is not None:  # tools made available mid-conversation (tool search)
        added = RESPONSES_ADDITIONAL_TOOLS if kind == "additional_tools" else 0
        out = Rendering(fixed=OPENAI_PER_MESSAGE + added)
        out.add(_openai_tools(field(item, "tools"), loaded=kind == "tool_search_output"))
        return out
    return _openai_chat_message(item, model)  # messages: {"role", "content"}


def _reasoning_item(item: Any) -> Rendering:
    """A reasoning item carried back: its tokens (billed only in the turn that produced it)
    from the size of its ciphertext (complete: half A's eight requests that only these left
    incomplete measure 0.99x-1.01x, but two whose image in a tool output is over-counted);
    without encrypted content the server holds it (a stored response): size unknown."""
    tokens = _encrypted_tokens(field(item, "encrypted_content"))
    return Rendering(complete=tokens is not None, carried=tokens or 0)


def _encrypted_tokens(encrypted: Any) -> int | None:
    """Tokens of an encrypted item from its ciphertext's size (None: no ciphertext)."""
    if not isinstance(encrypted, str):
        return None
    size = max(0, len(encrypted) - ENCRYPTED_REASONING_EMPTY)
    return round(size / ENCRYPTED_REASONING_CHARS_PER_TOKEN)


def _ts_type(schema: Any, indent: str, defs: dict[str, Any], depth: int = 0) -> str:
    """A JSON-schema type as the TypeScript-like text OpenAI renders functions with
    (``$ref`` to the schema's own ``$defs`` inlined, a few levels deep)."""
    if not isinstance(schema, dict) or depth > _MAX_SCHEMA_DEPTH:
        return "any"
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return _ts_type(defs.get(ref.rsplit("/", 1)[-1]), indent, defs, depth + 1)
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    union = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(union, list):
        return " | ".join(_ts_type(option, indent, defs, depth + 1) for option in union)
    kind = schema.get("type")
    if kind == "array":
        return f"{_ts_type(schema.get('items'), indent, defs, depth + 1)}[]"
    if kind == "object" or "properties" in schema:
        return "{\n" + _ts_properties(schema, indent + "  ", defs, depth + 1) + indent + "}"
    if kind in ("integer", "number"):
        return "number"
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    return str(kind or "any")


_MAX_SCHEMA_DEPTH = 8


def _ts_properties(
    schema: dict[str, Any], indent: str, defs: dict[str, Any], depth: int = 0
) -> str:
    required = set(schema.get("required") or ())
    lines = []
    for name, prop in (schema.get("properties") or {}).items():
        if isinstance(prop, dict) and prop.get("description"):
            lines.append(f"{indent}// {prop['description']}\n")
        optional = "" if name in required else "?"
        default = prop.get("default") if isinstance(prop, dict) else None
        comment = f" // default: {json.dumps(default)}" if default is not None else ""
        lines.append(f"{indent}{name}{optional}: {_ts_type(prop, indent, defs, depth)},{comment}\n")
    return "".join(lines)


def _hosted(tool: Any, kind: Any, searched: bool, out: Rendering) -> None:
    """A hosted tool's instructions, the server marked as running it (incomplete: what it
    returns is unknown), except a tool search the server runs whose tools the input shows
    ``searched`` (the tools are counted: complete; a tool search the client runs, with
    ``execution`` "client", stays incomplete: no recording of half A shows one)."""
    if kind == "tool_search" and searched and field(tool, "execution") is None:
        out.fixed += RESPONSES_TOOL_SEARCH_LOADED
        out.server = True  # no delta: the last reported input held the search's round
        return
    out.fixed += RESPONSES_HOSTED_TOOLS.get(kind, 0)  # its own instructions, if known
    out.server, out.complete = True, False


def _searched(messages: Any) -> bool:
    """Whether Responses input items show a tool search's output (its tools loaded)."""
    return any(field(item, "type") == "tool_search_output" for item in items_of(messages))


def _openai_tools(tools: Any, loaded: bool = False, searched: bool = False) -> Rendering:
    """Function definitions, rendered the way OpenAI presents them to the model (deferred
    ones only when ``loaded``: a tool search's output shows the model what it found)."""
    out = Rendering()
    parts = []
    for tool in items_of(tools):
        kind = field(tool, "type")
        if kind not in (None, "function", "custom"):  # a hosted tool: the server runs it
            _hosted(tool, kind, searched, out)
            continue
        if field(tool, "defer_loading") and not loaded:  # shown once a tool search finds it
            continue
        function = field(tool, "function") or tool  # chat: {"type","function"}; responses: flat
        if hasattr(function, "model_dump"):
            function = function.model_dump(exclude_none=True)
        if not isinstance(function, dict):
            continue
        name = function.get("name") or function.get("type") or "tool"
        doc = f"// {function['description']}\n" if function.get("description") else ""
        params = function.get("parameters") or {}
        body = ""
        if isinstance(params, dict):
            defs = params.get("$defs") or params.get("definitions") or {}
            body = _ts_properties(params, "", defs if isinstance(defs, dict) else {})
        parts.append(f"{doc}type {name} = (_: {{\n{body}}}) => any;\n")
    if parts:
        out.texts.append(
            "namespace functions {\n\n" + "\n".join(parts) + "\n} // namespace functions"
        )
        out.fixed += OPENAI_TOOLS_OVERHEAD
    return out


# -- messages and preambles -------------------------------------------------------------------
def responses_message(item: Any, model: str | None) -> Rendering:
    """A Responses input item; a string input is one user message."""
    if isinstance(item, str):
        return Rendering(texts=[item], fixed=OPENAI_PER_MESSAGE)
    return _responses_item(item, model)


def plain_text(value: Any, model: str | None) -> Rendering:
    """An embeddings input or a legacy completions prompt: its text, no framing."""
    return Rendering(texts=[value if isinstance(value, str) else as_json(value)])


def after_compaction(messages: Sequence[Any]) -> Sequence[Any]:
    """The input items the model is shown: on Responses, a compaction item stands for the
    conversation before it, which the API then drops (the items before it cost nothing)."""
    for i in range(len(messages) - 1, -1, -1):
        if field(messages[i], "type") == "compaction":
            return messages[i:]
    return messages


def _preamble(request: Request, priming: int, saving: int, reasoning_tools: int) -> Rendering:
    """The reply priming (``saving`` fewer for a reasoning model), the system message (chat
    ``system`` or Responses ``instructions``) and the tool definitions (``reasoning_tools``
    more for a reasoning model)."""
    out = Rendering(fixed=priming)
    reasoning = openai_reasoning_model(request.model)
    if reasoning:  # their reply is primed shorter (measured)
        out.fixed -= saving
    if request.system:
        out.texts.append(
            request.system if isinstance(request.system, str) else as_json(request.system)
        )
        out.fixed += OPENAI_PER_MESSAGE
    tools = _openai_tools(request.tools, searched=_searched(request.messages))
    if tools.texts and reasoning:
        tools.fixed += reasoning_tools
    out.add(tools)
    if request.reasoning_mode is not None:  # e.g. "pro": context the request does not show
        out.guess("reasoning mode", 0)  # learnt per model from completed calls
    return out


def chat_preamble(request: Request) -> Rendering:
    return _preamble(
        request,
        OPENAI_REPLY_PRIMING,
        REASONING_PRIMING_SAVING["openai_chat"],
        OPENAI_REASONING_CHAT_TOOLS,
    )


def responses_preamble(request: Request) -> Rendering:
    return _preamble(
        request, RESPONSES_REPLY_PRIMING, REASONING_PRIMING_SAVING["openai_responses"], 0
    )


def openai_reasoning_model(model: str | None) -> bool:
    """An OpenAI reasoning model (the o-series and GPT-5 families, by name)."""
    name = (model or "").lower().rsplit("/", 1)[-1]
    return name.startswith(_REASONING_FAMILIES)


_REASONING_FAMILIES = ("o1", "o3", "o4", "gpt-5")

#: the request shapes this module renders
RENDERERS = {
    "openai_chat": Renderer(_openai_chat_message, chat_preamble),
    "openai_responses": Renderer(responses_message, responses_preamble, after_compaction),
    "openai_embeddings": Renderer(plain_text),
    "openai_completions": Renderer(plain_text),
}
