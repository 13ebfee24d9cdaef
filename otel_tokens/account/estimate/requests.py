"""What a request contains, as countable pieces: one renderer per API, shared by every caller.

Seed 003: an agent under-counted assistant turns 2-15x because its estimate skipped the
tool-call envelope (4 tool calls: 73 estimated vs 1,090 real) and a second call site kept its
own, drifting copy. Here every message, whatever its shape (a dict or an SDK object, read
with :func:`field`), goes through :func:`render_message`, which counts text and content
parts, every tool call's whole envelope (id, type, name, arguments and the JSON around
them), tool results, images and the per-message framing. Tool definitions sent with the
request are rendered once per request.

A rendering is a list of texts to tokenize plus tokens known without a tokenizer (framing,
images); the tokenizer (exact or heuristic) is applied by the caller.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field as dc_field
from functools import partial
from typing import Any, Iterable, Sequence

from .text import heuristic_tokens
from .media import (
    ANTHROPIC_PER_PDF_PAGE, OPENAI_FILE_ITEM, OPENAI_PER_PDF_PAGE, TEXT_TYPES, audio_tokens,
    inline_text, pdf_pages,
)  # fmt: skip
from .images import (
    ANTHROPIC_UNKNOWN_IMAGE,
    anthropic_image_tokens,
    image_size,
    openai_image_tokens,
    size_from_base64,
)

__all__ = ["Api", "Rendering", "Request", "field", "render_message", "render_request"]

from ...request import Api, Request  # noqa: E402  (re-exported: the renderer's input)

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
ANTHROPIC_PER_MESSAGE = 4
ANTHROPIC_REQUEST_OVERHEAD = 4
#: the tool-use system prompt: documented 346 (older models measure that); newer ones ~510
ANTHROPIC_TOOL_SYSTEM_PROMPT = 420  # the middle, fitted on either half of the peer corpus
ANTHROPIC_PER_TOOL_USE = 10
ANTHROPIC_PER_TOOL_RESULT = 6
ANTHROPIC_THINKING_PROMPT = 30  # the system text extended thinking adds (measured)
STRUCTURED_OUTPUT_OVERHEAD = 0  # the schema's JSON is all a response format costs (measured)
ANTHROPIC_STRUCTURED_OUTPUT_PROMPT = 143  # the system text a JSON-schema output adds (measured)
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
RESPONSES_HOSTED_TOOLS = {"web_search": 267, "web_search_preview": 267, "file_search": 800,
                          "tool_search": 300}  # fmt: skip
#: Anthropic server tools (by type prefix): tokens their definition adds beyond its JSON
#: (measured on half of the peer corpus, confirmed on the other half); their results and the
#: rest are learnt per model (the estimate is marked incomplete)
ANTHROPIC_SERVER_TOOLS = (("advisor", 1950), ("tool_search_tool", 300))


@dataclass
class Rendering:
    """Texts to tokenize and tokens already known, for a request or one message."""

    texts: list[str] = dc_field(default_factory=list)
    fixed: int = 0
    complete: bool = True  # False: a part was counted by a per-item figure (size unknown)
    #: reasoning carried back (Responses reasoning items, Anthropic thinking blocks): billed
    #: only within the turn that produced it, dropped once a new user turn follows
    carried: int = 0
    opens_turn: bool = False  # a user message (not only tool results): a new turn starts
    #: parts counted by a per-item figure (their size is not in the request): how many, of
    #: which kind ("image", "file"; "mixed" when both), and the tokens the figures gave;
    #: the estimator replaces the figure by what it learnt per model from actual usage
    unknown: int = 0
    unknown_kind: str | None = None
    unknown_tokens: int = 0
    #: tools the provider runs itself (web search, code execution...): their results are
    #: billed as input within the call, unknown before it (so the estimate is incomplete)
    server: bool = False

    def add(self, other: Rendering) -> None:
        self.texts.extend(other.texts)
        self.fixed += other.fixed
        if not other.complete:
            self.complete = False
        if other.server:
            self.server = True
        if other.unknown:
            self.unknown += other.unknown
            self.unknown_tokens += other.unknown_tokens
            if self.unknown_kind != other.unknown_kind:
                self.unknown_kind = other.unknown_kind if self.unknown_kind is None else "mixed"

    def guess(self, kind: str, tokens: int) -> None:
        """A part whose size is unknown, counted by a per-item figure (marked incomplete)."""
        self.fixed += tokens
        self.complete = False
        self.unknown += 1
        self.unknown_tokens += tokens
        if self.unknown_kind != kind:
            self.unknown_kind = kind if self.unknown_kind is None else "mixed"


def field(obj: Any, name: str, default: Any = None) -> Any:
    """``obj[name]`` for mappings, ``obj.name`` for SDK objects (pydantic models and the like)."""
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _as_json(value: Any) -> str:
    """Compact JSON of a dict/list/SDK object (tool arguments, schemas, ``input`` blocks)."""
    if isinstance(value, str):
        return value
    if hasattr(value, "model_dump"):
        value = value.model_dump(exclude_none=True)
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _iter(value: Any) -> Iterable[Any]:
    if value is None or isinstance(value, (str, bytes, dict)):
        return ()
    try:
        return iter(value)
    except TypeError:
        return ()


# -- OpenAI -------------------------------------------------------------------------------
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
        out.texts.append(text if isinstance(text, str) else _as_json(part))


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
    for part in _iter(content):
        _openai_part(part, out, model)


def _openai_tool_call(call: Any, out: Rendering) -> None:
    """One tool call's envelope as OpenAI renders it: the function name, the arguments and
    the syntax around them (OPENAI_PER_TOOL_CALL). OpenAI does not show the model call ids:
    recorded usage confirms it, so ids are not counted here."""
    function = field(call, "function")
    name = field(function, "name") if function is not None else field(call, "name")
    arguments = field(function, "arguments") if function is not None else field(call, "arguments")
    out.texts.append(name or "")
    out.texts.append(_as_json(arguments or ""))
    out.fixed += OPENAI_PER_TOOL_CALL


def _openai_chat_message(message: Any, model: str | None) -> Rendering:
    # one getter for the message's shape (:func:`field`'s rule), chosen once: a dict's own
    # ``get`` runs no Python frame per field (one message is rendered per call at least)
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
        for call in _iter(calls):
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
        out = Rendering(fixed=OPENAI_PER_MESSAGE)
        out.add(_openai_tools(field(item, "tools")))
        return out
    return _openai_chat_message(item, model)  # messages: {"role", "content"}


def _reasoning_item(item: Any) -> Rendering:
    """A reasoning item carried back: its tokens (billed only in the turn that produced it)
    from the size of its ciphertext, an approximation, so marked; without encrypted content
    the server holds it (a stored response) and its size is unknown."""
    tokens = _encrypted_tokens(field(item, "encrypted_content"))
    return Rendering(complete=False, carried=tokens or 0)


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


def _openai_tools(tools: Any) -> Rendering:
    """Function definitions, rendered the way OpenAI presents them to the model."""
    out = Rendering()
    parts = []
    for tool in _iter(tools):
        kind = field(tool, "type")
        if kind not in (None, "function", "custom"):  # a hosted tool: the server runs it
            out.fixed += RESPONSES_HOSTED_TOOLS.get(kind, 0)  # its own instructions, if known
            out.server, out.complete = True, False
            continue
        if field(tool, "defer_loading"):  # shown to the model only once a tool search finds it
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
        out.texts.append("namespace functions {\n\n" + "\n".join(parts) + "\n} // namespace functions")
        out.fixed += OPENAI_TOOLS_OVERHEAD
    return out


# -- Anthropic ----------------------------------------------------------------------------
def _anthropic_blocks(content: Any, out: Rendering) -> None:
    if isinstance(content, str):
        out.texts.append(content)
        return
    for block in _iter(content):
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
            out.texts.append(f'{field(block, "id") or ""}{field(block, "name") or ""}')
            out.texts.append(_as_json(field(block, "input") or {}))
            out.fixed += ANTHROPIC_PER_TOOL_USE
        elif kind == "tool_result":
            out.texts.append(field(block, "tool_use_id") or "")
            _anthropic_blocks(field(block, "content"), out)
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
            out.texts.append(_as_json(block))


def _anthropic_document(source: Any, out: Rendering) -> None:
    """A document block: text as text, a PDF by its pages, anything else one page, marked."""
    kind = field(source, "type")
    if kind == "text":
        out.texts.append(field(source, "data") or "")
    elif kind == "content":
        _anthropic_blocks(field(source, "content"), out)
    else:
        data = field(source, "data") if kind == "base64" else None
        pages = pdf_pages(data) if isinstance(data, str) else None
        if pages is None:
            out.guess("file", ANTHROPIC_PER_PDF_PAGE)
        else:
            out.fixed += ANTHROPIC_PER_PDF_PAGE * pages


def _anthropic_message(message: Any) -> Rendering:
    out = Rendering(fixed=ANTHROPIC_PER_MESSAGE)
    content = field(message, "content")
    _anthropic_blocks(content, out)
    out.opens_turn = field(message, "role") == "user" and (isinstance(content, str) or any(
        field(block, "type") != "tool_result" for block in _iter(content)))  # fmt: skip
    return out


def _anthropic_tools(tools: Any) -> Rendering:
    out = Rendering()
    for tool in _iter(tools):
        # deferred ones too (``defer_loading``), as measured: so the complete estimates of
        # requests with deferred tools reach p90 9.6% (shared) and 11.2% (held-out
        # recordings); counting only those a tool search loaded, 16% on both (issue 48)
        out.texts.append(_as_json(tool))
        kind = field(tool, "type")
        if kind not in (None, "custom") and field(tool, "input_schema") is None:
            out.server, out.complete = True, False  # a server tool (web search, code execution)
            out.fixed += next((n for p, n in ANTHROPIC_SERVER_TOOLS if str(kind).startswith(p)), 0)
    if out.texts:
        out.fixed += ANTHROPIC_TOOL_SYSTEM_PROMPT
    return out


# -- Gemini (google-genai) -------------------------------------------------------------------
# Google's documented counts: an image is 258 tokens when both sides are at most 384 px, else
# 258 per 768x768 tile; audio 32 tokens a second, video 263; a PDF page counts as an image.
GEMINI_IMAGE_TILE = 258
GEMINI_UNKNOWN_MEDIA = 258  # media whose size is not read (a file URI, raw bytes of audio): one tile


def gemini_image_tokens(size: tuple[int, int] | None) -> int:
    if size is None:
        return GEMINI_UNKNOWN_MEDIA
    width, height = size
    if width <= 384 and height <= 384:
        return GEMINI_IMAGE_TILE
    return GEMINI_IMAGE_TILE * (-(-width // 768)) * (-(-height // 768))


def _gemini_part(part: Any, out: Rendering) -> None:
    if isinstance(part, str):
        out.texts.append(part)
        return
    text = field(part, "text")
    if isinstance(text, str):
        out.texts.append(text)
        return
    inline = field(part, "inline_data")
    if inline is not None:
        data = field(inline, "data")
        is_image = str(field(inline, "mime_type") or "").startswith("image/")
        size = size_from_base64(data) if is_image and isinstance(data, str) else None
        out.fixed += gemini_image_tokens(size)
        return
    if field(part, "file_data") is not None:
        out.fixed += GEMINI_UNKNOWN_MEDIA
        return
    for name in ("function_call", "function_response", "executable_code", "code_execution_result"):
        value = field(part, name)
        if value is not None:
            out.texts.append(_as_json(value))
            return
    if part is not None and not isinstance(part, (dict, str)) and not hasattr(part, "model_dump"):
        out.fixed += GEMINI_UNKNOWN_MEDIA  # an image object (PIL) the SDK uploads inline


def _gemini_content(content: Any) -> Rendering:
    """One ``contents`` entry: a string, a part, or a content with ``parts``."""
    out = Rendering()
    parts = field(content, "parts") if not isinstance(content, str) else None
    if parts is None:
        _gemini_part(content, out)
    else:
        for part in _iter(parts):
            _gemini_part(part, out)
    return out


# -- Bedrock Converse --------------------------------------------------------------------------
def _converse_blocks(content: Any, out: Rendering) -> None:
    """Converse content blocks: text, tool use and results as their JSON, images by size."""
    for block in _iter(content):
        if isinstance(block, str):
            out.texts.append(block)
            continue
        text = field(block, "text")
        if isinstance(text, str):
            out.texts.append(text)
        elif field(block, "image") is not None:
            data = field(field(field(block, "image"), "source"), "bytes")
            out.fixed += anthropic_image_tokens(image_size(data) if isinstance(data, (bytes, bytearray)) else None)
        elif field(block, "toolResult") is not None:
            result = field(block, "toolResult")
            out.texts.append(field(result, "toolUseId") or "")
            _converse_blocks(field(result, "content"), out)
            out.fixed += ANTHROPIC_PER_TOOL_RESULT
        elif field(block, "json") is not None:
            out.texts.append(_as_json(field(block, "json")))
        elif field(block, "toolUse") is not None:
            out.texts.append(_as_json(field(block, "toolUse")))
            out.fixed += ANTHROPIC_PER_TOOL_USE
        elif block is not None:  # documents, video: one unknown-size item
            out.fixed += ANTHROPIC_UNKNOWN_IMAGE


def _converse_message(message: Any) -> Rendering:
    out = Rendering(fixed=ANTHROPIC_PER_MESSAGE)
    _converse_blocks(field(message, "content"), out)
    return out


# -- requests -----------------------------------------------------------------------------
def render_message(api: Api, message: Any, model: str | None = None) -> Rendering:
    """One message or input item, whatever its API and shape: THE helper every caller uses."""
    if api == "anthropic_messages":
        return _anthropic_message(message)
    if api == "openai_responses":
        if isinstance(message, str):
            return Rendering(texts=[message], fixed=OPENAI_PER_MESSAGE)
        return _responses_item(message, model)
    if api == "gemini_contents":
        return _gemini_content(message)
    if api == "bedrock_converse":
        return _converse_message(message)
    if api == "openai_embeddings" or api == "openai_completions":  # plain text, no framing
        return Rendering(texts=[message if isinstance(message, str) else _as_json(message)])
    return _openai_chat_message(message, model)


def messages_of(request: Request) -> Sequence[Any]:
    """The request's messages as a sequence (a Responses string input is one item)."""
    messages = request.messages
    if type(messages) is list or type(messages) is tuple:  # the common case, before the ABC check
        return messages
    if isinstance(messages, (str, bytes)):
        return [messages]
    if messages is None:
        return []
    return messages if isinstance(messages, Sequence) else list(_iter(messages))


