"""Google's Gemini format: its readers (``generate_content`` requests, responses, stream
chunks, ``embed_content``) over the ``google-genai`` SDK's objects, shared by that SDK's capture
(:mod:`..sdk.google_genai`), Vertex AI over gRPC, Live sessions and the HTTP layer; and the
Gemini API on the wire (Vertex AI's ``publishers/google/models`` paths too):
``models/{model}:generateContent``, ``:streamGenerateContent`` (server-sent events with
``alt=sse``, else one JSON array) and ``:embedContent``. The JSON is camelCase
(``usageMetadata.promptTokenCount``): its keys are put in the SDK's spelling and read by the
same readers: thoughts, cached content, tool-use prompts and audio tokens."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from ...call import Call
from ...request import Request, output_limit
from ...usage import Billing, Usage
from ..lifecycle import Response, sdk_field
from ..stream import Accumulator
from .base import Wire, embed_request

__all__ = [
    "SUFFIXES",
    "GenerateAccumulator",
    "add_counts",
    "contents_request",
    "embed_content_request",
    "embed_content_response",
    "error_status",
    "generate_response",
    "model_name",
    "recognise",
]

SUFFIXES: tuple[str, ...] = ()  # recognised by the ``:method`` ending of the path instead

_get = sdk_field


# -- the request ---------------------------------------------------------------------------
def contents_request(kwargs: dict[str, Any]) -> Request:
    """``contents`` and the config's system instruction, tools and response schema."""
    config = kwargs.get("config")
    contents = kwargs.get("contents")
    if (
        contents is None
        or isinstance(contents, (str, dict))
        or not isinstance(contents, (list, tuple))
    ):
        contents = [] if contents is None else [contents]
    schema = _get(config, "response_json_schema") or _get(config, "response_schema")
    return Request(
        "gemini_contents",
        model_name(kwargs.get("model")),
        contents,
        system=_get(config, "system_instruction"),
        tools=_get(config, "tools") or (),
        response_format={"type": "json_schema", "schema": schema}
        if isinstance(schema, dict)
        else None,
        max_output_tokens=output_limit(_get(config, "max_output_tokens")),
    )


def model_name(model: Any) -> str | None:
    """The model id of ``models/gemini-x`` or a Vertex resource name (``.../models/gemini-x``)."""
    if not isinstance(model, str):
        return None
    return model.rsplit("/", 1)[-1] if "/" in model else model


# -- the response --------------------------------------------------------------------------
def _usage(
    meta: Any, model: str | None, response_id: str | None, final: bool = True
) -> Usage | None:
    """Usage of one ``usage_metadata`` (None: the response had none). Of a stream chunk
    before the last (not ``final``: no finish reason yet), an absent output count is not yet
    known (the stream may be cut before its last chunk), not 0."""
    if meta is None:
        return None
    prompt, tool = _get(meta, "prompt_token_count"), _get(meta, "tool_use_prompt_token_count")
    candidates, thoughts = _get(meta, "candidates_token_count"), _get(meta, "thoughts_token_count")
    if (
        prompt is None
        and candidates is None
        and thoughts is None
        and _get(meta, "total_token_count") is None
    ):
        return Usage(model=model, response_id=response_id)  # nothing reported
    known = final or candidates is not None or thoughts is not None
    output = add_counts(candidates, thoughts) if known else None
    return Usage(
        input_tokens=add_counts(prompt, tool),
        output_tokens=output,
        cache_read_tokens=_get(meta, "cached_content_token_count"),
        reasoning_tokens=thoughts,
        model=model,
        response_id=response_id,  # the provider: the call's (Gemini API or Vertex)
    )


def add_counts(a: Any, b: Any) -> Any:
    """a + b where an absent count (left out of the JSON) is 0; a non-count goes through as is
    (the usage record rejects it)."""
    if b is None:
        return 0 if a is None else a
    if a is None:
        return b
    if type(a) is int and type(b) is int:
        return a + b
    return a if type(a) is not int else b  # the invalid one, for the usage record to reject


