"""OpenAI's wire format for media: images (generations, edits, variations), speech, and
audio transcriptions and translations. The readers take the ``openai`` SDK's objects and
decoded JSON alike: the SDK capture (:mod:`..sdk.openai_media`, :mod:`..sdk.openai`) and the
HTTP layer share them. A POST is recognised by its path (under ``/v1/`` or Azure's
``/openai/deployments/{name}/``).

* Images: the GPT image models report ``usage`` (input tokens, image and text ones apart in
  ``input_tokens_details``; output tokens, apart in ``output_tokens_details`` where given),
  the image tokens billed at the model's image rates (genai-prices' ``input_image_tokens``,
  ``output_image_tokens``); a stream reports it once, on its ``*.completed`` event, its
  partial images carrying none. DALL-E reports none: usage unknown, never 0.
* Speech: audio bytes carry no usage (unknown, never read); with ``stream_format="sse"``
  the ``speech.audio.done`` event reports the tokens. A model priced per input character
  (tts-1, tts-1-hd) is billed by the request's ``input``: its length is counted
  (:func:`speech_characters`), the text never kept, and billed where genai-prices prices the
  model so (the account step decides: gpt-4o-mini-tts's plain audio stays unknown).
* Transcriptions and translations: tokens, or seconds of audio (:mod:`.openai`); a plain
  text, SRT or VTT answer carries none.

Edits, variations, transcriptions and translations are sent as multipart forms: the HTTP
layer reads their small text fields (``model``, ``stream``) as the request body
(:attr:`.Wire.form`).
"""

from __future__ import annotations

from typing import Any

from ...usage import Billing, Usage
from ..lifecycle import Response, sdk_field
from ..raw import _loads
from ..stream import Accumulator
from .base import Wire, by_suffix
from .openai import TranscriptionAccumulator, _model, _stream, transcription_response

__all__ = [
    "SPEECH_DONE",
    "SUFFIXES",
    "ImagesAccumulator",
    "SpeechAccumulator",
    "image_usage",
    "images_response",
    "recognise",
    "speech_characters",
    "speech_event",
    "tokens",
]

_get = sdk_field


# -- images ------------------------------------------------------------------------------------
def tokens(usage: Any) -> Usage:
    """Input and output tokens of a ``usage`` block (images, speech)."""
    return Usage(
        input_tokens=_get(usage, "input_tokens"), output_tokens=_get(usage, "output_tokens")
    )


def image_usage(usage: Any) -> tuple[Usage | None, Billing | None]:
    """(usage, image tokens billed apart) of an image endpoint's ``usage`` block."""
    if usage is None:
        return None, None
    found = tokens(usage)
    heard = _get(_get(usage, "input_tokens_details"), "image_tokens")
    drawn = _get(_get(usage, "output_tokens_details"), "image_tokens")
    return found, Billing.of(None, {"input_image_tokens": heard, "output_image_tokens": drawn})


def _svg_usage(usage: Any) -> Usage | None:
    """An SVG generation's own usage (its model named, reasoning inside output)."""
    if usage is None:
        return None
    return Usage(
        input_tokens=_get(usage, "input_tokens"),
        output_tokens=_get(usage, "output_tokens"),
        reasoning_tokens=_get(usage, "reasoning_tokens"),
        model=_get(usage, "model"),
    )


def images_response(result: Any) -> Response:
    """An ``ImagesResponse``: its token usage (GPT image models), else none (DALL-E)."""
    usage, billing = image_usage(_get(result, "usage"))
    if usage is None:
        usage = _svg_usage(_get(result, "svg_usage"))
    return Response(usage, usage.model if usage is not None else None, billing=billing)


class ImagesAccumulator(Accumulator):
    """A streamed generation or edit: the usage of its ``*.completed`` event (the last one
    seen, should several come); partial images carry none."""

    def __init__(self, given: Any = None, sent: Any = None) -> None:
        super().__init__()

    def add(self, event: Any) -> bool:
        kind = _get(event, "type")
        if isinstance(kind, str) and kind.endswith(".completed"):
            self.usage, self.billing = image_usage(_get(event, "usage"))
            self.finish_reasons = ["completed"]
        return True