def after_compaction(api: Api, messages: Sequence[Any]) -> Sequence[Any]:
    """The input items the model is shown: on Responses, a compaction item stands for the
    conversation before it, which the API then drops (the items before it cost nothing)."""
    if api != "openai_responses":
        return messages
    for i in range(len(messages) - 1, -1, -1):
        if field(messages[i], "type") == "compaction":
            return messages[i:]
    return messages


def render_preamble(request: Request) -> Rendering:
    """Everything but the messages: system prompt, tool definitions, request framing."""
    out = Rendering()
    if request.api == "anthropic_messages":
        out.fixed += ANTHROPIC_REQUEST_OVERHEAD
        if request.system:
            _anthropic_blocks(request.system, out)
        out.add(_anthropic_tools(request.tools))
        if request.thinking:
            out.fixed += ANTHROPIC_THINKING_PROMPT
        if request.response_format is not None and _structured_schema(request.response_format):
            out.fixed += ANTHROPIC_STRUCTURED_OUTPUT_PROMPT  # not for effort or task budgets
    elif request.api in ("openai_chat", "openai_responses"):
        out.fixed += RESPONSES_REPLY_PRIMING if request.api == "openai_responses" else OPENAI_REPLY_PRIMING
        if openai_reasoning_model(request.model):  # their reply is primed shorter (measured)
            out.fixed -= REASONING_PRIMING_SAVING[request.api]
        if request.system:  # Responses `instructions`: a system message
            out.texts.append(request.system if isinstance(request.system, str) else _as_json(request.system))
            out.fixed += OPENAI_PER_MESSAGE
        tools = _openai_tools(request.tools)
        if tools.texts and request.api == "openai_chat" and openai_reasoning_model(request.model):
            tools.fixed += OPENAI_REASONING_CHAT_TOOLS
        out.add(tools)
    elif request.api == "gemini_contents":
        if request.system:
            out.add(_gemini_content(request.system))
        for tool in _iter(request.tools):
            out.texts.append(_as_json(tool))
    elif request.api == "bedrock_converse":
        out.fixed += ANTHROPIC_REQUEST_OVERHEAD
        _converse_blocks(request.system, out)
        for tool in _iter(request.tools):
            out.texts.append(_as_json(tool))
    if out.server:  # what server-run tools return: learnt per model and set of such tools
        out.guess(server_kind(request.tools), 0)
    if request.response_format is not None:
        schema = _structured_schema(request.response_format)
        if schema is not None:
            out.texts.append(schema)
            out.fixed += STRUCTURED_OUTPUT_OVERHEAD
    return out