def _audio(details: Any) -> Any:
    """Audio tokens of a modality breakdown (``[{modality: AUDIO, token_count: n}, ...]``)."""
    total = None
    for entry in details or ():
        modality = _get(entry, "modality")
        if str(getattr(modality, "value", modality)).upper() == "AUDIO":
            total = (total or 0) + (_get(entry, "token_count") or 0)
    return total


def _billing(meta: Any) -> Billing | None:
    if meta is None:
        return None
    heard = _audio(_get(meta, "prompt_tokens_details"))
    cached = _audio(_get(meta, "cache_tokens_details"))
    spoken = _audio(_get(meta, "candidates_tokens_details"))
    if not heard and not cached and not spoken:
        return None
    return Billing.of(
        None,
        {
            "input_audio_tokens": heard,
            "cache_audio_read_tokens": cached,
            "output_audio_tokens": spoken,
        },
    )


def _reason(value: Any) -> str | None:
    """A finish reason as the API names it, lower case (``STOP`` -> ``stop``)."""
    if value is None:
        return None
    value = getattr(value, "value", value)
    return str(value).lower() if value else None


def generate_response(result: Any) -> Response:
    model, rid = _get(result, "model_version"), _get(result, "response_id")
    reasons = tuple(
        r
        for r in (_reason(_get(c, "finish_reason")) for c in _get(result, "candidates") or ())
        if r
    )
    meta = _get(result, "usage_metadata")
    return Response(_usage(meta, model, rid), model, rid, reasons, _billing(meta))


def error_status(exc: BaseException) -> BaseException | str:
    """The SDK raises one ``ClientError``/``ServerError`` for every status: ``error.type`` is
    the HTTP status (``429``, ``503``), as the alerts on rate limits and server errors read it."""
    code = getattr(exc, "code", None)
    return str(code) if type(code) is int and 400 <= code <= 599 else exc


class GenerateAccumulator(Accumulator):
    """Stream chunks: running usage (the last chunk's wins), model, id, text, finish reasons."""

    def __init__(self, given: dict[str, Any], sent: dict[str, Any]) -> None:
        super().__init__()
        self._meta: Any = None  # the last usage_metadata

    def add(self, chunk: Any) -> bool:
        self.model = _get(chunk, "model_version") or self.model
        self.response_id = _get(chunk, "response_id") or self.response_id
        final = False
        for candidate in _get(chunk, "candidates") or ():
            for part in _get(_get(candidate, "content"), "parts") or ():
                text = _get(part, "text")
                if isinstance(text, str) and text:
                    self.text.append(text)
            reason = _reason(_get(candidate, "finish_reason"))
            if reason:
                self.finish_reasons, final = [reason], True
        meta = _get(chunk, "usage_metadata")
        if meta is not None:
            self.usage, self._meta = _usage(meta, self.model, self.response_id, final), meta
            self.billing = _billing(meta)
        return True

    def end_call(
        self,
        call: Call,
        how: str,
        error: BaseException | str | None = None,
        once: str | None = None,
    ) -> None:
        """A stream's request is sent at its first read: an HTTP failure ends it here. A
        stream read to its end without a finish reason: its last usage is the whole."""
        if isinstance(error, BaseException):
            error = error_status(error)
        elif (
            error is None
            and how == "exhausted"
            and self._meta is not None
            and not self.invalid
            and self.usage is not None
            and self.usage.output_tokens is None
        ):
            self.usage = _usage(self._meta, self.model, self.response_id)
        super().end_call(call, how, error, once)


# -- embeddings ------------------------------------------------------------------------------
def embed_content_request(kwargs: dict[str, Any]) -> Request:
    """The texts to embed (an embedding has no output: nothing to reserve for it)."""
    contents = kwargs.get("contents")
    if contents is None:
        contents = kwargs.get("batch_contents") or kwargs.get("content")
    if contents is None or not isinstance(contents, (list, tuple)):
        contents = [] if contents is None else [contents]
    return Request(
        "gemini_contents", model_name(kwargs.get("model")), list(contents), max_output_tokens=0
    )


