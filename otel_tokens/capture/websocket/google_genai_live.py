"""google-genai Live (``client.aio.live.connect(model=...)``, websockets; Gemini API and
Vertex AI): each server message carrying ``usage_metadata`` is one billed call.

The Live API bills per model turn, every turn for the whole context it reads (the session's
earlier turns are input again); the server reports that turn's bill once, in the
``usage_metadata`` of a server message (with or after the turn's content). So each message
with ``usage_metadata`` ends one call, opened at the turn's first model content (its span
covers the turn), under the agent current when ``connect`` was entered, with the
``connect`` model (Live messages name none). :mod:`..sdk.google_genai_patches` installs the hooks:
``AsyncLive.connect`` (the session opens as its context manager is entered, ends as it
exits) and ``AsyncSession._receive`` (every message, as the SDK made it: ``receive()``
and ``start_stream`` go through it; a dropped connection's error ends what is open), its
JSON's ``usageMetadata`` held to the one rule for counts as sent (``_LiveServerMessage_from_*``,
before the SDK turns ``"10"`` into 10).

Usage, as for ``generate_content`` (:mod:`..sdk.google_genai`): input = ``prompt_token_count``
+ ``tool_use_prompt_token_count``, cache read = ``cached_content_token_count``, output =
``response_token_count`` + ``thoughts_token_count``, reasoning = ``thoughts_token_count``;
each modality breakdown's audio, image and video tokens are billed units
(:class:`~otel_tokens.usage.Billing`) at the model's rates for them.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar
from typing import Any

from ... import faults
from ...usage import Billing, Usage, check_sent_usage
from ..sdk.google_genai import _provider, _server
from ..wire.gemini import add_counts, model_name
from ..lifecycle import sdk_field
from .session import Session, attach, session_of

__all__ = ["observe", "wrapper"]

_get = sdk_field
_TURN = "turn"  # one model turn is open at a time in a Live session
#: set while a session's ``_receive`` runs: why the message's counts, as sent, are not counts
#: (the SDK turns ``"10"`` into 10; the one rule for counts does not, see :mod:`..sent`)
_SENT: ContextVar[list[ValueError] | None] = ContextVar("otel_tokens_live_sent", default=None)
#: modality (as the API names it) -> genai-prices' (input, cache read, output) units
_UNITS = {
    "AUDIO": ("input_audio_tokens", "cache_audio_read_tokens", "output_audio_tokens"),
    "IMAGE": ("input_image_tokens", "cache_image_read_tokens", "output_image_tokens"),
    "VIDEO": ("input_video_tokens", "cache_video_read_tokens", "output_video_tokens"),
}


def _usage(meta: Any) -> Usage:
    """The token classes of one ``usage_metadata`` (absent counts: 0, as proto3 leaves them
    out). Live messages name no model: the call's request model prices it."""
    thoughts, answer = _get(meta, "thoughts_token_count"), _get(meta, "response_token_count")
    prompt, tool = _get(meta, "prompt_token_count"), _get(meta, "tool_use_prompt_token_count")
    return Usage(
        input_tokens=add_counts(prompt, tool),
        output_tokens=add_counts(answer, thoughts),
        cache_read_tokens=_get(meta, "cached_content_token_count"),
        reasoning_tokens=thoughts,
    )


def _by_modality(details: Any) -> dict[str, int]:
    """``[{modality: AUDIO, token_count: n}, ...]`` -> ``{"AUDIO": n}`` (counts as sent)."""
    found: dict[str, Any] = {}
    for entry in details or ():
        modality = _get(entry, "modality")
        name = str(getattr(modality, "value", modality)).upper()
        if name in _UNITS:
            found[name] = add_counts(found.get(name), _get(entry, "token_count"))
    return found


