"""What ``instrument()`` installs for the gRPC layer: the methods of grpc's channels that make
a callable per gRPC method (``unary_unary``, ``unary_stream``; sync and ``grpc.aio``),
nothing per call.

A callable for a model API's method (Vertex AI's ``GenerateContent``, xAI's
``GetCompletion``, their streams) is wrapped by :mod:`.layer` (imported at the first
callable made), any other returned as made.
"""

from __future__ import annotations

from typing import Any

from ..patching import Backend, SdkPatches, deferred

__all__ = ["BACKEND", "DEPENDENCIES", "install", "uninstall"]

BACKEND = Backend(
    "GrpcInstrumentor",
    "Any client on grpc calling a model API's gRPC method: Vertex AI's GenerateContent "
    "(vertexai), xAI's Chat (xai-sdk) (sync, async, streams).",
    apis=("gemini_contents", "openai_chat"),
)
DEPENDENCIES: tuple[str, ...] = BACKEND.requirements
_LAYER = "otel_tokens.capture.grpc.layer"

_PATCHES = SdkPatches(
    "grpc",
    [
        ("grpc._channel", "Channel", "unary_unary", deferred(_LAYER, "unary_unary")),
        ("grpc._channel", "Channel", "unary_stream", deferred(_LAYER, "unary_stream")),
        ("grpc.aio._channel", "Channel", "unary_unary", deferred(_LAYER, "aio_unary_unary")),
        ("grpc.aio._channel", "Channel", "unary_stream", deferred(_LAYER, "aio_unary_stream")),
    ],
)


def install(**_: Any) -> bool:
    """Patch grpc's channels now if grpc is imported, else when the application imports it;
    False when grpc is not installed."""
    return _PATCHES.install()


def uninstall() -> None:
    """Restore the original channel methods."""
    _PATCHES.uninstall()