def embed_content_response(result: Any) -> Response:
    """An ``EmbedContentResponse``: ``usage_metadata``'s prompt tokens, else the embeddings'
    own token counts (Vertex AI); Vertex's billable characters as a billed unit."""
    meta = _get(result, "usage_metadata")
    tokens = _get(meta, "prompt_token_count") if meta is not None else None
    if tokens is None:
        tokens = _statistics_tokens(_get(result, "embeddings") or ())
    characters = _get(_get(result, "metadata"), "billable_character_count")
    billing = Billing.of(None, {"input_characters": characters}) if characters else None
    return Response(None if tokens is None else Usage(input_tokens=tokens), billing=billing)


def _statistics_tokens(embeddings: Any) -> Any:
    """The sum of each embedding's ``statistics.token_count`` (None: none says it). The API
    sends it as a JSON number (``6.0``); the usage record holds it to the one rule."""
    total = None
    for embedding in embeddings:
        count = _whole(_get(_get(embedding, "statistics"), "token_count"))
        if count is not None:
            total = count if total is None else add_counts(total, count)
    return total


def _whole(count: Any) -> Any:
    """An integral float count as an int (``6.0`` -> 6); anything else as it is."""
    return int(count) if type(count) is float and count.is_integer() else count


# -- HTTP: a POST recognised by its path ----------------------------------------------------
@lru_cache(maxsize=512)
def _snake_key(key: str) -> str:
    """``promptTokenCount`` -> ``prompt_token_count``."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", key).lower()


def snake(value: Any) -> Any:
    """Decoded JSON with every key in snake_case, as google-genai's objects name them."""
    if type(value) is dict:
        return {_snake_key(k) if isinstance(k, str) else k: snake(v) for k, v in value.items()}
    if type(value) is list:
        return [snake(item) for item in value]
    return value


def _model(path: str, body: dict[str, Any]) -> str | None:
    """The model the path names (``.../models/gemini-2.5-flash:generateContent``)."""
    name = path.rpartition("/models/")[2].partition(":")[0]
    return name or None


def _request(body: dict[str, Any], model: str | None) -> Request:
    """``contents``, the system instruction, tools and the output limit of a request."""
    contents = body.get("contents")
    if not isinstance(contents, list):
        contents = [] if contents is None else [contents]
    config = body.get("generationConfig")
    limit = config.get("maxOutputTokens") if isinstance(config, dict) else None
    return Request(
        "gemini_contents",
        model,
        contents,
        system=body.get("systemInstruction"),
        tools=body.get("tools") or (),
        max_output_tokens=output_limit(limit),
    )


def _generated(body: Any) -> Response:
    return generate_response(snake(body))


def _streamed(path: str, body: dict[str, Any]) -> bool:
    return True


def _embed_request(body: dict[str, Any], model: str | None) -> Request:
    return embed_request(body.get("content"), model)


def _embedded(body: Any) -> Response:
    """An embedding: its input tokens when the answer reports them (``usageMetadata``)."""
    meta = snake(body).get("usage_metadata") if isinstance(body, dict) else None
    tokens = meta.get("prompt_token_count") if isinstance(meta, dict) else None
    return Response(Usage(input_tokens=tokens) if tokens is not None else None)


_GENERATE = Wire("chat", _request, _generated, model=_model, streams=lambda path, body: False)
_STREAM = Wire(
    "chat",
    _request,
    _generated,
    lambda body: GenerateAccumulator(body, body),
    streams=_streamed,
    model=_model,
    event=snake,
)
_EMBED = Wire(
    "embeddings", _embed_request, _embedded, model=_model, streams=lambda path, body: False
)
_METHODS = {"generateContent": _GENERATE, "streamGenerateContent": _STREAM, "embedContent": _EMBED}


def recognise(path: str) -> Wire | None:
    """The Gemini request a POST to ``path`` is, or None."""
    if "/models/" not in path:
        return None
    return _METHODS.get(path.rpartition(":")[2])
