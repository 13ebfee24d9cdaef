"""The OpenAI Realtime API (GA, websockets): each ``response.done`` is one billed call.

Two clients speak it, both hooked here (:mod:`..sdk.openai_patches` installs the patches):

* the ``openai`` SDK's ``client.realtime.connect(model=...)``, sync and async: the session
  opens when the connection manager is entered (``with``/``async with`` or ``.enter()``),
  every server event is read where the SDK makes its object of it (``parse_event``: ``recv()``,
  iteration and ``dispatch_events`` all go through it), and the session's open responses end
  when the connection closes or its ``recv_bytes`` finds it dropped;
* the OpenAI Agents SDK's ``RealtimeSession`` (``agents.realtime``), which opens its own
  websocket (``websockets.connect``) in ``OpenAIRealtimeWebSocketModel.connect`` and reads
  every event as a dict in ``_handle_ws_event``; its listener's end ends the session. With
  no ``agent(...)`` binding, a response is the ``RealtimeAgent``'s the session runs then.
  Its voice pipeline's streamed speech-to-text session is read by :mod:`.agents_voice`,
  through :func:`observed`: each transcribed turn is a ``transcription`` call.

A response's call opens at ``response.created`` and ends at its ``response.done``, under the
agent current when the session was opened (:mod:`.session`), with the model the
server names in ``session.created``/``session.updated`` (the request model: ``connect``'s).
Usage: ``input_tokens`` (cached included: ``input_token_details.cached_tokens``) and
``output_tokens``; the audio and image tokens of ``input_token_details``,
``cached_tokens_details`` and ``output_token_details`` are billed units
(:class:`~otel_tokens.usage.Billing`) priced at the model's audio and image rates.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable
from functools import partial
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ... import faults
from ... import settings as _settings
from ...endpoints import endpoint, server_of
from ...usage import Billing, Usage
from ..lifecycle import Response, given, sdk_field
from ..wire.openai import transcription_response
from .session import Session, attach, session_of

__all__ = ["client_session", "observe", "observed", "wrapper"]

_get = sdk_field
_ONCE = "openai.realtime"  # a response id counts once, however often its event is parsed
_ONCE_TRANSCRIPTION = "openai.realtime.transcription"  # an input item's transcription: once
_AZURE = ("AzureOpenAI", "AsyncAzureOpenAI")


# -- reading the events ---------------------------------------------------------------------
def _usage(usage: Any, model: str | None, response_id: str | None) -> Usage | None:
    """The token classes of a ``response.done``'s ``response.usage`` (None: none reported)."""
    if usage is None:
        return None
    return Usage(
        input_tokens=_get(usage, "input_tokens"),
        output_tokens=_get(usage, "output_tokens"),
        cache_read_tokens=_get(_get(usage, "input_token_details"), "cached_tokens"),
        model=model,
        response_id=response_id,
    )


def _billing(usage: Any) -> Billing | None:
    """Audio and image tokens, each a subset of its token class, at their own rates."""
    if usage is None:
        return None
    heard, spoken = _get(usage, "input_token_details"), _get(usage, "output_token_details")
    cached = _get(heard, "cached_tokens_details")
    found = Billing.of(
        None,
        {
            "input_audio_tokens": _get(heard, "audio_tokens"),
            "cache_audio_read_tokens": _get(cached, "audio_tokens"),
            "input_image_tokens": _get(heard, "image_tokens"),
            "cache_image_read_tokens": _get(cached, "image_tokens"),
            "output_audio_tokens": _get(spoken, "audio_tokens"),
        },
    )
    if found is None or not _get(heard, "cached_tokens"):
        return found
    return found._replace(units=_cached_modalities(dict(found.units)))


