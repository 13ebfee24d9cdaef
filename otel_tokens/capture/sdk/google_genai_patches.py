"""What ``instrument()`` installs for the ``google-genai`` SDK: the patch table, nothing per call.

Each billed request is patched, not the public method around it: ``Models.generate_content``
may send several requests (automatic function calling, continuation hops), each billed and
each reported with its own ``usage_metadata``; ``_generate_content`` and
``_generate_content_stream`` (and their ``AsyncModels`` twins behind ``client.aio``) send one
each; ``_embed_content`` sends one ``embed_content`` request. The per-call machinery is :mod:`.google_genai_sdk`, imported at the first call.
"""

from __future__ import annotations

from typing import Any

from ..patching import Backend, SdkPatches, deferred

__all__ = ["BACKEND", "DEPENDENCIES", "install", "uninstall"]

BACKEND = Backend(
    "GoogleGenAIInstrumentor",
    "The ``google-genai`` SDK: ``models.generate_content``, ``generate_content_stream`` and "
    "``embed_content``, sync and async, Gemini API and Vertex AI (each billed request); "
    "``aio.live`` sessions.",
    requirements=("google-genai >= 1.0, < 4",),
    extra="google-genai",
    apis=("gemini_contents",),
)
DEPENDENCIES: tuple[str, ...] = BACKEND.requirements
_SDK = "otel_tokens.capture.sdk.google_genai"
_CALL, _STREAM = deferred(_SDK, "generate"), deferred(_SDK, "generate_stream")
_EMBED = deferred(_SDK, "embed")
_LIVE = "otel_tokens.capture.websocket.google_genai_live"

#: (module, class, method, wrapper factory)
_TARGETS: tuple[tuple[str, str, str, Any], ...] = (
    ("google.genai.models", "Models", "_generate_content", _CALL),
    ("google.genai.models", "AsyncModels", "_generate_content", _CALL),
    ("google.genai.models", "Models", "_generate_content_stream", _STREAM),
    ("google.genai.models", "AsyncModels", "_generate_content_stream", _STREAM),
    ("google.genai.models", "Models", "_embed_content", _EMBED),
    ("google.genai.models", "AsyncModels", "_embed_content", _EMBED),
    # every response and chunk, as sent, where the SDK makes its object of it (see .sent)
    (
        "google.genai.types",
        "GenerateContentResponse",
        "_from_response",
        deferred("otel_tokens.capture.sent", "genai"),
    ),
    # Live sessions (websockets): each message with usage_metadata a call (see .google_genai_live)
    ("google.genai.live", "AsyncLive", "connect", deferred(_LIVE, "connect")),
    ("google.genai.live", "AsyncSession", "_receive", deferred(_LIVE, "receive")),
    # ... each message's JSON as sent, before the SDK makes numbers of its counts
    ("google.genai._live_converters", "", "_LiveServerMessage_from_mldev", deferred(_LIVE, "sent")),
    (
        "google.genai._live_converters",
        "",
        "_LiveServerMessage_from_vertex",
        deferred(_LIVE, "sent"),
    ),
)

_PATCHES = SdkPatches("google.genai", _TARGETS)


def install(**_: Any) -> bool:
    """Patch the SDK now if it is imported, else as soon as the application imports it."""
    return _PATCHES.install()


def uninstall() -> None:
    """Restore the original SDK methods (identity checks hold)."""
    _PATCHES.uninstall()