# -- speech ------------------------------------------------------------------------------------
SPEECH_DONE = "speech.audio.done"
_DONE = SPEECH_DONE.encode()


def speech_event(body: bytes) -> Any:
    """The ``data:`` payload of the last ``speech.audio.done`` event in a whole
    server-sent-events body (None: none)."""
    found = None
    for line in body.splitlines():
        if line.startswith(b"data:") and _DONE in line:
            try:
                event = _loads(line[5:].strip())
            except ValueError:
                continue  # not JSON: not the event
            if _get(event, "type") == SPEECH_DONE:
                found = event
    return found


def speech_characters(given: Any) -> Billing | None:
    """A speech request's ``input`` characters, counted (:class:`Billing`'s ``counted``): the
    bill of a model priced per character; an input that is not a string: none. Counted with
    Python's ``len`` (Unicode code points): OpenAI prices "per character" and says no more."""
    text = given.get("input") if isinstance(given, dict) else None
    if not isinstance(text, str):
        return None
    return Billing.of(counted={"input_characters": len(text)})


class SpeechAccumulator(Accumulator):
    """Speech events read as the program reads them: the usage of ``speech.audio.done``."""

    def __init__(self, given: Any = None, sent: Any = None) -> None:
        super().__init__()

    def add(self, event: Any) -> bool:
        if _get(event, "type") == SPEECH_DONE:
            usage = _get(event, "usage")
            if usage is not None:
                self.usage = tokens(usage)
        return True


# -- HTTP: a POST recognised by its path ----------------------------------------------------
def _no_estimate(body: dict[str, Any], model: str | None) -> None:
    """Images and audio are not estimated before the answer (their input is not text alone)."""


def _form_stream(path: str, body: dict[str, Any]) -> bool:
    """``"stream": true`` in a JSON body, or ``stream=true`` in a form."""
    value = body.get("stream")
    return value is True or value == "true"


def _speech_stream(path: str, body: dict[str, Any]) -> bool:
    """Speech asked for as server-sent events (``stream_format: "sse"``), its usage in them."""
    return body.get("stream_format") == "sse"


def _not_events(content_type: str) -> bool:
    """Audio (any answer but server-sent events): no usage in it, never read."""
    return "event-stream" not in content_type.lower()


def _not_json(content_type: str) -> bool:
    """A transcript as text, SRT or VTT (any answer but JSON or events): no usage in it."""
    kind = content_type.lower()
    return "json" not in kind and "event-stream" not in kind


def _images(form: bool) -> Wire:
    """An images endpoint's shape (``form``: it may be sent as a multipart form)."""
    return Wire(
        "generate_content",
        _no_estimate,
        images_response,
        ImagesAccumulator,
        streams=_form_stream,
        model=_model,
        form=form,
    )


_AUDIO_TEXT = Wire(
    "transcription",
    _no_estimate,
    transcription_response,
    _stream(TranscriptionAccumulator),
    streams=_form_stream,
    model=_model,
    form=True,
    unread=_not_json,
)
_SPEECH = Wire(  # a whole speech answer is audio (unread): no JSON of it carries usage
    "generate_content",
    _no_estimate,
    lambda answer: Response(None),
    SpeechAccumulator,
    streams=_speech_stream,
    model=_model,
    unread=_not_events,
    billed=speech_characters,
)

#: path suffix -> request shape
_ROUTES = {
    "/images/generations": _images(form=False),
    "/images/edits": _images(form=True),
    "/images/variations": _images(form=True),
    "/audio/speech": _SPEECH,
    "/audio/transcriptions": _AUDIO_TEXT,
    "/audio/translations": _AUDIO_TEXT,
}
SUFFIXES = tuple(_ROUTES)


def recognise(path: str) -> Wire | None:
    """The OpenAI media request a POST to ``path`` is, or None."""
    return by_suffix(_ROUTES.items(), path)