def server_kind(tools: Any) -> str:
    """The kind a request's server-run tools are learnt under: ``server:`` and their types,
    sorted (what web search returns says nothing of what a tool search loads)."""
    kinds = {str(field(tool, "type")) for tool in _iter(tools)}
    return "server:" + "+".join(sorted(kinds - {"None", "function", "custom"}))


def openai_reasoning_model(model: str | None) -> bool:
    """An OpenAI reasoning model (the o-series and GPT-5 families, by name)."""
    name = (model or "").lower().rsplit("/", 1)[-1]
    return name.startswith(_REASONING_FAMILIES)


_REASONING_FAMILIES = ("o1", "o3", "o4", "gpt-5")


def _structured_schema(response_format: Any) -> str | None:
    """The JSON schema of a structured-output request (chat ``response_format`` or Responses
    ``text.format``), as the text the model is shown."""
    fmt = field(response_format, "format") or response_format  # Responses: {"format": {...}}
    if field(fmt, "type") != "json_schema":
        return None
    named = field(fmt, "json_schema") or fmt  # chat: {"json_schema": {name, schema}}; flat
    schema = field(named, "schema")
    if schema is None:
        return None
    if not isinstance(named, dict) or "name" not in named:  # Anthropic: the schema alone
        return _as_json(schema)
    description = field(named, "description")
    doc = f"// {description}\n" if description else ""
    return f"{field(named, 'name')}\n{doc}{_as_json(schema)}"


def render_request(request: Request) -> tuple[Rendering, list[Rendering]]:
    """The preamble and each message, rendered."""
    return render_preamble(request), [
        render_message(request.api, m, request.model) for m in messages_of(request)
    ]
