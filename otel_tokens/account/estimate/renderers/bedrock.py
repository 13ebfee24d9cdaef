"""Bedrock Converse (``bedrock_converse``) rendered for the estimate, with Anthropic's framing
figures (Claude models answer most Converse calls). The reader is ``capture/sdk/bedrock.py``.
"""

from __future__ import annotations

from typing import Any

from ....request import Request
from ..images import ANTHROPIC_UNKNOWN_IMAGE, anthropic_image_tokens, image_size
from ..rendering import Renderer, Rendering, as_json, field, items_of
from .anthropic import (
    ANTHROPIC_PER_MESSAGE,
    ANTHROPIC_PER_TOOL_RESULT,
    ANTHROPIC_PER_TOOL_USE,
    ANTHROPIC_REQUEST_OVERHEAD,
)

__all__ = ["RENDERERS"]


def _converse_blocks(content: Any, out: Rendering) -> None:
    """Converse content blocks: text, tool use and results as their JSON, images by size."""
    for block in items_of(content):
        if isinstance(block, str):
            out.texts.append(block)
            continue
        text = field(block, "text")
        if isinstance(text, str):
            out.texts.append(text)
        elif field(block, "image") is not None:
            data = field(field(field(block, "image"), "source"), "bytes")
            out.fixed += anthropic_image_tokens(
                image_size(data) if isinstance(data, (bytes, bytearray)) else None
            )
        elif field(block, "toolResult") is not None:
            result = field(block, "toolResult")
            out.texts.append(field(result, "toolUseId") or "")
            _converse_blocks(field(result, "content"), out)
            out.fixed += ANTHROPIC_PER_TOOL_RESULT
        elif field(block, "json") is not None:
            out.texts.append(as_json(field(block, "json")))
        elif field(block, "toolUse") is not None:
            out.texts.append(as_json(field(block, "toolUse")))
            out.fixed += ANTHROPIC_PER_TOOL_USE
        elif block is not None:  # documents, video: one unknown-size item
            out.fixed += ANTHROPIC_UNKNOWN_IMAGE


def _converse_message(message: Any, model: str | None) -> Rendering:
    out = Rendering(fixed=ANTHROPIC_PER_MESSAGE)
    _converse_blocks(field(message, "content"), out)
    return out


def _preamble(request: Request) -> Rendering:
    """The request's framing, the system blocks and the tool definitions (as their JSON)."""
    out = Rendering(fixed=ANTHROPIC_REQUEST_OVERHEAD)
    _converse_blocks(request.system, out)
    for tool in items_of(request.tools):
        out.texts.append(as_json(tool))
    return out


#: the request shapes this module renders
RENDERERS = {"bedrock_converse": Renderer(_converse_message, _preamble)}
