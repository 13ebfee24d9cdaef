"""The OpenAI Agents SDK voice pipeline's streamed speech-to-text session
(``agents.voice``'s ``OpenAISTTTranscriptionSession``): each input audio transcription it is
billed for is one ``transcription`` call, read by :mod:`.openai_realtime`'s one reader.

The session opens its own websocket (``websockets.connect``, ``?intent=transcription``); its
listener makes a dict of each server event and puts it on the session's ``_event_queue``.
When the connection is set up (``_setup_connection``) the recorded session opens
(:mod:`.session`: in the context of the caller iterating ``transcribe_turns``, with the model
the session configures, until the server names its own) and that one queue's ``put`` reads
each event before queueing it: the same object, at the same moment, nothing else queued
differently. The listener's last item (its ``WebsocketDoneSentinel``, whether the socket
closed or dropped) ends the session and gives the queue back its own ``put``; so does
``uninstrument()`` for every queue still read.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from functools import partial
from typing import Any

from ... import faults
from .openai_realtime import client_session, observed
from .session import Session, attach, session_of

__all__ = ["unhook_all", "wrapper"]

#: the queues whose ``put`` reads events now (a queue leaves when its session ends)
_HOOKED: weakref.WeakSet[Any] = weakref.WeakSet()
#: the listener's last item: the connection is over
_DONE = "WebsocketDoneSentinel"


def _put(owner: weakref.ref, queue: weakref.ref, item: Any) -> Any:
    """The hooked queue's ``put(item)``: the item is read, then queued by the queue's own
    ``put`` (the coroutine the listener awaits, as without the hook)."""
    found = queue()
    _read(owner(), found, item)
    return type(found).put(found, item)


def _read(owner: Any, queue: Any, item: Any) -> None:
    """A server event (a dict) is observed; the listener's end ends the session. A fault is
    counted, never raised into the listener."""
    session = session_of(owner) if owner is not None else None
    if isinstance(item, dict):
        observed(session, item)
    elif type(item).__name__ == _DONE:
        try:
            _unhook(queue)
            if session is not None:
                session.close("connection_closed")
        except Exception as exc:
            faults.report("internal", exc)


def _is_hook(put: Any) -> bool:
    return isinstance(put, partial) and put.func is _put


def _hook(owner: Any) -> None:
    """Read ``owner``'s event queue from now on (a queue with a ``put`` of its own that is not
    this hook is left alone)."""
    queue = getattr(owner, "_event_queue", None)
    if queue is None or "put" in vars(queue):
        return
    queue.put = partial(_put, weakref.ref(owner), weakref.ref(queue))
    _HOOKED.add(queue)


def _unhook(queue: Any) -> None:
    """Give ``queue`` back its own ``put``."""
    if queue is not None and _is_hook(vars(queue).get("put")):
        del queue.put
    _HOOKED.discard(queue)


def unhook_all() -> None:
    """``uninstrument()``: every queue still read gets its own ``put`` back."""
    for queue in list(_HOOKED):
        _unhook(queue)


def _stt_session(owner: Any) -> Session:
    """The session of an STT session's connection: its client's websocket, its model."""
    session = client_session(getattr(owner, "_client", None), None)
    model = getattr(owner, "_model", None)
    if isinstance(model, str) and model:
        session.models["transcription"] = model
    return session


def _setup(_is_async: bool) -> Callable[..., Any]:
    """``_setup_connection(ws)``: before its listener starts, the session opens and its
    event queue is read."""

    async def setup(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        try:
            attach(instance, _stt_session(instance))
            _hook(instance)
        except Exception as exc:
            faults.report("internal", exc)
        return await wrapped(*args, **kwargs)

    return setup


_WRAPPERS: dict[str, Callable[[bool], Callable[..., Any]]] = {"setup": _setup}


def wrapper(name: str, is_async: bool) -> Callable[..., Any]:
    """The wrapt wrapper of one patched method (:mod:`..sdk.openai_patches` installs it)."""
    return _WRAPPERS[name](is_async)
