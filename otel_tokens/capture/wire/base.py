"""The shape every wire format module describes its requests with (:class:`Wire`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from ...request import Request
from ...usage import Billing
from ..lifecycle import Response
from ..stream import Accumulator

__all__ = ["Wire", "asked_to_stream", "by_suffix", "embed_request", "model_in_body", "same"]


def asked_to_stream(path: str, body: dict[str, Any]) -> bool:
    """The request asks for a stream (``"stream": true``, as OpenAI, Anthropic and Cohere
    spell it)."""
    return body.get("stream") is True


def model_in_body(path: str, body: dict[str, Any]) -> str | None:
    """The request body's ``model`` (None: not a string)."""
    model = body.get("model")
    return model if isinstance(model, str) else None


def embed_request(given: Any, model: str | None) -> Request:
    """What an embedding request's estimate reads: its input (one text, or a list of them;
    nothing: none), and no output tokens to reserve."""
    if isinstance(given, list):
        inputs = given
    else:
        inputs = [] if given is None or given == "" else [given]
    return Request("openai_embeddings", model, inputs, max_output_tokens=0)


def same(event: Any) -> Any:
    """A stream event as decoded (most formats need no change before their accumulator)."""
    return event


class Wire(NamedTuple):
    """One recognised request shape.

    ``operation``: ``gen_ai.operation.name``; ``request(body, model)``: what the estimate
    reads; ``response(body)``: a whole answer (decoded JSON) read; ``accumulator(body)``: a
    reader of stream events (None: the API does not stream); ``streams(path, body)``: the
    request asks for a stream; ``model(path, body)``: the requested model; ``event(data)``:
    a decoded stream event as the accumulator reads it; ``accepts(path, body)``: the body is
    one of this format's requests (None: the path alone tells, as for most formats); ``headers(
    answer, headers)``: a whole answer completed by what its HTTP headers say (None: they say
    nothing of usage); ``plain(event)``: a stream event,
    as sent, says nothing the call needs but output text (kept unread, read only when the
    stream ends without usage, or without usage read after it; None: every event is read as
    it arrives); ``form``: the request may be a multipart form (images edited, audio
    transcribed), its small text fields then read as the body (:mod:`..http.forms`);
    ``unread(content_type)``: an answer of that type carries no usage (audio, a plain-text
    transcript): its bytes are not read, the call ends with its usage unknown (None: every
    answer is read); ``billed(body)``: what the request is billed by where its model is
    priced by that alone (:class:`~otel_tokens.usage.Billing`'s ``counted``: speech's
    characters; None: nothing counted from the request).
    """

    operation: str
    request: Callable[[dict[str, Any], str | None], Request | None]
    response: Callable[[Any], Response]
    accumulator: Callable[[dict[str, Any]], Accumulator] | None = None
    streams: Callable[[str, dict[str, Any]], bool] = asked_to_stream
    model: Callable[[str, dict[str, Any]], str | None] = model_in_body
    event: Callable[[Any], Any] = same
    accepts: Callable[[str, dict[str, Any]], bool] | None = None
    headers: Callable[[Response, Any], Response] | None = None
    plain: Callable[[bytes], bool] | None = None
    form: bool = False
    unread: Callable[[str], bool] | None = None
    billed: Callable[[dict[str, Any]], Billing | None] | None = None


def by_suffix(routes: Any, path: str) -> Wire | None:
    """The wire of the first ``(suffix, wire)`` pair of ``routes`` that ``path`` ends with."""
    for suffix, wire in routes:
        if path.endswith(suffix):
            return wire
    return None
