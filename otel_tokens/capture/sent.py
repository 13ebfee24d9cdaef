"""What the provider sent, before a client library coerced it: usage, and a gateway's cost.

openai's, google-genai's and botocore's parsers turn a count sent as ``true`` into 1 and
``"10"`` into 10 (botocore ``10.7`` into 10) before capture reads the parsed object; litellm
makes up a 0/0 usage for a response that had none and counts a stream's tokens itself. Here
the decoded body is seen where the client turns it into its object, held to the one rule
(:func:`otel_tokens.usage.check_sent_usage`), and what it said is kept for the reader:

* an object made from a body whose counts break the rule is *held* (:func:`hold`): the
  reader of that object (:func:`rejected`) records the usage as unusable (``usage_invalid``);
* a gateway call (litellm) keeps a :class:`Sent` of every body and event its provider sent.

The hooks: openai's ``BaseClient._process_response_data`` (every body and stream event of
both sync and async clients; an openai stream gets a reader of its own instead, see
:class:`SentStream`) and its response objects' ``parse()`` (a ``.parse()`` method's
post-parser rebuilds the object: the new one is held as the one it was made of),
google-genai's ``GenerateContentResponse._from_response``, botocore's ``after-call`` event of
``Converse``, and the SSE decoder of a stream (:class:`RawEvents`).

A gateway's reported cost (LiteLLM proxy's ``x-litellm-response-cost`` header) is noted where
openai parses a response (the ``parse()`` hook above, which openai calls for every response it
does not return raw, a stream's included, before reading any of its body; a raw response's
when the call hands it back, :func:`note_header_cost`), for the call being read;
:mod:`.sdk.openai` takes it once: a non-streamed result when it is read (``with_raw_response``:
when it is parsed or its body read), a stream when its accumulator is made
(:class:`SentStream`). A LiteLLM proxy sends the header on a stream
only when the cost is known before the body (a cache hit: ``0.0``); otherwise it can put the
bill in the final usage chunk's ``usage.cost`` (``include_cost_in_streaming_usage``), read as
a reported cost by :mod:`.wire.compatible`. A value that is not a finite, non-negative
number is no cost (the header is untrusted); a provider's own API is not read for it
(:func:`expect_cost`).
"""

from __future__ import annotations

import json
import math
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Callable

import wrapt

from .. import faults
from ..usage import Usage, check_sent_usage

if TYPE_CHECKING:
    from ..call import Call

__all__ = [
    "COST",
    "COST_HEADERS",
    "HELD",
    "NO_GATEWAY",
    "RawEvents",
    "Sent",
    "SentStream",
    "check_converse",
    "expect_cost",
    "hold",
    "inside_gateway",
    "inside_sdk",
    "note",
    "note_header_cost",
    "rejected",
    "take_cost",
    "unhooked",
    "usage_of",
    "wrapper",
]

#: set while a gateway library's call (litellm) is recorded: SDK calls it makes inside are
#: part of that call, counted once by it. Its value is the gateway reader's context when
#: that is an object of its own (litellm's record of what its provider sent, a :class:`Sent`)
inside_gateway: ContextVar[Any] = ContextVar("otel_tokens_inside_gateway", default=False)

#: set while an SDK-level capture records a model call (the one path's wrappers, and a stream
#: proxy while it obtains the first item: some streams send their request then): the HTTP
#: layer (:mod:`.http.layer`) stays silent beneath it, so the call is counted once
inside_sdk: ContextVar[bool] = ContextVar("otel_tokens_inside_sdk", default=False)

_STREAMING = "openai._streaming"  # the module of openai's Stream and AsyncStream
_MAX_HELD = 64  # objects held at once: rejected usage is rare, and a held object is read soon
#: the objects held now, by id (empty nearly always: a stream tests it before asking)
HELD: dict[int, tuple[Any, ValueError]] = {}
#: the objects held while an openai response object parses (None: none is parsing here)
_parsing: ContextVar[list[Any] | None] = ContextVar("otel_tokens_parsing", default=None)


def hold(obj: Any, usage: Any) -> None:
    """Hold ``obj`` when ``usage`` (as sent) breaks the rule. Held strongly (so its id is not
    reused) until read, the oldest let go past :data:`_MAX_HELD`."""
    try:
        check_sent_usage(usage)
    except ValueError as exc:
        _keep(obj, exc)


def _keep(obj: Any, exc: ValueError) -> None:
    if len(HELD) >= _MAX_HELD:
        del HELD[next(iter(HELD))]
    HELD[id(obj)] = (obj, exc)
    made = _parsing.get()
    if made is not None:
        made.append(obj)


