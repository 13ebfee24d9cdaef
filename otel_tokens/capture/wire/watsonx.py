"""IBM watsonx.ai's REST API (the ``ibm-watsonx-ai`` SDK's ``ModelInference``; deployments'
``/ml/v1/deployments/{id}/text/...`` paths too): ``text/chat`` and ``text/chat_stream``
answer in OpenAI's chat shape (read by its readers, :mod:`.openai`) naming the model
``model_id``; ``text/generation``, ``text/generation_stream`` and ``text/embeddings`` count
``input_token_count`` and ``generated_token_count``. A generation stream's counts run: the
input count comes with the first event, the generated count grows to its total in the last
(the largest of each is the call's)."""

from __future__ import annotations

from typing import Any

from ...request import Request, output_limit
from ...usage import Usage
from ..lifecycle import Response
from ..wire.openai import chat_request, chat_response, ChatAccumulator
from ..stream import Accumulator
from .base import Wire, by_suffix

__all__ = ["SUFFIXES", "recognise"]


def _model(path: str, body: dict[str, Any]) -> str | None:
    model = body.get("model_id")
    return model if isinstance(model, str) else None


def _streamed(path: str, body: dict[str, Any]) -> bool:
    return path.endswith("_stream")


def _named(data: Any) -> Any:
    """An answer or event with its ``model_id`` as OpenAI's readers name it (``model``)."""
    if type(data) is dict and "model" not in data and "model_id" in data:
        return {**data, "model": data["model_id"]}
    return data


# -- chat: OpenAI's shape ----------------------------------------------------------------------
def _chat(body: dict[str, Any], model: str | None) -> Request:
    return chat_request({**body, "model": model})


_CHAT = Wire(
    "chat",
    _chat,
    lambda answer: chat_response(_named(answer)),
    lambda body: ChatAccumulator(body, body),
    streams=_streamed,
    model=_model,
    event=_named,
)


# -- text generation ---------------------------------------------------------------------------
def _generation(body: dict[str, Any], model: str | None) -> Request:
    parameters = body.get("parameters")
    limit = parameters.get("max_new_tokens") if isinstance(parameters, dict) else None
    text = body.get("input")
    return Request(
        "openai_completions",
        model,
        [text] if isinstance(text, str) else [],
        max_output_tokens=output_limit(limit),
    )


def _results(answer: Any) -> list[dict[str, Any]]:
    results = answer.get("results") if isinstance(answer, dict) else None
    return [r for r in results if isinstance(r, dict)] if isinstance(results, list) else []


def _generated(answer: Any) -> Response:
    """A generation's counts, summed over its results; its model and stop reasons."""
    results = _results(answer)
    model = _model("", answer) if isinstance(answer, dict) else None
    if not results:
        return Response(None, model)
    usage = Usage(
        input_tokens=sum(r.get("input_token_count") or 0 for r in results),
        output_tokens=sum(r.get("generated_token_count") or 0 for r in results),
        model=model,
    )
    reasons = tuple(str(r["stop_reason"]) for r in results if r.get("stop_reason"))
    return Response(usage, model, None, reasons)


class _GenerationStream(Accumulator):
    """Generation events: the largest input and generated counts seen, text and stop reason."""

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__()
        self._input = self._output = 0

    def add(self, event: Any) -> bool:
        self.model = _model("", event) if isinstance(event, dict) else self.model
        for result in _results(event):
            self._input = max(self._input, result.get("input_token_count") or 0)
            self._output = max(self._output, result.get("generated_token_count") or 0)
            text, reason = result.get("generated_text"), result.get("stop_reason")
            if isinstance(text, str) and text:
                self.text.append(text)
            if reason and reason != "not_finished":
                self.finish_reasons = [str(reason)]
            self.usage = Usage(
                input_tokens=self._input, output_tokens=self._output, model=self.model
            )
        return True


_GENERATION = Wire(
    "text_completion", _generation, _generated, _GenerationStream, streams=_streamed, model=_model
)


# -- embeddings --------------------------------------------------------------------------------
def _embed_request(body: dict[str, Any], model: str | None) -> Request:
    inputs = body.get("inputs")
    return Request(
        "openai_embeddings", model, inputs if isinstance(inputs, list) else [], max_output_tokens=0
    )


def _embedded(answer: Any) -> Response:
    model = _model("", answer) if isinstance(answer, dict) else None
    tokens = answer.get("input_token_count") if isinstance(answer, dict) else None
    return Response(Usage(input_tokens=tokens, model=model) if tokens is not None else None, model)


_EMBED = Wire(
    "embeddings", _embed_request, _embedded, model=_model, streams=lambda path, body: False
)

_ROUTES = (
    ("/text/chat", _CHAT),
    ("/text/chat_stream", _CHAT),
    ("/text/generation", _GENERATION),
    ("/text/generation_stream", _GENERATION),
    ("/text/embeddings", _EMBED),
)
SUFFIXES = tuple(suffix for suffix, _ in _ROUTES)


def recognise(path: str) -> Wire | None:
    """The watsonx.ai request a POST to ``path`` (under ``/ml/v1/``) is, or None."""
    if "/ml/v" not in path:
        return None
    return by_suffix(_ROUTES, path)
