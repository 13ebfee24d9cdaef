"""Gemini ``contents`` (``gemini_contents``: google-genai, the REST and gRPC APIs) rendered
for the estimate. The wire format's readers are ``capture/wire/gemini.py`` (and
``vertex_grpc.py``) and ``capture/sdk/google_genai.py``.
"""

from __future__ import annotations

from typing import Any

from ....request import Request
from ..images import size_from_base64
from ..rendering import Renderer, Rendering, as_json, field, items_of

__all__ = ["RENDERERS", "gemini_image_tokens"]

# Google's documented counts: an image is 258 tokens when both sides are at most 384 px, else
# 258 per 768x768 tile; audio 32 tokens a second, video 263; a PDF page counts as an image.
GEMINI_IMAGE_TILE = 258
GEMINI_UNKNOWN_MEDIA = (
    258  # media whose size is not read (a file URI, raw bytes of audio): one tile
)


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
            out.texts.append(as_json(value))
            return
    if part is not None and not isinstance(part, (dict, str)) and not hasattr(part, "model_dump"):
        out.fixed += GEMINI_UNKNOWN_MEDIA  # an image object (PIL) the SDK uploads inline


def _gemini_content(content: Any, model: str | None = None) -> Rendering:
    """One ``contents`` entry: a string, a part, or a content with ``parts``."""
    out = Rendering()
    parts = field(content, "parts") if not isinstance(content, str) else None
    if parts is None:
        _gemini_part(content, out)
    else:
        for part in items_of(parts):
            _gemini_part(part, out)
    return out


def _preamble(request: Request) -> Rendering:
    """The system instruction and the tool definitions (as their JSON)."""
    out = Rendering()
    if request.system:
        out.add(_gemini_content(request.system))
    for tool in items_of(request.tools):
        out.texts.append(as_json(tool))
    return out


#: the request shapes this module renders
RENDERERS = {"gemini_contents": Renderer(_gemini_content, _preamble)}