def rejected(obj: Any) -> ValueError | None:
    """Why ``obj``'s usage breaks the rule (once), or None; costs a dict test when none is held."""
    if not HELD:
        return None
    found = HELD.get(id(obj))
    if found is None or found[0] is not obj:
        return None
    del HELD[id(obj)]
    return found[1]


def usage_of(body: dict[str, Any]) -> Any:
    """The usage block of an OpenAI-shaped body: a chat completion or chunk, a Responses
    result, or a Responses stream event (``response.usage``)."""
    usage = body.get("usage")
    if usage is None:
        response = body.get("response")
        if type(response) is dict:
            usage = response.get("usage")
    return usage


class Sent:
    """What a provider sent for one call, as far as it was seen: ``seen`` (a body or event
    arrived; not kept by an openai stream's reader, :class:`SentStream`: nothing reads it
    there), ``usage`` (one of them carried usage), ``error`` (a count in it broke the rule:
    the first such)."""

    __slots__ = ("seen", "usage", "error")

    def __init__(self) -> None:
        self.seen = False
        self.usage = False
        self.error: ValueError | None = None

    def note(self, usage: Any) -> None:
        """One body or event, with ``usage`` as sent (None: it had none)."""
        self.seen = True
        if usage is None:
            return
        self.usage = True
        try:
            check_sent_usage(usage)
        except ValueError as exc:
            if self.error is None:
                self.error = exc


class RawEvents:
    """An SDK's SSE decoder (``stream._decoder``), passing every event on unchanged; each
    event's usage is noted on ``sent`` as the provider sent it."""

    __slots__ = ("_decoder", "_sent")

    def __init__(self, decoder: Any, sent: Sent) -> None:
        self._decoder, self._sent = decoder, sent

    @classmethod
    def watch(cls, stream: Any, sent: Sent) -> bool:
        """Put the decoder of ``stream`` (not read yet) behind one; False when it has none."""
        decoder = getattr(stream, "_decoder", None)
        if decoder is None or not hasattr(decoder, "iter_bytes"):
            return False
        stream._decoder = cls(decoder, sent)
        return True

    # an event is read further only when it may carry usage ("usage": null, in every chunk
    # of an OpenAI stream that asked for usage, has no "okens") or is the first one
    def iter_bytes(self, chunks: Any) -> Any:
        sent = self._sent
        for sse in self._decoder.iter_bytes(chunks):
            data = sse.data
            if type(data) is str and ("okens" in data or not sent.seen):
                self._see(data)
            yield sse

    async def aiter_bytes(self, chunks: Any) -> Any:
        sent = self._sent
        async for sse in self._decoder.aiter_bytes(chunks):
            data = sse.data
            if type(data) is str and ("okens" in data or not sent.seen):
                self._see(data)
            yield sse

    def _see(self, data: str) -> None:
        sent = self._sent
        if not data or data == "[DONE]":
            return
        sent.seen = True
        if '"usage"' not in data or "okens" not in data:  # no usage, or "usage": null
            return
        try:
            body = json.loads(data)
        except ValueError:
            return  # the SDK reports what it cannot parse itself
        if type(body) is dict:
            sent.note(usage_of(body))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._decoder, name)


# -- a gateway's reported cost ----------------------------------------------------------------
COST_HEADERS = ("x-litellm-response-cost",)

#: the cost noted for the call being read (None: none; :data:`NO_GATEWAY`: none is read), set
#: by :func:`expect_cost` (or its caller's own copy of it, on every openai call) and taken by
#: :func:`take_cost`
COST: ContextVar[Any] = ContextVar("otel_tokens_gateway_cost", default=None)


def cost_of(raw: Any) -> float | None:
    """A cost header's USD value, or None."""
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and value >= 0 else None


#: noted instead of a cost: the call's endpoint is a provider's own API (no gateway between)
NO_GATEWAY: Any = object()


def expect_cost(gateway: bool) -> None:
    """A call starts: forget a cost noted before (an earlier response's, not this call's).
    ``gateway`` False (the client's endpoint is a provider's own API, matched by its URL
    pattern) skips reading the response's headers: no gateway sits between."""
    state = None if gateway else NO_GATEWAY
    if COST.get() is not state:
        COST.set(state)


def take_cost() -> float | None:
    """The cost noted for the response just read (once)."""
    cost = COST.get()
    if cost is None or cost is NO_GATEWAY:
        return None
    COST.set(None)
    return cost


