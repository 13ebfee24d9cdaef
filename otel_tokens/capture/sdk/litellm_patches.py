"""What ``instrument()`` installs for litellm: the patch table, nothing per call.

``litellm.completion``, ``text_completion``, ``embedding`` and ``responses`` and their
``a*`` twins (stream or not, any provider) are wrapped where applications call them, the
package's own names. litellm's own HTTP clients' ``post``
(how it calls Anthropic, Gemini, Bedrock, Cohere...) is watched only for the usage the provider
sent (:mod:`.litellm_http`); SDKs litellm calls are their own patches'. The per-call machinery
is :mod:`.litellm_sdk`, imported at the first call.
"""

from __future__ import annotations

from typing import Any

from ..patching import Backend, SdkPatches, deferred

__all__ = ["BACKEND", "DEPENDENCIES", "install", "uninstall"]

BACKEND = Backend(
    "LiteLLMInstrumentor",
    "litellm: ``completion``, ``text_completion``, ``embedding``, ``responses`` (and their ``a*`` twins), stream or not, any provider.",
    requirements=("litellm >= 1.40",),
    extra="litellm",
    apis=("openai_chat", "openai_completions", "openai_embeddings", "openai_responses"),
)
DEPENDENCIES: tuple[str, ...] = BACKEND.requirements
_SDK = "otel_tokens.capture.sdk.litellm"
_CALL, _TEXT = deferred(_SDK, "completion"), deferred(_SDK, "text_completion")
_EMBED, _RESPONSES = deferred(_SDK, "embedding"), deferred(_SDK, "responses")
_HTTP, _POST = (
    "litellm.llms.custom_httpx.http_handler",
    deferred("otel_tokens.capture.sdk.litellm_http", "post"),
)

_PATCHES = SdkPatches(
    "litellm",
    (
        ("litellm", "", "completion", _CALL),
        ("litellm", "", "acompletion", _CALL),
        ("litellm", "", "text_completion", _TEXT),
        ("litellm", "", "atext_completion", _TEXT),
        ("litellm", "", "embedding", _EMBED),
        ("litellm", "", "aembedding", _EMBED),
        ("litellm", "", "responses", _RESPONSES),
        ("litellm", "", "aresponses", _RESPONSES),
        (_HTTP, "HTTPHandler", "post", _POST),  # the provider's answer as sent (see .litellm_http)
        (_HTTP, "AsyncHTTPHandler", "post", _POST),
    ),
)


def install(**_: Any) -> bool:
    """Patch litellm now if it is imported, else as soon as the application imports it."""
    return _PATCHES.install()


def uninstall() -> None:
    """Restore litellm's functions (identity checks hold)."""
    _PATCHES.uninstall()
