"""Text Generation Inference's native API on the wire (what ``huggingface_hub``'s
``InferenceClient.text_generation`` speaks): ``POST /generate`` (one JSON answer),
``/generate_stream`` (server-sent events, one per token), and ``POST /`` or Hugging Face's
serverless ``/models/{model_id}``, which stream when the body says ``"stream": true``.

A request is ``{"inputs": "...", "parameters": {...}}``. The root and ``/models/`` paths take
other tasks too (summarization, classification, embeddings) with the same body: only a body
that asks for a stream or names a text-generation parameter (``max_new_tokens``, ``details``,
...) is taken for text generation there, or one sent while huggingface_hub's
``text_generation`` runs (:data:`asked`: ``text_generation(prompt)`` sends what
summarization sends).

Usage: a whole answer's ``x-prompt-tokens`` and ``x-generated-tokens`` headers (TGI sends them
on every generation), else ``details.prefill`` (input, with ``decoder_input_details``) and
``details.generated_tokens``. A stream's headers are sent before any token, without counts:
its last event's ``details`` has ``generated_tokens`` (and ``input_length`` in TGI 2.x);
without ``details`` the output is its token events, one each, and the input is unknown (left
None, never 0). A local TGI names no model: the model is the path's, or the body's."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from ...request import Request, output_limit
from ...usage import Usage, check_token_text
from ..lifecycle import Response
from ..lifecycle import sdk_field as _get
from ..stream import Accumulator
from .base import Wire

__all__ = ["SUFFIXES", "asked", "recognise"]

#: set while huggingface_hub's ``text_generation`` runs (:mod:`..http.hub`): a request it
#: sends to a path other tasks share is text generation, whatever its parameters
asked: ContextVar[bool] = ContextVar("otel_tokens_text_generation_asked", default=False)

#: parameters only text generation takes (other tasks' bodies at ``/`` and ``/models/`` differ)
_GENERATION_PARAMETERS = frozenset(
    (
        "max_new_tokens",
        "details",
        "decoder_input_details",
        "return_full_text",
        "best_of",
        "top_n_tokens",
        "watermark",
        "grammar",
        "adapter_id",
        "typical_p",
        "repetition_penalty",
        "frequency_penalty",
    )
)


# -- the request -------------------------------------------------------------------------------
def _parameters(body: dict[str, Any]) -> dict[str, Any]:
    parameters = body.get("parameters")
    return parameters if isinstance(parameters, dict) else {}


def _native(path: str, body: dict[str, Any]) -> bool:
    """``/generate``, ``/generate_stream``: TGI's own routes, a prompt in ``inputs`` (Cohere's
    legacy ``/v1/generate`` sends ``prompt``)."""
    return isinstance(body.get("inputs"), str)


def _shared(path: str, body: dict[str, Any]) -> bool:
    """``/``, ``/models/{id}``: a prompt, and a stream asked for, a text-generation parameter
    given or huggingface_hub's ``text_generation`` sending it (:data:`asked`)."""
    if not _native(path, body):
        return False
    if body.get("stream") is True or asked.get():
        return True
    return not _GENERATION_PARAMETERS.isdisjoint(_parameters(body))


def _model(path: str, body: dict[str, Any]) -> str | None:
    """The model a ``/models/{id}`` path names, else the body's ``model`` (a local TGI serves
    one model and names it nowhere)."""
    _, found, after = path.partition("/models/")
    if found and after:
        return after
    model = body.get("model")
    return model if isinstance(model, str) else None


def _request(body: dict[str, Any], model: str | None) -> Request:
    inputs = body.get("inputs")
    return Request(
        "openai_completions",
        model,
        [inputs] if isinstance(inputs, str) else [],
        max_output_tokens=output_limit(_parameters(body).get("max_new_tokens")),
    )


# -- the answer --------------------------------------------------------------------------------
def _reasons(details: Any) -> tuple[str, ...]:
    reason = _get(details, "finish_reason")
    return (reason,) if isinstance(reason, str) and reason else ()


