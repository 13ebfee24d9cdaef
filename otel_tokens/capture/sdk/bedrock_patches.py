"""What ``instrument()`` installs for AWS Bedrock (boto3/botocore): the patch table, nothing per call.

botocore makes its client methods at run time; every one goes through
``BaseClient._make_api_call``, which is wrapped once; :mod:`.bedrock` (imported at the
first call) records the ``bedrock-runtime`` operations and lets every other call through.
"""

from __future__ import annotations

from typing import Any

from ..patching import Backend, SdkPatches, deferred

__all__ = ["BACKEND", "DEPENDENCIES", "install", "uninstall"]

BACKEND = Backend(
    "BedrockInstrumentor",
    "AWS Bedrock through boto3/botocore: ``converse``, ``converse_stream``, ``invoke_model`` and ``invoke_model_with_response_stream`` of ``bedrock-runtime``.",
    requirements=("botocore >= 1.34",),
    extra="bedrock",
    apis=("bedrock_converse", "anthropic_messages"),
)
DEPENDENCIES: tuple[str, ...] = BACKEND.requirements

_PATCHES = SdkPatches(
    "botocore",
    (
        (
            "botocore.client",
            "BaseClient",
            "_make_api_call",
            deferred("otel_tokens.capture.sdk.bedrock", "api_call"),
        ),
    ),
)


def install(**_: Any) -> bool:
    """Patch botocore now if it is imported, else as soon as the application imports it."""
    return _PATCHES.install()


def uninstall() -> None:
    """Restore botocore's method (identity checks hold)."""
    _PATCHES.uninstall()
