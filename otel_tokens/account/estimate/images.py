"""Image input tokens: the providers' published formulas, from dimensions when readable.

* OpenAI, tile models (GPT-4o family): ``detail="low"`` costs 85 tokens; otherwise the image
  is scaled to fit 2048x2048, then its short side to 768, and costs 85 + 170 per 512-pixel
  tile (gpt-4o-mini 2833 + 5667, gpt-5 70 + 140, o1/o3 75 + 150); patch models (gpt-5-mini,
  gpt-5-nano, gpt-4.1-mini, gpt-4.1-nano, o4-mini): 32x32 patches, at most 1,536, times the
  model's multiplier.
* Anthropic: width x height / 750, after scaling the long side down to 1568 pixels.

Dimensions are read from the header of a base64 ``data:`` URL or base64 source (PNG, JPEG,
GIF, WebP). When they cannot be read (a remote URL, another format), the figure of a small
384x384 image stands in (:data:`OPENAI_UNKNOWN_IMAGE`, :data:`ANTHROPIC_UNKNOWN_IMAGE`), the
estimate says it is incomplete, and the estimator learns the model's actual tokens per such
image from completed calls (see ``Estimator.observe``).
"""

from __future__ import annotations

import base64
import binascii
import math
import struct

__all__ = [
    "ANTHROPIC_UNKNOWN_IMAGE",
    "OPENAI_UNKNOWN_IMAGE",
    "anthropic_image_tokens",
    "image_size",
    "openai_image_tokens",
]

OPENAI_UNKNOWN_IMAGE = 255  # gpt-4o's for 384x384 (other families: their own for that size)
ANTHROPIC_UNKNOWN_IMAGE = 197  # 384x384
_HEADER_CHARS = 87_384  # base64 of the first 64 KiB: enough to reach a JPEG's frame header


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from the first bytes of a PNG, JPEG, GIF or WebP file."""
    try:
        if data[:8] == b"\x89PNG\r\n\x1a\n":
            return struct.unpack(">II", data[16:24])
        if data[:6] in (b"GIF87a", b"GIF89a"):
            return struct.unpack("<HH", data[6:10])
        if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            chunk = data[12:16]
            if chunk == b"VP8X":
                w = int.from_bytes(data[24:27], "little") + 1
                h = int.from_bytes(data[27:30], "little") + 1
                return w, h
            if chunk == b"VP8L":
                bits = int.from_bytes(data[21:25], "little")
                return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
            if chunk == b"VP8 ":
                w, h = struct.unpack("<HH", data[26:30])
                return w & 0x3FFF, h & 0x3FFF
            return None
        if data[:2] == b"\xff\xd8":
            i = 2
            while i + 9 < len(data):
                if data[i] != 0xFF:
                    i += 1
                    continue
                marker = data[i + 1]
                if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7 or marker == 0xFF:
                    i += 1 if marker == 0xFF else 2
                    continue
                length = struct.unpack(">H", data[i + 2 : i + 4])[0]
                if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                    h, w = struct.unpack(">HH", data[i + 5 : i + 9])
                    return w, h
                i += 2 + length
    except (struct.error, IndexError, ValueError):
        return None
    return None


def size_from_base64(b64: str) -> tuple[int, int] | None:
    """Dimensions from base64 image data (a ``data:...;base64,`` URL or bare base64)."""
    if b64.startswith("data:"):
        _, _, b64 = b64.partition(",")
    head = b64[:_HEADER_CHARS]
    head = head[: len(head) - len(head) % 4]
    try:
        return image_size(base64.b64decode(head, validate=False))
    except (binascii.Error, ValueError):
        return None


#: OpenAI's published image costs by model family (name prefix, first match wins): patch
#: models count 32x32 patches (at most 1,536) times a multiplier; tile models a base plus a
#: figure per 512x512 tile. gpt-5-mini bills 1.2 a patch, not the published 1.62 (fitted on
#: half A's three requests with a 597x566 image, 135-145 tokens over; half B and held out:
#: 1.16x-1.25x before, issue 48)
_OPENAI_PATCHES = (
    ("gpt-5-mini", 1.2),
    ("gpt-5-nano", 2.46),
    ("gpt-4.1-mini", 1.62),
    ("gpt-4.1-nano", 2.46),
    ("o4-mini", 1.72),
)
_OPENAI_TILES = (
    ("gpt-4o-mini", (2833, 5667)),
    ("gpt-5", (70, 140)),
    ("o1", (75, 150)),
    ("o3", (75, 150)),
)
_OPENAI_DEFAULT_TILES = (85, 170)  # gpt-4o, gpt-4.1, gpt-4.5 and the rest
_UNKNOWN_SIDE = 384  # an image of unknown size: a small 384x384 one stands in (marked)


def _family(model: str | None, table: tuple) -> object:
    name = (model or "").lower().rsplit("/", 1)[-1]
    return next((value for prefix, value in table if name.startswith(prefix)), None)


def _patches(size: tuple[int, int], multiplier: float) -> int:
    """OpenAI's patch count: an image over 1,536 patches is shrunk to fit (whole patches
    across), then the count times the model's multiplier."""
    w, h = size
    patches = math.ceil(w / 32) * math.ceil(h / 32)
    if patches > 1536:
        shrink = math.sqrt(1536 * 32 * 32 / (w * h))
        shrink *= min(
            math.floor(w * shrink / 32) / (w * shrink / 32),
            math.floor(h * shrink / 32) / (h * shrink / 32),
        )
        patches = min(1536, math.ceil(w * shrink / 32) * math.ceil(h * shrink / 32))
    return math.ceil(patches * multiplier)


def openai_image_tokens(size: tuple[int, int] | None, detail: str | None, model: str | None) -> int:
    """Tokens OpenAI bills for one image input (an unknown size: a 384x384 image's)."""
    size = size if size is not None else (_UNKNOWN_SIDE, _UNKNOWN_SIDE)
    multiplier = _family(model, _OPENAI_PATCHES)
    if isinstance(multiplier, float):
        return _patches(size, multiplier) if size[0] > 0 and size[1] > 0 else 1
    base, per_tile = _family(model, _OPENAI_TILES) or _OPENAI_DEFAULT_TILES  # type: ignore[misc]
    w, h = size
    if detail == "low" or w <= 0 or h <= 0:
        return base
    scale = min(1.0, 2048 / max(w, h))
    w, h = w * scale, h * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    return base + per_tile * math.ceil(w / 512) * math.ceil(h / 512)


def anthropic_image_tokens(size: tuple[int, int] | None) -> int:
    """Tokens Anthropic bills for one image input."""
    if size is None:
        return ANTHROPIC_UNKNOWN_IMAGE
    w, h = size
    scale = min(1.0, 1568 / max(w, h, 1))
    return max(1, round(w * scale * h * scale / 750))