def _prefill(details: Any) -> int | None:
    """Input tokens as ``decoder_input_details`` lists them (an empty list: not asked for)."""
    prefill = _get(details, "prefill")
    return len(prefill) if isinstance(prefill, list) and prefill else None


def _answer(body: Any) -> Response:
    """A whole answer (``generated_text``, ``details`` when asked for)."""
    details = _get(body, "details")
    usage = Usage(input_tokens=_prefill(details), output_tokens=_get(details, "generated_tokens"))
    return Response(usage, None, None, _reasons(details))


def _with_headers(answer: Response, headers: Any) -> Response:
    """The answer's usage with the counts TGI's headers give: the input from
    ``x-prompt-tokens``, the output from ``details``, else ``x-generated-tokens``."""
    prompt = check_token_text("x-prompt-tokens", headers.get("x-prompt-tokens"))
    generated = check_token_text("x-generated-tokens", headers.get("x-generated-tokens"))
    usage = answer.usage or Usage()
    if prompt is None and generated is None:
        return answer
    return answer._replace(
        usage=usage.replace(
            input_tokens=prompt if prompt is not None else usage.input_tokens,
            output_tokens=usage.output_tokens if usage.output_tokens is not None else generated,
        )
    )


class _Accumulator(Accumulator):
    """Stream events: one token each (its text kept, unless special), the last one with
    ``generated_text`` and, when asked for, ``details``. Items of a JSON array answer
    (``[{"generated_text": ...}]``, as the serverless API sends) are read as whole answers."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens = 0

    def add(self, event: Any) -> bool:
        token = _get(event, "token")
        if not isinstance(token, dict):
            self._whole(event)
            return True
        self.tokens += 1
        text = token.get("text")
        if isinstance(text, str) and text and token.get("special") is not True:
            self.text.append(text)
        details = _get(event, "details")
        if isinstance(details, dict):
            given = details.get("input_length")  # TGI 2.x; some builds say prompt_tokens
            self.usage = Usage(
                input_tokens=given if given is not None else details.get("prompt_tokens"),
                output_tokens=details.get("generated_tokens"),
            )
            self.finish_reasons = list(_reasons(details))
        elif _get(event, "generated_text") is not None:  # the last event, no details
            self.usage = Usage(output_tokens=self.tokens)
        return True

    def _whole(self, item: Any) -> None:
        if not isinstance(_get(item, "details"), dict):
            return
        answer = _answer(item)
        self.usage, self.finish_reasons = answer.usage, list(answer.finish_reasons)


def _accumulator(body: dict[str, Any]) -> Accumulator:
    return _Accumulator()


_GENERATE = Wire(
    "text_completion",
    _request,
    _answer,
    _accumulator,
    streams=lambda path, body: False,
    model=_model,
    accepts=_native,
    headers=_with_headers,
)
_STREAM = _GENERATE._replace(streams=lambda path, body: True)
_SHARED = _GENERATE._replace(streams=lambda path, body: body.get("stream") is True, accepts=_shared)

SUFFIXES = ("/generate", "/generate_stream", "/")


def _serverless(path: str) -> bool:
    """``/models/{id}`` or ``/models/{org}/{name}``, and nothing under it (Azure AI's
    ``/models/chat/completions`` is OpenAI's, recognised before; a Hub id has no ``:``, a
    Gemini method has)."""
    _, found, after = path.partition("/models/")
    if not found or not after or after.endswith("/") or ":" in after:
        return False
    return after.count("/") <= 1


def recognise(path: str) -> Wire | None:
    """The TGI request a POST to ``path`` may be (its body decides, :attr:`Wire.accepts`),
    or None."""
    if path.endswith("/generate_stream"):
        return _STREAM
    if path.endswith("/generate"):
        return _GENERATE
    if path == "/" or _serverless(path):
        return _SHARED
    return None
