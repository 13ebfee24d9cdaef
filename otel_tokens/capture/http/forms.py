"""The small text fields (``model``, ``stream``) of a multipart form a program sends: an
image to edit, audio to transcribe. Read only where it is cheap and safe: the fields the
client library holds (httpx's ``DataField``, aiohttp's ``FormData``), or the bytes the program
already built (requests encodes a form whole), found by the form's boundary in one pass
that copies nothing but those short values; a file's bytes are never read. Anything else
(a streamed upload, a form not built yet): no fields, the model then unknown.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["aiohttp_form", "from_bytes", "httpx_form"]

_MAX_FIELDS = 32  # text fields kept (a form of many small fields: the first ones)
_MAX_VALUE = 256  # characters of a text field's value kept (a model's name, a flag)
_MAX_PARTS = 64  # parts looked at in a form's bytes
_MAX_HEAD = 1024  # bytes of a part's headers
_BOUNDARY = re.compile(r'boundary="?([^";,\s]+)"?', re.IGNORECASE)
_NAME = re.compile(rb';\s*name="([^"]*)"', re.IGNORECASE)


def _kept(fields: dict[str, str], name: Any, value: Any) -> None:
    """Keep ``name``'s value when both are short text (bytes decoded)."""
    if isinstance(value, (bytes, bytearray)) and len(value) <= _MAX_VALUE:
        value = bytes(value).decode("utf-8", "replace")
    if (
        isinstance(name, str)
        and isinstance(value, str)
        and len(value) <= _MAX_VALUE
        and len(fields) < _MAX_FIELDS
    ):
        fields.setdefault(name, value)


def _boundary(content_type: Any) -> bytes | None:
    """A multipart content type's boundary, or None (not a multipart form)."""
    if not isinstance(content_type, str) or "multipart/form-data" not in content_type.lower():
        return None
    found = _BOUNDARY.search(content_type)
    return found.group(1).encode("latin-1", "replace") if found else None


def from_bytes(content_type: Any, body: Any) -> dict[str, str] | None:
    """The text fields of a multipart form sent as ``body`` (bytes), or None (not one)."""
    boundary = _boundary(content_type)
    if boundary is None or not isinstance(body, (bytes, bytearray)):
        return None
    delimiter, fields = b"--" + boundary, {}
    at = body.find(delimiter)
    for _ in range(_MAX_PARTS):
        if at < 0 or body[at + len(delimiter) : at + len(delimiter) + 2] == b"--":
            break  # no more parts, or the closing delimiter
        start = at + len(delimiter)
        head_end = body.find(b"\r\n\r\n", start, start + _MAX_HEAD)
        end = body.find(b"\r\n" + delimiter, head_end + 4) if head_end >= 0 else -1
        if end < 0:
            break
        head = bytes(body[start:head_end])
        name = _NAME.search(head)
        if name is not None and b"filename" not in head.lower():
            value = body[head_end + 4 : min(end, head_end + 4 + _MAX_VALUE + 1)]
            _kept(fields, name.group(1).decode("utf-8", "replace"), value)
        at = end + 2
    return fields


def httpx_form(request: Any) -> dict[str, str] | None:
    """The text fields of an httpx request's multipart form (its ``DataField`` items; the
    bytes when they have been read), or None (not a form)."""
    stream = getattr(request, "stream", None)
    parts = getattr(stream, "fields", None)
    if type(stream).__name__ != "MultipartStream" or not isinstance(parts, list):
        try:
            content = request.content
        except Exception:  # a streamed upload, not read: nothing to read here
            return None
        return from_bytes(request.headers.get("content-type"), content)
    fields: dict[str, str] = {}
    for part in parts:
        if type(part).__name__ == "DataField":
            _kept(fields, getattr(part, "name", None), getattr(part, "value", None))
    return fields


def aiohttp_form(data: Any, headers: Any) -> dict[str, str] | None:
    """The text fields of an aiohttp request's form (``data=``: ``FormData``, a dict, or
    multipart bytes with their content type in ``headers``), or None (not a form)."""
    if isinstance(data, dict):
        fields: dict[str, str] = {}
        for name, value in data.items():
            _kept(fields, name, value)
        return fields
    parts = getattr(data, "_fields", None)
    if type(data).__name__ == "FormData" and isinstance(parts, list):
        fields = {}
        for options, _, value in parts:
            if "filename" not in options:
                _kept(fields, options.get("name"), value)
        return fields
    if isinstance(data, (bytes, bytearray)) and headers is not None:
        kind = next((v for k, v in dict(headers).items() if k.lower() == "content-type"), None)
        return from_bytes(kind, data)
    return None