class SentStream:
    """Stream accumulator mixin for openai's streams: what the provider sent.

    * The stream's cost header (taken when the accumulator is made, right after the SDK
      returned the stream) is the stream's cost, over a cost its usage reports, as for a
      non-streamed response; a stream without usage keeps the cost with its tokens unknown
      (estimated from the text, as any stream without usage).
    * The stream makes its chunk objects with its client's own ``_process_response_data``,
      called by :meth:`reader` (see :func:`unhooked`): each decoded event's usage is noted as
      sent there, without the per-object hook (:func:`_openai_data`; kept for speed:
      docs/benchmarks.md). A subclass whose ``reader`` reads the chunks
      too sets ``reads_made`` (chat completions: the decoded chunks kept, read in bulk).
      Where the client cannot be given a reader (another instrumentation wraps the hook, or
      it is not loaded yet), the SSE decoder's events are read as sent (:class:`RawEvents`)
      and the hook holds the chunk objects instead.
    """

    usage: Usage | None
    model: str | None
    response_id: str | None
    sent: Sent | None
    reads_made = False  #: its ``reader`` reads each chunk (the stream proxy only passes it on)

    def take_header_cost(self) -> None:
        self.header_cost = take_cost()

    def made(self, stream: Any, observer: Any) -> bool:
        sent = Sent()
        if unhooked(stream, lambda own: self.reader(own, sent, observer)):
            self.sent = sent
            return self.reads_made
        if RawEvents.watch(stream, sent):
            self.sent = sent
        return False

    def items(self, stream: Any) -> Any:
        """openai's ``Stream.__iter__`` (``AsyncStream.__aiter__``) only passes its
        ``_iterator`` on: that iterator, for the stream proxy to read directly."""
        klass = type(stream)
        method = getattr(klass, "__aiter__" if hasattr(klass, "__anext__") else "__iter__", None)
        code = getattr(method, "__code__", None)
        if code is None or code.co_names != ("_iterator",) or method.__module__ != _STREAMING:
            return None
        return getattr(stream, "_iterator", None)

    def reader(self, own: Callable[..., Any], sent: Sent, observer: Any) -> Callable[..., Any]:
        """The stream's ``_process_response_data``: the client's own ``own``, each event's
        usage noted on ``sent`` as it was sent (the chunks are read by the stream proxy)."""

        def process(*, data: Any, cast_to: Any, response: Any) -> Any:
            made = own(data=data, cast_to=cast_to, response=response)
            if type(data) is dict and (data.get("usage") is not None or "response" in data):
                note(sent, data)
            return made

        return process

    def end_call(
        self,
        call: Call,
        how: str,
        error: BaseException | str | None = None,
        once: str | None = None,
    ) -> None:
        cost = getattr(self, "header_cost", None)
        if cost is not None:
            usage = self.usage
            self.usage = (
                Usage(cost_usd=cost, model=self.model, response_id=self.response_id)
                if usage is None
                else usage.replace(cost_usd=cost)
            )
        super().end_call(call, how, error, once)  # type: ignore[misc]


def note(sent: Sent, data: Any) -> None:
    """The usage of a decoded body or event ``data`` (any value), noted on ``sent`` as sent."""
    try:
        usage = usage_of(data) if type(data) is dict else None
        if usage is not None:
            sent.note(usage)
    except Exception as exc:
        faults.report("internal", exc)


class _Unhooked(wrapt.ObjectProxy):  # type: ignore[misc]
    """A stream's client, all but one method passed through: ``_process_response_data`` is
    the stream's reader (:meth:`SentStream.reader`), not :func:`_openai_data`."""

    def __init__(self, client: Any, process: Callable[..., Any]) -> None:
        super().__init__(client)
        self._self_process = process

    @property
    def _process_response_data(self) -> Callable[..., Any]:
        return self._self_process


def unhooked(stream: Any, reader: Callable[[Callable[..., Any]], Callable[..., Any]]) -> bool:
    """Let an openai ``stream`` (not read yet) make its chunks with ``reader(own)``, ``own``
    its client's own ``_process_response_data``, when that is wrapped by :func:`_openai_data`
    alone (the stream looks it up on its client when its first chunk is read); False
    otherwise (the client is left alone)."""
    client = getattr(stream, "_client", None)
    if client is None:
        return False
    for klass in type(client).__mro__:
        hook = vars(klass).get("_process_response_data")
        if hook is not None:
            break
    if not isinstance(hook, wrapt.FunctionWrapper) or hook._self_wrapper is not _openai_data:
        return False  # not loaded yet, or another instrumentation wraps it too: the hook stays
    stream._client = _Unhooked(client, reader(hook.__wrapped__.__get__(client, type(client))))
    return True


