"""What ``instrument()`` installs for the ``openai`` SDK: the patch table, nothing per call.

The methods are wrapped as described in :mod:`.openai_sdk`, which holds the per-call
machinery and is imported at the first patched call (start-up cost).
"""

from __future__ import annotations

from typing import Any

from .patching import SdkPatches, deferred

__all__ = ["DEPENDENCIES", "install", "uninstall"]

DEPENDENCIES: tuple[str, ...] = ("openai >= 1.40, < 4",)
_SDK = "otel_tokens.capture.openai_sdk"
_CHAT, _RESPONSES = deferred(_SDK, "chat"), deferred(_SDK, "responses")
_EMBEDDINGS = deferred(_SDK, "embeddings")

_PATCHES = SdkPatches("openai", [
    ("openai.resources.chat.completions", "Completions", "create", _CHAT),
    ("openai.resources.chat.completions", "AsyncCompletions", "create", _CHAT),
    ("openai.resources.chat.completions", "Completions", "parse", _CHAT),
    ("openai.resources.chat.completions", "AsyncCompletions", "parse", _CHAT),
    ("openai.resources.responses", "Responses", "create", _RESPONSES),
    ("openai.resources.responses", "AsyncResponses", "create", _RESPONSES),
    ("openai.resources.responses", "Responses", "parse", _RESPONSES),
    ("openai.resources.responses", "AsyncResponses", "parse", _RESPONSES),
    ("openai.resources.embeddings", "Embeddings", "create", _EMBEDDINGS),
    ("openai.resources.embeddings", "AsyncEmbeddings", "create", _EMBEDDINGS),
])  # fmt: skip


def install(**_: Any) -> bool:
    """Patch the SDK now if it is imported, else as soon as the application imports it."""
    return _PATCHES.install()


def uninstall() -> None:
    """Restore the original SDK methods (identity checks hold)."""
    _PATCHES.uninstall()
