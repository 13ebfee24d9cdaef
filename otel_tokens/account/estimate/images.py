"""Image input tokens: the providers' published formulas, from dimensions when readable.

* OpenAI (GPT-4o family): ``detail="low"`` costs 85 tokens; otherwise the image is scaled to
  fit 2048x2048, then its short side to 768, and costs 85 + 170 per 512-pixel tile
  (gpt-4o-mini: 2833 + 5667 per tile).
* Anthropic: width x height / 750, after scaling the long side down to 1568 pixels.

Dimensions are read from the header of a base64 ``data:`` URL or base64 source (PNG, JPEG,
GIF, WebP). When they cannot be read (a remote URL, another format), the figure of a small
512x512 image stands in (:data:`OPENAI_UNKNOWN_IMAGE`, :data:`ANTHROPIC_UNKNOWN_IMAGE`), the
estimate says it is incomplete, and the estimator learns the model's actual tokens per such
image from completed calls (see ``Estimator.observe``).
"""

from __future__ import annotations

import base64
import binascii
import math
import struct

__all__ = [
    "ANTHROPIC_UNKNOWN_IMAGE", "OPENAI_UNKNOWN_IMAGE", "anthropic_image_tokens",
    "image_size", "openai_image_tokens",
]  # fmt: skip

OPENAI_UNKNOWN_IMAGE = 255
ANTHROPIC_UNKNOWN_IMAGE = 350
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


def openai_image_tokens(size: tuple[int, int] | None, detail: str | None, model: str | None) -> int:
    """Tokens OpenAI bills for one image input."""
    mini = bool(model and "mini" in model and "4o" in model)
    base, per_tile = (2833, 5667) if mini else (85, 170)
    if detail == "low":
        return base
    if size is None:
        return OPENAI_UNKNOWN_IMAGE if not mini else base + per_tile
    w, h = size
    if w <= 0 or h <= 0:
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
