"""Audio and documents in a request: never counted as text; their tokens from what a header
(or a bounded scan) says, else a documented per-item figure.

* Audio (OpenAI ``input_audio``): ``OPENAI_AUDIO_PER_SECOND`` tokens a second (OpenAI bills
  user audio at about one token per 100 ms); the duration from a WAV header (byte rate and
  data size), else from the size at 128 kbit/s (MP3 and the like).
* PDFs: the page count from the first and last 64 KiB of the file (a linearized PDF's page
  count, or the page tree's ``/Count``), never decoding the rest; Anthropic counts each page
  as text plus an image, "typically 1,500 to 3,000 tokens" a page (``ANTHROPIC_PER_PDF_PAGE``
  is the middle).
* Anything else (a file id, a URL, a PDF whose page count is not in those ends): a per-item
  figure, and the estimate is marked incomplete.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from typing import Any

__all__ = ["audio_tokens", "decoded_size", "inline_text", "pdf_pages"]

OPENAI_AUDIO_PER_SECOND = 10
_MP3_BYTES_PER_SECOND = 16_000  # 128 kbit/s
OPENAI_FILE_ITEM = 64  # a file or document whose content cannot be read here (measured)
OPENAI_PER_PDF_PAGE = 220  # a PDF page's text and image (measured on a simple page)
#: inline files read as text, beside ``text/*``
TEXT_TYPES = frozenset(
    (
        "application/json",
        "application/xml",
        "application/x-yaml",
        "application/javascript",
        "application/x-python",
    )
)
_MAX_TEXT = 4 << 20  # base64 characters of an inline text file decoded to count it (3 MiB)
ANTHROPIC_PER_PDF_PAGE = 2_250
_WINDOW = 87_384  # base64 characters of 64 KiB: what is decoded at each end of a PDF
_LINEARIZED = re.compile(rb"/Linearized[^>]*?/N\s+(\d+)")
_COUNT = re.compile(rb"/Type\s*/Pages\b[^>]*?/Count\s+(\d+)|/Count\s+(\d+)[^>]*?/Type\s*/Pages\b")


def _data(b64: str) -> str:
    return b64.partition(",")[2] if b64.startswith("data:") else b64


def decoded_size(b64: str) -> int:
    """Bytes that base64 text decodes to (without decoding it)."""
    data = _data(b64).rstrip()
    return max(0, len(data) * 3 // 4 - (len(data) - len(data.rstrip("="))))


def audio_tokens(b64: str, fmt: str | None) -> int:
    """Input tokens of base64 audio: its duration, read from a WAV header or its size."""
    data = _data(b64)
    size = decoded_size(data)
    seconds = size / _MP3_BYTES_PER_SECOND
    if (fmt or "").lower() in ("wav", "wave", "") and len(data) >= 64:
        try:
            head = base64.b64decode(data[:64])
            if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
                byte_rate = struct.unpack("<I", head[28:32])[0]
                if byte_rate:
                    seconds = max(0, size - 44) / byte_rate
        except (binascii.Error, ValueError, struct.error):
            pass
    return max(1, round(seconds * OPENAI_AUDIO_PER_SECOND))


def inline_text(b64: Any) -> str | None:
    """The text of a base64 ``data:`` text file (None: not base64 text, or too large to
    decode on the call's path)."""
    if not isinstance(b64, str):
        return None
    data = _data(b64).strip()
    if len(data) > _MAX_TEXT:
        return None
    try:
        return base64.b64decode(data, validate=False).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return None


def _slice(data: str, start: int, end: int) -> bytes:
    """Decoded bytes of base64 characters [start, end), aligned to whole 4-character groups."""
    start, end = start - start % 4, end - end % 4
    try:
        return base64.b64decode(data[start:end], validate=False)
    except (binascii.Error, ValueError):
        return b""


def pdf_pages(b64: str) -> int | None:
    """Pages of a base64 PDF from its first and last 64 KiB only (never the whole file): a
    linearized PDF's ``/N`` in its first object, else the page tree's ``/Count`` (its root
    has the largest), which most writers put near the start or the end. None: not found."""
    data = _data(b64).rstrip()
    head = _slice(data, 0, _WINDOW)
    if not head.startswith(b"%PDF"):
        return None
    found = _LINEARIZED.search(head)
    if found:
        return int(found.group(1))
    tail = _slice(data, max(0, len(data) - _WINDOW), len(data)) if len(data) > _WINDOW else b""
    counts = [int(a or b) for chunk in (head, tail) for a, b in _COUNT.findall(chunk)]
    return max(counts) if counts else None