def _billing(meta: Any) -> Billing | None:
    """Audio, image and video tokens of each breakdown, each at its own rate; with cache
    reads, the cached share of each input modality is said (genai-prices needs it, 0 too)."""
    units: dict[str, Any] = {}
    for column, details in enumerate(
        ("prompt_tokens_details", "cache_tokens_details", "response_tokens_details")
    ):
        for modality, count in _by_modality(_get(meta, details)).items():
            units[_UNITS[modality][column]] = count
    found = Billing.of(None, units)
    if found is None or not _get(meta, "cached_content_token_count"):
        return found
    said = dict(found.units)
    for heard, cached, _spoken in _UNITS.values():
        if heard in said:
            said.setdefault(cached, 0)
    return found._replace(units=tuple(sorted(said.items())))


def observe(session: Session, message: Any, broken: ValueError | None = None) -> None:
    """Read one ``LiveServerMessage`` (``broken``: why its counts as sent are not counts);
    it is never changed."""
    meta = _get(message, "usage_metadata")
    if meta is None:
        if _get(message, "server_content") is not None or _get(message, "tool_call") is not None:
            session.begin(_TURN)
        return
    try:
        if broken is not None:
            raise broken
        found, billing = _usage(meta), _billing(meta)
    except ValueError as exc:  # not token counts: recorded as reported but unusable
        faults.report("usage_invalid", exc)
        found, billing = Usage(), None
    session.finish(_TURN, found, billing=billing)


# -- the hooks ------------------------------------------------------------------------------
def _session(live: Any, kwargs: dict[str, Any]) -> Session:
    address, port = _server(live)
    return Session(_provider(live), address, port, model_name(kwargs.get("model")))


@contextlib.asynccontextmanager
async def _recorded(opening: Any, live: Any, kwargs: dict[str, Any]) -> AsyncIterator[Any]:
    """``connect``'s context manager, the session it yields recorded until it exits."""
    async with opening as connection:
        session = None
        try:
            session = attach(connection, _session(live, kwargs))
        except Exception as exc:
            faults.report("internal", exc)
        try:
            yield connection
        finally:
            if session is not None:
                session.close()


def _connect(_is_async: bool) -> Callable[..., Any]:
    """``AsyncLive.connect(model=..., config=...)``: returns its context manager, wrapped."""

    def connect(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        opening = wrapped(*args, **kwargs)
        try:
            return _recorded(opening, instance, kwargs)
        except Exception as exc:
            faults.report("internal", exc)
            return opening

    return connect


def _receive(_is_async: bool) -> Callable[..., Any]:
    """``AsyncSession._receive()``: each message; an error (the connection dropped) ends the
    turn still open, and goes on unchanged."""

    async def receive(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        session = session_of(instance)
        verdicts: list[ValueError] = []
        token = _SENT.set(verdicts)
        try:
            message = await wrapped(*args, **kwargs)
        except Exception as exc:
            if session is not None:
                session.close(exc)
            raise
        finally:
            _SENT.reset(token)
        if session is not None:
            try:
                observe(session, message, verdicts[0] if verdicts else None)
            except Exception as exc:
                faults.report("internal", exc)
        return message

    return receive


def _sent(_is_async: bool) -> Callable[..., Any]:
    """``_LiveServerMessage_from_mldev``/``_from_vertex(from_object)``: the message's JSON as
    sent, its ``usageMetadata`` held to the one rule for counts (inside ``_receive`` only)."""

    def convert(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        verdicts = _SENT.get()
        sent = args[0] if args else kwargs.get("from_object")
        if verdicts is not None and type(sent) is dict and sent.get("usageMetadata") is not None:
            try:
                check_sent_usage(sent["usageMetadata"])
            except ValueError as exc:
                verdicts.append(exc)
            except Exception as exc:
                faults.report("internal", exc)
        return wrapped(*args, **kwargs)

    return convert


_WRAPPERS = {"connect": _connect, "receive": _receive, "sent": _sent}


def wrapper(name: str, is_async: bool) -> Callable[..., Any]:
    """The wrapt wrapper of one patched method (:mod:`..sdk.google_genai_patches` installs it)."""
    return _WRAPPERS[name](is_async)
