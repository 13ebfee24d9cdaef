"""What ``instrument()`` installs for the HTTP layer: ``send`` of httpx's ``Client`` and
``AsyncClient`` (and of httpx2's, the fork newer SDKs use), of ``requests.Session`` and
aiohttp's ``ClientSession._request``, nothing per call; and huggingface_hub's
``text_generation``, whose request is marked as text generation while it runs (:mod:`.hub`).

Every POST those clients send to a model API's wire path is recorded by :mod:`.layer`
(:mod:`.requests`, :mod:`.aiohttp`; imported at the first send), unless an SDK
capture records it already; anything else passes after a test of its method and path.
"""

from __future__ import annotations

from typing import Any

from ..patching import Backend, SdkPatches, deferred

__all__ = ["BACKEND", "DEPENDENCIES", "install", "uninstall"]

BACKEND = Backend(
    "HttpInstrumentor",
    "Any client on httpx (or httpx2), requests or aiohttp posting to a model API's wire format: "
    "OpenAI (images and audio too), Anthropic, Gemini, Cohere, Ollama (sync, async, streams).",
    apis=(
        "openai_chat",
        "openai_responses",
        "openai_embeddings",
        "openai_completions",
        "anthropic_messages",
        "gemini_contents",
    ),
)
DEPENDENCIES: tuple[str, ...] = BACKEND.requirements
_LAYER = "otel_tokens.capture.http.layer"


def _client_patches(package: str) -> SdkPatches:
    """``Client.send`` and ``AsyncClient.send`` of httpx or its fork httpx2 (the same code)."""
    factory = deferred(_LAYER, package)
    return SdkPatches(
        package,
        [
            (f"{package}._client", "Client", "send", factory),
            (f"{package}._client", "AsyncClient", "send", factory),
        ],
    )


_PATCHES = (
    _client_patches("httpx"),
    _client_patches("httpx2"),
    SdkPatches(
        "requests",
        [
            (
                "requests.sessions",
                "Session",
                "send",
                deferred("otel_tokens.capture.http.requests", "send"),
            )
        ],
    ),
    SdkPatches(
        "aiohttp",
        [
            (
                "aiohttp.client",
                "ClientSession",
                "_request",
                deferred("otel_tokens.capture.http.aiohttp", "request"),
            )
        ],
    ),
    SdkPatches(
        "huggingface_hub",
        [
            (
                "huggingface_hub.inference._client",
                "InferenceClient",
                "text_generation",
                deferred("otel_tokens.capture.http.hub", "text_generation"),
            ),
            (
                "huggingface_hub.inference._generated._async_client",
                "AsyncInferenceClient",
                "text_generation",
                deferred("otel_tokens.capture.http.hub", "text_generation"),
            ),
        ],
    ),
)


def install(**_: Any) -> bool:
    """Patch each client library now if it is imported, else when the application imports it;
    False when none is installed."""
    found = [patches.install() for patches in _PATCHES]
    return any(found)


def uninstall() -> None:
    """Restore the original ``send`` methods."""
    for patches in _PATCHES:
        patches.uninstall()
