"""Gemini on gRPC: Vertex AI's ``PredictionService`` (``GenerateContent``,
``StreamGenerateContent``; ``v1`` and ``v1beta1``), the default transport of the
``google-cloud-aiplatform`` SDK (``vertexai.generative_models``).

The messages are the JSON API's (:mod:`.gemini`) in protobuf: each answer is viewed as the
decoded JSON the Gemini readers take (snake_case keys, zero counts left out, enums by name),
and the google-genai capture's readers do the rest (thoughts, cached content, tool-use
prompts, audio tokens, the last chunk's running totals)."""

from __future__ import annotations

from typing import Any

from ...request import Request, output_limit
from .gemini import GenerateAccumulator, generate_response, model_name
from ..lifecycle import Response
from .protobuf import Method, enum_name, plain, status

__all__ = ["METHODS"]


def _dict(message: Any) -> dict[str, Any]:
    """A message as decoded JSON, snake_case (protobuf is the SDK's, imported with it)."""
    from google.protobuf.json_format import MessageToDict

    return MessageToDict(message, preserving_proto_field_name=True)


def view(message: Any) -> dict[str, Any]:
    """A ``GenerateContentResponse`` as the Gemini readers take decoded JSON: its model,
    response id, usage, finish reasons and text (nothing else is read)."""
    pb = plain(message)
    candidates = []
    for candidate in pb.candidates:
        texts = [{"text": part.text} for part in candidate.content.parts if part.text]
        candidates.append(
            {"finish_reason": enum_name(candidate, "finish_reason"), "content": {"parts": texts}}
        )
    found: dict[str, Any] = {
        "model_version": pb.model_version or None,
        "response_id": pb.response_id or None,
        "candidates": candidates,
    }
    if pb.HasField("usage_metadata"):
        found["usage_metadata"] = _dict(pb.usage_metadata)
    return found


def _model(request: Any) -> str | None:
    """The model of the request's resource name (``.../publishers/google/models/gemini-x``)."""
    return model_name(plain(request).model or None)


def _request(request: Any, model: str | None) -> Request:
    """Contents, system instruction, tools and output limit of a ``GenerateContentRequest``."""
    pb = plain(request)
    config = pb.generation_config
    limit = config.max_output_tokens if config.HasField("max_output_tokens") else None
    return Request(
        "gemini_contents",
        model,
        [_dict(content) for content in pb.contents],
        system=_dict(pb.system_instruction) if pb.HasField("system_instruction") else None,
        tools=[_dict(tool) for tool in pb.tools],
        max_output_tokens=output_limit(limit),
    )


def _generated(message: Any) -> Response:
    return generate_response(view(message))


class _Stream(GenerateAccumulator):
    """``StreamGenerateContent``'s messages, each viewed as a decoded JSON chunk; a failed
    stream ends with its gRPC status."""

    def add(self, chunk: Any) -> bool:
        return super().add(view(chunk))

    def end_call(self, call: Any, how: str, error: Any = None, once: str | None = None) -> None:
        super().end_call(call, how, status(error), once)


def _stream(request: Any) -> _Stream:
    return _Stream({}, {})


_GENERATE = Method("gcp.vertex_ai", "chat", _model, _request, _generated)
_STREAM = Method("gcp.vertex_ai", "chat", _model, _request, _generated, _stream)

#: full method path -> method, for each API version the SDK speaks
METHODS = {
    f"/google.cloud.aiplatform.{version}.PredictionService/{name}": method
    for version in ("v1", "v1beta1")
    for name, method in (("GenerateContent", _GENERATE), ("StreamGenerateContent", _STREAM))
}
