"""Audio and documents in a request: never counted as text; their tokens from what a header
(or a bounded scan) says, else a documented per-item figure.

* Audio (OpenAI ``input_audio``): ``OPENAI_AUDIO_PER_SECOND`` tokens a second (OpenAI bills
  user audio at about one token per 100 ms); the duration from a WAV header (byte rate and
  data size), else from the size at 128 kbit/s (MP3 and the like).
* PDFs: the page count by scanning for page objects in the decoded file (files up to
  ``PDF_SCAN_LIMIT`` bytes); Anthropic counts each page as text plus an image, "typically
  1,500 to 3,000 tokens" a page (``ANTHROPIC_PER_PDF_PAGE`` is the middle).
* Anything else (a file id, a URL, a file too large to scan): a per-item figure, and the
  estimate is marked incomplete.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct

__all__ = ["audio_tokens", "pdf_pages", "decoded_size"]

OPENAI_AUDIO_PER_SECOND = 10
_MP3_BYTES_PER_SECOND = 16_000  # 128 kbit/s
OPENAI_FILE_ITEM = 64  # a file or document whose content cannot be read here (measured)
ANTHROPIC_PER_PDF_PAGE = 2_250
PDF_SCAN_LIMIT = 8_000_000  # bytes of PDF decoded to count pages; larger files: per item
_PAGE = re.compile(rb"/Type\s*/Page(?!s)")


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


def pdf_pages(b64: str) -> int | None:
    """Pages of a base64 PDF (None: not a PDF, or too large to scan here)."""
    data = _data(b64)
    if decoded_size(data) > PDF_SCAN_LIMIT:
        return None
    try:
        raw = base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return None
    if not raw.startswith(b"%PDF"):
        return None
    return max(1, len(_PAGE.findall(raw)))