def note_header_cost(response: Any) -> None:
    """The gateway's cost header of an openai response object (``APIResponse``,
    ``LegacyAPIResponse``: its ``http_response``), noted for the call being read; not read
    when that call's endpoint is a provider's own API (:func:`expect_cost`)."""
    if COST.get() is NO_GATEWAY:
        return
    try:
        headers = getattr(getattr(response, "http_response", None), "headers", None)
        raw = headers.get(COST_HEADERS[0]) if headers is not None else None
        COST.set(cost_of(raw) if raw is not None else None)
    except Exception as exc:
        faults.report("parse", exc)


# -- the hooks -------------------------------------------------------------------------------
def _openai_data(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    """openai's ``_process_response_data(data=, cast_to=, response=)``: the object made of a
    body is held when the body's usage breaks the rule; a gateway call notes the body."""
    result = wrapped(*args, **kwargs)
    data = kwargs.get("data")
    if type(data) is not dict:
        return result
    usage = data.get("usage")
    # most stream chunks carry no usage and no gateway reads them: two dict tests
    if usage is None and "response" not in data and not isinstance(inside_gateway.get(), Sent):
        return result
    try:
        if usage is None:
            usage = usage_of(data)  # a Responses event's
        if usage is not None:  # every non-streamed body has usage
            hold(result, usage)
        gateway = inside_gateway.get()
        if isinstance(gateway, Sent):
            gateway.note(usage)
    except Exception as exc:
        faults.report("internal", exc)
    return result


def _parse_hook(instance: Any) -> list[Any] | None:
    """A list to collect the objects held while ``instance`` parses, when its request has a
    post-parser (a ``.parse()`` method's: structured output); None otherwise."""
    options = getattr(instance, "_options", None)
    return [] if callable(getattr(options, "post_parser", None)) else None


def _carry(made: list[Any], result: Any) -> None:
    """``result`` of ``parse()`` was made of the objects ``made`` (held while it parsed, their
    bodies broke the rule): it is held in their place."""
    try:
        for obj in made:
            if obj is not result:
                exc = rejected(obj)
                if exc is not None:
                    _keep(result, exc)
    except Exception as exc:
        faults.report("internal", exc)


def _openai_parse(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    """openai's ``APIResponse.parse()`` and ``LegacyAPIResponse.parse()``: a post-parser
    makes a new object of the one made of the body; the new one is held as that one was. The
    gateway's cost header is noted first (:func:`note_header_cost`; the one hook per response
    that reads it: openai parses every response it does not return raw, streams included)."""
    if COST.get() is not NO_GATEWAY:
        note_header_cost(instance)
    made = _parse_hook(instance)
    if made is None:
        return wrapped(*args, **kwargs)
    token = _parsing.set(made)
    try:
        result = wrapped(*args, **kwargs)
    finally:
        _parsing.reset(token)
    if made:
        _carry(made, result)
    return result


async def _openai_parse_async(
    wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict
) -> Any:
    """``AsyncAPIResponse.parse()``: as :func:`_openai_parse`."""
    if COST.get() is not NO_GATEWAY:
        note_header_cost(instance)
    made = _parse_hook(instance)
    if made is None:
        return await wrapped(*args, **kwargs)
    token = _parsing.set(made)
    try:
        result = await wrapped(*args, **kwargs)
    finally:
        _parsing.reset(token)
    if made:
        _carry(made, result)
    return result


def _genai_response(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    """google-genai's ``GenerateContentResponse._from_response(response=, kwargs=)``: a
    response (or stream chunk) whose ``usage_metadata`` breaks the rule is held."""
    result = wrapped(*args, **kwargs)
    response = kwargs.get("response")
    if type(response) is dict:
        meta = response.get("usage_metadata")
        if meta is not None:
            try:
                hold(result, meta)
            except Exception as exc:
                faults.report("internal", exc)
    return result


def check_converse(http_response: Any = None, parsed: Any = None, **_: Any) -> None:
    """botocore's ``after-call`` of ``Converse``: the parsed answer is held when the body's
    usage, as sent, breaks the rule (botocore's parser made integers of it)."""
    try:
        content = getattr(http_response, "content", None)
        if isinstance(parsed, dict) and content:
            body = json.loads(content)
            if isinstance(body, dict) and body.get("usage") is not None:
                hold(parsed, body["usage"])
    except Exception as exc:
        faults.report("internal", exc)


_HOOKS = {"openai": _openai_data, "genai": _genai_response}


def wrapper(name: str, is_async: bool) -> Callable[..., Any]:
    """The wrapt wrapper of a client's body-to-object step (the patch tables install it)."""
    if name == "parse":
        return _openai_parse_async if is_async else _openai_parse
    return _HOOKS[name]
