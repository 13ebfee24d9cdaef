"""What every request renderer shares: the :class:`Rendering` it makes, the
:class:`Renderer` entry a wire format registers (``renderers/``), and the helpers that read
the API's own shapes (a dict or an SDK object, read alike with :func:`field`).

A rendering is a list of texts to tokenize plus tokens known without a tokenizer (framing,
images); the tokenizer (exact or heuristic) is applied by the caller.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any, NamedTuple

from ...request import Request

__all__ = ["Renderer", "Rendering", "as_json", "field", "items_of", "structured_schema"]


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


class Renderer(NamedTuple):
    """How one request shape (``Request.api``) is rendered, as its wire format registers it.

    ``message``: one message or input item, with the request's model; ``preamble``: the
    system prompt, tool definitions and request framing (None: the shape has none);
    ``shown``: the messages the model is shown, when the API drops some (None: all).
    """

    message: Callable[[Any, str | None], Rendering]
    preamble: Callable[[Request], Rendering] | None = None
    shown: Callable[[Sequence[Any]], Sequence[Any]] | None = None


def field(obj: Any, name: str, default: Any = None) -> Any:
    """``obj[name]`` for mappings, ``obj.name`` for SDK objects (pydantic models and the like)."""
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def as_json(value: Any) -> str:
    """Compact JSON of a dict/list/SDK object (tool arguments, schemas, ``input`` blocks)."""
    if isinstance(value, str):
        return value
    if hasattr(value, "model_dump"):
        value = value.model_dump(exclude_none=True)
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def items_of(value: Any) -> Iterable[Any]:
    """The items of a list-like value (nothing for None, a string, bytes or a mapping)."""
    if value is None or isinstance(value, (str, bytes, dict)):
        return ()
    try:
        return iter(value)
    except TypeError:
        return ()


def structured_schema(response_format: Any) -> str | None:
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
        return as_json(schema)
    description = field(named, "description")
    doc = f"// {description}\n" if description else ""
    return f"{field(named, 'name')}\n{doc}{as_json(schema)}"
