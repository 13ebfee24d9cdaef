"""The ``openai`` SDK's image and speech endpoints (sync and async), on the one path of
:mod:`.lifecycle` with the client, provider and cost header read as in :mod:`.openai_sdk`.

* ``images.generate`` and ``images.edit``: the GPT image models report ``usage`` (input
  tokens, text and image ones apart in ``input_tokens_details``; output tokens, image and
  text apart in ``output_tokens_details`` where given), recorded as reported, the image
  tokens as billed units priced at the model's image rates (genai-prices'
  ``input_image_tokens``, ``output_image_tokens``). A streamed generation or edit
  (``stream=True``, ``partial_images``) reports it once, on its ``*.completed`` event; the
  partial images pass through unread. DALL-E 2 and 3 report none: the call is recorded with
  its usage unknown (``usage_missing``), never 0. ``images.create_variation`` (DALL-E 2
  only) likewise.
* ``audio.speech.create``: the audio comes back with no usage (unknown, marked; its bytes
  are never read here); with ``stream_format="sse"`` the ``speech.audio.done`` event reports
  the tokens: read from the body the SDK has read, or, through ``with_raw_response`` and
  ``with_streaming_response``, from the events as the program reads them (:mod:`.raw`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from ...call import Call
from ...usage import Billing, Usage
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
from ..raw import RAW_TYPES, AsyncRawResponseProxy, RawEnding, RawResponseProxy, _loads
from ..sent import note_header_cost
from ..stream import Accumulator

__all__ = ["wrapper"]

_get = sdk_field


# -- images ------------------------------------------------------------------------------------
def _tokens(usage: Any) -> Usage:
    """Input and output tokens of a ``usage`` block (images, speech)."""
    return Usage(input_tokens=_get(usage, "input_tokens"), output_tokens=_get(usage, "output_tokens"))


def _image_usage(usage: Any) -> tuple[Usage | None, Billing | None]:
    """(usage, image tokens billed apart) of an image endpoint's ``usage`` block."""
    if usage is None:
        return None, None
    found = _tokens(usage)
    heard = _get(_get(usage, "input_tokens_details"), "image_tokens")
    drawn = _get(_get(usage, "output_tokens_details"), "image_tokens")
    return found, Billing.of(None, {"input_image_tokens": heard, "output_image_tokens": drawn})


def _svg_usage(usage: Any) -> Usage | None:
    """An SVG generation's own usage (its model named, reasoning inside output)."""
    if usage is None:
        return None
    return Usage(input_tokens=_get(usage, "input_tokens"),
                 output_tokens=_get(usage, "output_tokens"),
                 reasoning_tokens=_get(usage, "reasoning_tokens"), model=_get(usage, "model"))  # fmt: skip


def _images_response(result: Any) -> Response:
    """An ``ImagesResponse``: its token usage (GPT image models), else none (DALL-E)."""
    usage, billing = _image_usage(_get(result, "usage"))
    if usage is None:
        usage = _svg_usage(_get(result, "svg_usage"))
    return Response(usage, usage.model if usage is not None else None, billing=billing)


class _ImagesAccumulator(Accumulator):
    """A streamed generation or edit: the usage of its ``*.completed`` event (the last one
    seen, should several come); partial images carry none."""

    def __init__(self, given: dict[str, Any], sent: dict[str, Any]) -> None:
        super().__init__()

    def add(self, event: Any) -> bool:
        kind = _get(event, "type")
        if isinstance(kind, str) and kind.endswith(".completed"):
            self.usage, self.billing = _image_usage(_get(event, "usage"))
            self.finish_reasons = ["completed"]
        return True


# -- speech ------------------------------------------------------------------------------------
_SPEECH_DONE = "speech.audio.done"
_DONE = _SPEECH_DONE.encode()


def _speech_events(body: bytes) -> Any:
    """The ``data:`` payload of the last ``speech.audio.done`` event in a server-sent-events
    body (None: none)."""
    found = None
    for line in body.splitlines():
        if line.startswith(b"data:") and _DONE in line:
            try:
                event = _loads(line[5:].strip())
            except ValueError:
                continue  # not JSON: not the event
            if _get(event, "type") == _SPEECH_DONE:
                found = event
    return found


def _speech_response(result: Any) -> Response:
    """The speech body the SDK read: events (``stream_format="sse"``) report usage on
    ``speech.audio.done``; audio bytes report none."""
    response = getattr(result, "response", None)
    if type(result).__name__ != "HttpxBinaryResponseContent" or response is None:
        return Response(None)  # a body not read yet (with_streaming_response): not read here
    kind = response.headers.get("content-type") or ""
    if "text/event-stream" not in kind:
        return Response(None)  # audio: no usage
    event = _speech_events(response.content)
    usage = _get(event, "usage") if event is not None else None
    return Response(None if usage is None else _tokens(usage))


class _SpeechAccumulator(Accumulator):
    """Speech events read as the program reads them: the usage of ``speech.audio.done``."""

    def __init__(self, given: dict[str, Any], sent: dict[str, Any]) -> None:
        super().__init__()

    def add(self, event: Any) -> bool:
        if _get(event, "type") == _SPEECH_DONE:
            usage = _get(event, "usage")
            if usage is not None:
                self.usage = _tokens(usage)
        return True


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
    ending = RawEnding(call, finish, _SpeechAccumulator({}, {}), is_async, None)
    proxy = AsyncRawResponseProxy if name.startswith("Async") else RawResponseProxy
    return proxy(result, ending)


def _finish(op: Operation, call: Call, parsed: Any) -> None:
    stop_with(call, checked(op.response(parsed), parsed))


#: every openai operation's: its client read in one step, a raw response's cost header read
_OPENAI: dict[str, Any] = {"client": _client, "raw_headers": note_header_cost}
_OPERATIONS = {
    "images": Operation("generate_content", _provider, _server, _run_request,
                        _costed(_images_response), _ImagesAccumulator, **_OPENAI),
    "speech": Operation("generate_content", _provider, _server, _run_request,
                        _costed(_speech_response), _SpeechAccumulator, is_stream=_as_events,
                        **_OPENAI),
}  # fmt: skip


def wrapper(name: str, is_async: bool) -> Callable[..., Any]:
    """The wrapt wrapper of one operation (:mod:`.openai_patches` installs it)."""
    op = _OPERATIONS[name]
    if name != "speech":
        return operation_wrapper(op, is_async)
    wrap = async_wrapper if is_async else sync_wrapper
    return wrap(partial(_open, op, is_async), partial(_speech_read, op, is_async), op.failure,
                sdk=True)  # fmt: skip
