"""The ``openai`` SDK's image and speech endpoints (sync and async), on the one path of
:mod:`.lifecycle` with the client, provider and cost header read as in :mod:`.openai`; the
readers are the wire format's (:mod:`..wire.openai_media`), which the HTTP layer shares.

* ``images.generate`` and ``images.edit``: the GPT image models report ``usage`` (input
  tokens, text and image ones apart in ``input_tokens_details``; output tokens, image and
  text apart in ``output_tokens_details`` where given), recorded as reported, the image
  tokens as billed units priced at the model's image rates (genai-prices'
  ``input_image_tokens``, ``output_image_tokens``). A streamed generation or edit
  (``stream=True``, ``partial_images``) reports it once, on its ``*.completed`` event; the
  partial images pass through unread. DALL-E 2 and 3 report none: the call is recorded with
  its usage unknown (``usage_missing``), never 0. ``images.create_variation`` (DALL-E 2
  only) likewise.
* ``audio.speech.create``: the audio comes back with no usage (its bytes are never read
  here): tts-1 and tts-1-hd, priced per input character, are billed by the length of
  ``input`` (:func:`..wire.openai_media.speech_characters`); a token-priced model's usage
  stays unknown (marked). With ``stream_format="sse"`` the ``speech.audio.done`` event
  reports the tokens: read from the body the SDK has read, or, through
  ``with_raw_response`` and ``with_streaming_response``, from the events as the program
  reads them (:mod:`.raw`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from ...call import Call
from ..lifecycle import (
    Operation,
    Response,
    _open,
    _read,
    async_wrapper,
    checked,
    operation_wrapper,
    sdk_field,
    stop_with,
    sync_wrapper,
)
from .openai import _client, _costed, _provider, _run_request, _server
from ..raw import RAW_TYPES, AsyncRawResponseProxy, RawEnding, RawResponseProxy
from ..sent import note_header_cost
from ..wire.openai_media import (
    ImagesAccumulator,
    SpeechAccumulator,
    images_response,
    speech_characters,
    speech_event,
    tokens,
)

__all__ = ["wrapper"]

_get = sdk_field


def _speech_response(result: Any) -> Response:
    """The speech body the SDK read: events (``stream_format="sse"``) report usage on
    ``speech.audio.done``; audio bytes report none."""
    response = getattr(result, "response", None)
    if type(result).__name__ != "HttpxBinaryResponseContent" or response is None:
        return Response(None)  # a body not read yet (with_streaming_response): not read here
    kind = response.headers.get("content-type") or ""
    if "text/event-stream" not in kind:
        return Response(None)  # audio: no usage
    event = speech_event(response.content)
    usage = _get(event, "usage") if event is not None else None
    return Response(None if usage is None else tokens(usage))


def _as_events(kwargs: dict[str, Any]) -> bool:
    """Speech streamed as server-sent events (``stream_format="sse"``), its usage in them."""
    return kwargs.get("stream_format") == "sse"


_STREAMED = ("StreamedBinaryAPIResponse", "AsyncStreamedBinaryAPIResponse")


def _speech_read(op: Operation, is_async: bool, call: Call, result: Any, context: tuple) -> Any:
    """A speech answer: audio ends the call with its usage unknown, unread (a raw response
    too); events are read as the program reads them (``with_streaming_response``'s body
    too, which the one path leaves to the SDK's raw types); else the one path's reading."""
    name = type(result).__name__
    if not call.stream and (name in RAW_TYPES or name in _STREAMED):
        call.stop(None)  # audio: no usage in it
        return result
    if name not in _STREAMED:
        return _read(op, is_async, call, result, context)
    if op.raw_headers is not None:
        op.raw_headers(result)
    finish = partial(_finish, op, call)
    ending = RawEnding(call, finish, SpeechAccumulator(), is_async, None)
    proxy = AsyncRawResponseProxy if name.startswith("Async") else RawResponseProxy
    return proxy(result, ending)


def _finish(op: Operation, call: Call, parsed: Any) -> None:
    stop_with(call, checked(op.response(parsed), parsed))


#: every openai operation's: its client read in one step, a raw response's cost header read
_OPENAI: dict[str, Any] = {"client": _client, "raw_headers": note_header_cost}
_OPERATIONS = {
    "images": Operation(
        "generate_content",
        _provider,
        _server,
        _run_request,
        _costed(images_response),
        ImagesAccumulator,
        **_OPENAI,
    ),
    "speech": Operation(
        "generate_content",
        _provider,
        _server,
        _run_request,
        _costed(_speech_response),
        SpeechAccumulator,
        is_stream=_as_events,
        billed=speech_characters,
        **_OPENAI,
    ),
}


def wrapper(name: str, is_async: bool) -> Callable[..., Any]:
    """The wrapt wrapper of one operation (:mod:`.openai_patches` installs it)."""
    op = _OPERATIONS[name]
    if name != "speech":
        return operation_wrapper(op, is_async)
    wrap = async_wrapper if is_async else sync_wrapper
    return wrap(
        partial(_open, op, is_async), partial(_speech_read, op, is_async), op.failure, sdk=True
    )
