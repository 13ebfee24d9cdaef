"""Exact token counts with tiktoken, for OpenAI model families, loaded off the hot path.

tiktoken fetches an encoding's BPE file on first use (then caches it, see tiktoken's
``TIKTOKEN_CACHE_DIR``). That fetch must never happen inside an agent's backend call, so
encodings are loaded by :func:`warm_up` (``instrument()`` runs it in a background thread)
and :func:`encoding_for` only returns encodings already loaded: until then, or when tiktoken
is absent or cannot load, estimates use the heuristic.
"""

from __future__ import annotations

import functools
import logging
import threading
from typing import Any

__all__ = ["encoding_for", "encoding_name", "warm_up"]

_log = logging.getLogger("otel_tokens")
_loaded: dict[str, Any] = {}
_failed: set[str] = set()
_lock = threading.Lock()

#: model-name prefix -> tiktoken encoding (newest families first; first match wins)
_FAMILIES: tuple[tuple[str, str], ...] = (
    ("gpt-5", "o200k_base"), ("gpt-4.1", "o200k_base"), ("gpt-4.5", "o200k_base"),
    ("gpt-4o", "o200k_base"), ("chatgpt-4o", "o200k_base"), ("gpt-oss", "o200k_base"),
    ("o1", "o200k_base"), ("o3", "o200k_base"), ("o4", "o200k_base"), ("codex", "o200k_base"),
    ("gpt-4", "cl100k_base"), ("gpt-3.5", "cl100k_base"), ("text-embedding-3", "cl100k_base"),
    ("text-embedding-ada-002", "cl100k_base"),
)  # fmt: skip


@functools.lru_cache(maxsize=1024)  # asked on every call, for a handful of models
def encoding_name(model: str | None) -> str | None:
    """The tiktoken encoding of an OpenAI model (by family prefix), or None."""
    if not model:
        return None
    name = model.lower().rsplit("/", 1)[-1]  # "openai/gpt-4o" and Azure deployments alike
    for prefix, encoding in _FAMILIES:
        if name.startswith(prefix):
            return encoding
    return None


def encoding_for(model: str | None) -> Any:
    """The loaded tiktoken encoding for ``model``, or None (never loads on this path)."""
    name = encoding_name(model)
    return _loaded.get(name) if name else None


def warm_up(names: tuple[str, ...] = ("o200k_base", "cl100k_base")) -> None:
    """Load tiktoken encodings (may read tiktoken's cache or download once); never raises."""
    try:
        import tiktoken
    except ImportError:
        return
    for name in names:
        with _lock:
            if name in _loaded or name in _failed:
                continue
        try:
            encoding = tiktoken.get_encoding(name)
        except Exception as exc:
            with _lock:
                _failed.add(name)
            _log.info("otel_tokens: tiktoken encoding %s unavailable (%s); heuristic estimates "
                      "are used instead", name, exc)  # fmt: skip
            continue
        with _lock:
            _loaded[name] = encoding


def exact_tokens(encoding: Any, text: str) -> int:
    """tiktoken's count of ``text`` (special-token text counted as ordinary text)."""
    return len(encoding.encode(text, disallowed_special=())) if text else 0