def _cached_modalities(units: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """With cache reads reported, genai-prices needs the cached share of each input
    modality said, even when 0 (``cache_audio_read_tokens`` beside ``input_audio_tokens``)."""
    for modality in ("audio", "image"):
        if f"input_{modality}_tokens" in units:
            units.setdefault(f"cache_{modality}_read_tokens", 0)
    return tuple(sorted(units.items()))


def _done(session: Session, response: Any) -> None:
    """A ``response.done``: the response's call ends with its usage."""
    rid = _get(response, "id")
    rid = rid if isinstance(rid, str) and rid else None
    usage = _get(response, "usage")
    status = _get(response, "status")
    try:
        found, billing = _usage(usage, session.response_model, rid), _billing(usage)
    except ValueError as exc:  # not token counts: recorded as reported but unusable
        faults.report("usage_invalid", exc)
        found, billing = Usage(), None
    session.finish(
        rid,
        found,
        response_id=rid,
        billing=billing,
        reasons=(status,) if isinstance(status, str) and status else (),
        once=_ONCE,
    )


def _transcribed(session: Session, event: Any) -> None:
    """An input audio transcription's bill (its own model: tokens, or seconds of audio)."""
    if _get(event, "usage") is None:
        return
    try:
        answer = transcription_response(event)
    except ValueError as exc:  # not token counts: recorded as reported but unusable
        faults.report("usage_invalid", exc)
        answer = Response(Usage())
    item, index = _get(event, "item_id"), _get(event, "content_index")
    key = f"{item}:{index}" if isinstance(item, str) and item else None
    session.bill(
        answer.usage,
        answer.billing,
        operation="transcription",
        model=session.models.get("transcription"),
        response_id=key,
        once=_ONCE_TRANSCRIPTION,
    )


def _configured(session: Session, config: Any) -> None:
    """A ``session.created``/``session.updated``: the model the server runs, and the
    transcription model of its input audio (GA ``audio.input.transcription``, or beta
    ``input_audio_transcription``)."""
    model = _get(config, "model")
    if isinstance(model, str) and model:
        session.response_model = model
    transcription = _get(_get(_get(config, "audio"), "input"), "transcription") or _get(
        config, "input_audio_transcription"
    )
    transcriber = _get(transcription, "model")
    if isinstance(transcriber, str) and transcriber:
        session.models["transcription"] = transcriber


def observe(session: Session, event: Any) -> None:
    """Read one server event (an SDK object or a dict); it is never changed."""
    kind = _get(event, "type")
    if kind == "response.done":
        _done(session, _get(event, "response"))
    elif kind == "response.created":
        session.begin(_get(_get(event, "response"), "id"))
    elif kind == "conversation.item.input_audio_transcription.completed":
        _transcribed(session, event)
    elif kind in ("session.created", "session.updated"):
        _configured(session, _get(event, "session"))


def observed(session: Session | None, event: Any, data: Any = None) -> None:
    """:func:`observe` (a billed event read from ``data``, the bytes it was made of, when
    given), its faults counted, never raised into the caller."""
    if session is None:
        return
    try:
        observe(session, event if data is None else _as_sent(event, data))
    except Exception as exc:
        faults.report("internal", exc)


# -- the openai SDK -------------------------------------------------------------------------
def _url_session(
    base_url: str, socket_url: str | None, model: Any, platform: str | None
) -> Session:
    """A session of a client whose REST URL ``base_url`` names the provider and whose
    websocket URL (``socket_url``, else the REST URL's host) is the server."""
    host = server_of(base_url)[0]
    overrides = _settings.current().provider_urls
    provider = endpoint(base_url, host, "openai", platform, overrides).provider
    address, port = server_of(socket_url or base_url)
    model = given(model)
    return Session(provider, address, port, model if isinstance(model, str) else None)


def client_session(client: Any, model: Any) -> Session:
    """The session of an ``openai`` client's websocket (its ``websocket_base_url``, else its
    REST URL's host) for ``model``; the Agents SDK's speech-to-text session uses it too."""
    platform = "azure.ai.openai" if type(client).__name__ in _AZURE else None
    socket_url = getattr(client, "websocket_base_url", None)
    return _url_session(
        str(getattr(client, "_base_url", "")),
        str(socket_url) if socket_url is not None else None,
        model,
        platform,
    )


def _manager_session(manager: Any) -> Session:
    """The session of a connection manager (``realtime.connect(...)``'s) being entered."""
    prefix = f"_{type(manager).__name__}__"  # its client and model are name-mangled
    return client_session(
        getattr(manager, prefix + "client", None), getattr(manager, prefix + "model", None)
    )


def _opened(manager: Any, connection: Any) -> None:
    try:
        attach(connection, _manager_session(manager))
    except Exception as exc:
        faults.report("internal", exc)


def _enter(is_async: bool) -> Callable[..., Any]:
    """``RealtimeConnectionManager.__enter__``/``enter`` (and the async twins): the session
    opens in the caller's context."""
    if is_async:

        async def enter_async(
            wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict
        ) -> Any:
            connection = await wrapped(*args, **kwargs)
            _opened(instance, connection)
            return connection

        return enter_async

    def enter(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        connection = wrapped(*args, **kwargs)
        _opened(instance, connection)
        return connection

    return enter


#: the events that bill: read from the bytes as sent (the SDK coerces ``"132"`` to 132;
#: the one rule for counts does not, see :mod:`..sent`)
_BILLED = frozenset(("response.done", "conversation.item.input_audio_transcription.completed"))


def _as_sent(event: Any, data: Any) -> Any:
    """A billed event as the server sent it (its JSON), any other as the SDK made it."""
    if _get(event, "type") not in _BILLED or not isinstance(data, (str, bytes, bytearray)):
        return event
    try:
        sent = json.loads(data)
    except ValueError:
        return event
    return sent if isinstance(sent, dict) else event


def _parse(_is_async: bool) -> Callable[..., Any]:
    """``parse_event(data)`` (sync in both connections): every server event, as the SDK
    made it, a billed one as sent."""

    def parse(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        event = wrapped(*args, **kwargs)
        observed(session_of(instance), event, args[0] if args else kwargs.get("data"))
        return event

    return parse


def _ended(instance: Any, error: BaseException | str) -> None:
    session = session_of(instance)
    if session is not None:
        session.close(error)


def _receive(is_async: bool) -> Callable[..., Any]:
    """``recv_bytes``: a dropped connection ends the session's open responses (the error
    goes on unchanged: the SDK may reconnect)."""
    if is_async:

        async def receive_async(
            wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict
        ) -> Any:
            try:
                return await wrapped(*args, **kwargs)
            except Exception as exc:
                _ended(instance, exc)
                raise

        return receive_async

    def receive(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        try:
            return wrapped(*args, **kwargs)
        except Exception as exc:
            _ended(instance, exc)
            raise

    return receive


def _close(is_async: bool) -> Callable[..., Any]:
    """A connection's ``close()``: its open responses end (never billed now)."""
    if is_async:

        async def close_async(
            wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict
        ) -> Any:
            try:
                return await wrapped(*args, **kwargs)
            finally:
                _ended(instance, "connection_closed")

        return close_async

    def close(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        try:
            return wrapped(*args, **kwargs)
        finally:
            _ended(instance, "connection_closed")

    return close


# -- the OpenAI Agents SDK ------------------------------------------------------------------
def _agents_session(model: Any, options: Any) -> Session:
    """The session of an ``OpenAIRealtimeWebSocketModel`` connecting with ``options``: the
    model its settings name, else its URL's ``model=``, else the model object's own."""
    options = options if isinstance(options, dict) else {}
    url = options.get("url")
    url = url if isinstance(url, str) else "wss://api.openai.com/v1/realtime"
    parts = urlsplit(url)
    settings = options.get("initial_model_settings")
    named = settings.get("model_name") if isinstance(settings, dict) else None
    named = named or parse_qs(parts.query).get("model", [None])[0] or getattr(model, "model", None)
    rest = f"{'https' if parts.scheme == 'wss' else 'http'}://{parts.netloc}/v1"
    return _url_session(rest, url, named, None)


def _realtime_agent(model: weakref.ref) -> str | None:
    """The name of the agent the ``RealtimeSession`` listening to ``model`` runs now."""
    for listener in getattr(model(), "_listeners", None) or ():
        agent = getattr(listener, "_current_agent", None)
        name = getattr(agent, "name", None)
        if isinstance(name, str) and name:
            return name
    return None


def _agents_connect(_is_async: bool) -> Callable[..., Any]:
    """``OpenAIRealtimeWebSocketModel.connect(options)``: the session opens in the context
    of the ``RealtimeSession`` being entered; its listener task runs in a copy of it."""

    async def connect(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        try:
            options = args[0] if args else kwargs.get("options")
            session = attach(instance, _agents_session(instance, options))
            session.framework_agent = partial(_realtime_agent, weakref.ref(instance))
        except Exception as exc:
            faults.report("internal", exc)
        return await wrapped(*args, **kwargs)

    return connect


def _agents_event(_is_async: bool) -> Callable[..., Any]:
    """``_handle_ws_event(event)``: each server event, a dict as the server sent it."""

    async def handle(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        observed(session_of(instance), args[0] if args else kwargs.get("event"))
        return await wrapped(*args, **kwargs)

    return handle


def _agents_listen(_is_async: bool) -> Callable[..., Any]:
    """``_listen_for_messages``: when the listener ends (closed or dropped), so does every
    response still open."""

    async def listen(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        try:
            return await wrapped(*args, **kwargs)
        finally:
            _ended(instance, "connection_closed")

    return listen


_WRAPPERS: dict[str, Callable[[bool], Callable[..., Any]]] = {
    "enter": _enter,
    "parse": _parse,
    "receive": _receive,
    "close": _close,
    "agents_connect": _agents_connect,
    "agents_event": _agents_event,
    "agents_listen": _agents_listen,
}


def wrapper(name: str, is_async: bool) -> Callable[..., Any]:
    """The wrapt wrapper of one patched method (:mod:`..sdk.openai_patches` installs it)."""
    return _WRAPPERS[name](is_async)
