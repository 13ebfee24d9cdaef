"""What ``instrument()`` installs for the ``anthropic`` SDK: the patch table, nothing per call.

The methods are wrapped as described in :mod:`.anthropic`, which holds the per-call
machinery and is imported at the first patched call (start-up cost).
"""

from __future__ import annotations

import sys
from typing import Any

from ..patching import Backend, SdkPatches, deferred

__all__ = ["BACKEND", "DEPENDENCIES", "install", "uninstall"]

BACKEND = Backend(
    "AnthropicInstrumentor",
    "The ``anthropic`` SDK: ``messages.create``/``parse``/``stream``, beta included; "
    "Message Batches results.",
    requirements=("anthropic >= 0.40, < 3",),
    extra="anthropic",
    apis=("anthropic_messages",),
)
DEPENDENCIES: tuple[str, ...] = BACKEND.requirements
_SDK = "otel_tokens.capture.sdk.anthropic"
_CALL, _STREAM = deferred(_SDK, "call"), deferred(_SDK, "stream")
#: a Message Batch's results read: each succeeded row a call at batch prices (.batch_results)
_RESULTS = deferred("otel_tokens.capture.sdk.batch_results", "results")

#: (module, class, method, wrapper factory)
_TARGETS: tuple[tuple[str, str, str, Any], ...] = (
    ("anthropic.resources.messages", "Messages", "create", _CALL),
    ("anthropic.resources.messages", "AsyncMessages", "create", _CALL),
    ("anthropic.resources.messages", "Messages", "parse", _CALL),
    ("anthropic.resources.messages", "AsyncMessages", "parse", _CALL),
    ("anthropic.resources.messages", "Messages", "stream", _STREAM),
    ("anthropic.resources.messages", "AsyncMessages", "stream", _STREAM),
    ("anthropic.resources.beta.messages", "Messages", "create", _CALL),
    ("anthropic.resources.beta.messages", "AsyncMessages", "create", _CALL),
    ("anthropic.resources.beta.messages", "Messages", "parse", _CALL),
    ("anthropic.resources.beta.messages", "AsyncMessages", "parse", _CALL),
    ("anthropic.resources.beta.messages", "Messages", "stream", _STREAM),
    ("anthropic.resources.beta.messages", "AsyncMessages", "stream", _STREAM),
    ("anthropic.resources.messages.batches", "Batches", "results", _RESULTS),
    ("anthropic.resources.messages.batches", "AsyncBatches", "results", _RESULTS),
    ("anthropic.resources.beta.messages.batches", "Batches", "results", _RESULTS),
    ("anthropic.resources.beta.messages.batches", "AsyncBatches", "results", _RESULTS),
)


def _forget_twins() -> None:
    """Drop the untraced client copies (only the per-call module has made any)."""
    sdk = sys.modules.get(_SDK)
    if sdk is not None:
        sdk._twins.clear()


_PATCHES = SdkPatches("anthropic", _TARGETS, on_uninstall=_forget_twins)


def install(**_: Any) -> bool:
    """Patch the SDK now if it is imported, else as soon as the application imports it."""
    return _PATCHES.install()


def uninstall() -> None:
    """Restore the original SDK methods (identity checks hold)."""
    _PATCHES.uninstall()
