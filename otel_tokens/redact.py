"""Secrets out of anything otel_tokens prints: passwords in URLs and connection strings.

Settings, faults, ``check`` and ``report`` show URLs and error texts that may carry a
database or collector password (``postgresql://user:secret@host/db``, ``?password=...``,
libpq's ``password=...``): :func:`redact` replaces each password by ``***`` wherever it stands
in a text, whatever the URL's shape (no user, an ``@`` inside the password, a scheme such as
``postgresql+psycopg``). It errs on the side of hiding: when a URL's credentials cannot be told
from its host, the host is hidden too.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

__all__ = ["MASK", "redact"]

MASK = "***"

# scheme://user:password@host: the password runs to the last "@" of the URL (an unescaped "@"
# in a password is common, and hiding part of a host is better than showing a password)
_USERINFO = re.compile(r"(?P<pre>[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@?#]*:)\S*@")
# password=... as a URL query parameter or a libpq keyword (quoted values included)
_KEYWORD = re.compile(
    r"(?P<pre>\b\w*pass(?:word|wd)?\s*=\s*)(?:'(?:[^'\\]|\\.)*'?|[^\s&;,'\"]*)", re.IGNORECASE
)


def redact(text: object, url: str | None = None) -> str:
    """``text`` (any value, shown by its ``str``) with every password replaced by ``***``;
    with ``url``, its password too wherever ``text`` quotes it alone (a driver's message)."""
    shown = text if isinstance(text, str) else str(text)
    for secret in _passwords(url) if url else ():
        shown = shown.replace(secret, MASK)
    if ":" not in shown and "=" not in shown:
        return shown
    shown = _USERINFO.sub(lambda m: f"{m['pre']}{MASK}@", shown)
    return _KEYWORD.sub(lambda m: f"{m['pre']}{MASK}", shown)


def _passwords(url: str) -> set[str]:
    """``url``'s password as written and unquoted (none: an empty set)."""
    try:
        password = urlsplit(url).password
    except ValueError:
        return set()
    return {password, unquote(password)} - {""} if password else set()
