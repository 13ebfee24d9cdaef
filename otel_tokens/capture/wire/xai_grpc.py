"""xAI's gRPC API (the ``xai-sdk`` client): ``xai_api.Chat/GetCompletion`` and its stream
``GetCompletionChunk``; a deferred completion's ``GetDeferredCompletion`` (``chat.defer``:
its usage once the answer is ``DONE``, the polls before it recording nothing); and
``xai_api.Image/GenerateImage`` (``image.sample``). The ``Embedder`` service's answer counts
embeddings, not tokens: not recorded.

Usage is the ``SamplingUsage`` message: input = ``prompt_tokens`` (cached prompt tokens,
``cached_prompt_text_tokens``, within it); output = ``completion_tokens`` + ``reasoning_tokens``
when the total counts them apart (as xAI's OpenAI-compatible API does, read by the same rule:
:func:`..compatible_usage.output_tokens`); reasoning = ``reasoning_tokens``. A stream's
messages carry the running usage: the last one wins. The cost xAI reports
(``cost_in_usd_ticks``, 1e-10 USD each) is the call's reported cost. The request is described
for the estimate as the OpenAI-shaped chat it is."""

from __future__ import annotations

from typing import Any

from ...request import Request
from ...usage import Usage
from .compatible import output_tokens
from ..lifecycle import Response
from ..wire.openai import chat_request
from ..stream import Accumulator
from .protobuf import Method, enum_name, status

__all__ = ["METHODS"]


def _model(request: Any) -> str | None:
    return request.model or None


def _role(message: Any) -> str:
    """``ROLE_USER`` -> ``user``."""
    name = enum_name(message, "role") or "ROLE_USER"
    return name.removeprefix("ROLE_").lower()


def _request(request: Any, model: str | None) -> Request:
    """The chat's messages (their text) and output limit, as an OpenAI-shaped chat."""
    messages = [
        {"role": _role(m), "content": "".join(part.text for part in m.content)}
        for m in request.messages
    ]
    limit = request.max_tokens if request.HasField("max_tokens") else None
    return chat_request({"model": model, "messages": messages, "max_tokens": limit})


def usage_of(usage: Any, model: str | None, response_id: str | None) -> Usage:
    """A ``SamplingUsage`` message's token counts."""
    prompt, completion = usage.prompt_tokens, usage.completion_tokens
    reasoning = usage.reasoning_tokens
    output = output_tokens(usage, prompt, completion, reasoning) if reasoning else completion
    return Usage(
        input_tokens=prompt,
        output_tokens=output,
        cache_read_tokens=usage.cached_prompt_text_tokens,
        reasoning_tokens=reasoning or None,
        cost_usd=_reported_cost(usage),
        model=model,
        response_id=response_id,
    )


_USD_PER_TICK = 1e-10


def _reported_cost(usage: Any) -> float | None:
    """The cost xAI reported (``cost_in_usd_ticks``), or None when it reported none."""
    if not usage.HasField("cost_in_usd_ticks"):
        return None
    return usage.cost_in_usd_ticks * _USD_PER_TICK


def _reasons(outputs: Any) -> list[str]:
    """Finish reasons by name (``REASON_STOP`` -> ``stop``)."""
    names = (enum_name(output, "finish_reason") for output in outputs)
    return [name.removeprefix("REASON_").lower() for name in names if name]


def _response(message: Any) -> Response:
    """A ``GetChatCompletionResponse``: usage, model, id and finish reasons."""
    model, rid = message.model or None, message.id or None
    usage = usage_of(message.usage, model, rid) if message.HasField("usage") else None
    return Response(usage, model, rid, tuple(_reasons(message.outputs)))


class _Stream(Accumulator):
    """``GetChatCompletionChunk`` messages: running usage (the last wins), model, id, text and
    finish reasons; a failed stream ends with its gRPC status."""

    def add(self, chunk: Any) -> bool:
        self.model = chunk.model or self.model
        self.response_id = chunk.id or self.response_id
        for output in chunk.outputs:
            if output.delta.content:
                self.text.append(output.delta.content)
        self.finish_reasons = _reasons(chunk.outputs) or self.finish_reasons
        if chunk.HasField("usage"):
            self.usage = usage_of(chunk.usage, self.model, self.response_id)
        return True

    def end_call(self, call: Any, how: str, error: Any = None, once: str | None = None) -> None:
        super().end_call(call, how, status(error), once)


def _stream(request: Any) -> _Stream:
    return _Stream()


def _no_model(request: Any) -> None:
    return None  # a poll names its request id only: the answer names the model


def _no_estimate(request: Any, model: str | None) -> None:
    return None  # a poll, or an image's prompt: not estimated


def _deferred(message: Any) -> Response:
    """A ``GetDeferredCompletionResponse``: the completion once ``DONE``; pending before; an
    ``EXPIRED`` or ``FAILED`` request ends with no usage, its status its finish reason."""
    state = enum_name(message, "status")
    if state == "DONE" and message.HasField("response"):
        return _response(message.response)
    if state == "PENDING":
        return Response(None, pending=True)
    return Response(None, finish_reasons=(state.lower(),) if state else ())


def _image(message: Any) -> Response:
    """An ``ImageResponse``: its model and usage (tokens, and the cost xAI reports)."""
    model = message.model or None
    usage = usage_of(message.usage, model, None) if message.HasField("usage") else None
    return Response(usage, model)


METHODS = {
    "/xai_api.Chat/GetCompletion": Method("x_ai", "chat", _model, _request, _response),
    "/xai_api.Chat/GetCompletionChunk": Method(
        "x_ai", "chat", _model, _request, _response, _stream
    ),
    "/xai_api.Chat/GetDeferredCompletion": Method(
        "x_ai", "chat", _no_model, _no_estimate, _deferred, polled=True, once="xai.deferred"
    ),
    "/xai_api.Image/GenerateImage": Method(
        "x_ai", "generate_content", _model, _no_estimate, _image
    ),
}
