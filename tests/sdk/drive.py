"""Drive a recorded interaction through the real client, in any call style.

``target(it)`` names the SDK method a recorded request was made with (from its URL and
method) and the arguments to make it again; ``run(it, style, is_async)`` makes the call the
way an application or framework would (plain, ``stream=True``, a stream helper,
``with_raw_response``, ``with_streaming_response`` read by bytes, lines, text, parsed events,
``read``/``text``/``json``) and returns what the caller received, in a comparable form.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import urlparse

from .. import cassettes
from .replay import anthropic_client, call_kwargs, openai_client


@dataclass(frozen=True)
class Target:
    """The SDK method of a recorded request: ``path`` from the client (e.g.
    ``chat.completions.create``), positional and keyword arguments."""

    sdk: str
    path: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    stream: bool


_OPENAI_POST = {
    "chat/completions": "chat.completions.create",
    "responses": "responses.create",
    "responses/compact": "responses.compact",
    "responses/input_tokens": "responses.input_tokens.count",
    "completions": "completions.create",
    "embeddings": "embeddings.create",
}


def _multipart_model(it: cassettes.Interaction) -> str | None:
    found = re.search(r'name="model"\r?\n\r?\n([^\r\n]+)', it.request_text if hasattr(it, "request_text") else "")
    return found.group(1) if found else None


def target(it: cassettes.Interaction) -> Target | None:
    """The SDK method and arguments of a recorded request; None for endpoints not replayed."""
    path = urlparse(it.uri).path
    body = it.request_body if isinstance(it.request_body, dict) else {}
    stream = body.get("stream") is True
    if it.provider == "anthropic":
        if path.endswith("/v1/messages"):
            beta = "beta=true" in it.uri
            return Target("anthropic", "beta.messages.create" if beta else "messages.create",
                          (), dict(body), stream)  # fmt: skip
        if path.endswith("/v1/messages/count_tokens"):
            return Target("anthropic", "messages.count_tokens", (), dict(body), False)
        return None
    rest = path.split("/v1/", 1)[-1] if "/v1/" in path else path.lstrip("/")
    rest = re.sub(r"^openai/deployments/[^/]+/", "", rest)
    if it.method == "POST" and rest in _OPENAI_POST:
        return Target("openai", _OPENAI_POST[rest], (), dict(body), stream)
    runs = re.fullmatch(r"threads/([^/]+)/runs(?:/([^/]+))?", rest)
    if runs:
        thread, run = runs.groups()
        if it.method == "POST" and run is None:
            return Target("openai", "beta.threads.runs.create", (thread,), dict(body), stream)
        if it.method == "GET" and run is not None:
            return Target("openai", "beta.threads.runs.retrieve", (run,), {"thread_id": thread}, False)
    retrieve = re.fullmatch(r"responses/([^/]+)", rest)
    if retrieve and it.method == "GET":
        query = dict(part.split("=", 1) for part in urlparse(it.uri).query.split("&") if "=" in part)
        stream = query.get("stream") == "true"
        return Target("openai", "responses.retrieve", (retrieve.group(1),),
                      {"stream": True} if stream else {}, stream)  # fmt: skip
    if it.method == "POST" and rest == "audio/transcriptions":
        return Target("openai", "audio.transcriptions.create", (),
                      {"model": "whisper-1", "file": ("audio.wav", b"RIFF")}, False)  # fmt: skip
    return None


def client_for(it: cassettes.Interaction | list, sdk: str, is_async: bool) -> tuple[Any, Any]:
    """A real client answering with the recorded response(s), at the recorded base URL."""
    interactions = it if isinstance(it, list) else [it]
    first = interactions[0]
    parsed = urlparse(first.uri)
    if sdk == "anthropic":
        client, replay = anthropic_client(interactions, is_async=is_async)
        return client.with_options(base_url=f"{parsed.scheme}://{parsed.netloc}"), replay
    client, replay = openai_client(interactions, is_async=is_async)
    base = parsed.path.split("/v1/", 1)[0] + "/v1" if "/v1/" in parsed.path else ""
    return client.with_options(base_url=f"{parsed.scheme}://{parsed.netloc}{base}"), replay


def resolve(client: Any, path: str) -> Callable[..., Any]:
    obj = client
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _resource(client: Any, path: str, via: str | None) -> Callable[..., Any]:
    """The method, or its ``with_raw_response``/``with_streaming_response`` twin."""
    owner, _, name = path.rpartition(".")
    resource = resolve(client, owner)
    return getattr(getattr(resource, via), name) if via else getattr(resource, name)


def _dump(value: Any) -> Any:
    """A comparable form of what the caller received."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, (list, tuple)):
        return [_dump(v) for v in value]
    return value


def arguments(t: Target, method: Callable[..., Any]) -> dict[str, Any]:
    return call_kwargs(method, t.kwargs) if t.path.endswith(".create") else dict(t.kwargs)


# -- styles: each returns what the caller got ------------------------------------------------
def _sync(t: Target, client: Any, style: str) -> Any:
    kind, _, how = style.partition(":")
    if kind == "plain":
        result = _resource(client, t.path, None)(*t.args, **arguments(t, _resource(client, t.path, None)))
        return _dump(list(result) if t.stream else result)
    if kind == "raw":
        raw = _resource(client, t.path, "with_raw_response")(*t.args, **arguments(t, _resource(client, t.path, None)))
        if how == "parse":
            parsed = raw.parse()
            return _dump(list(parsed) if t.stream else parsed)
        value = getattr(raw, how)  # content / text: properties of the legacy response, else methods
        return value() if callable(value) else value
    if kind == "streaming":
        manager = _resource(client, t.path, "with_streaming_response")(*t.args, **arguments(t, _resource(client, t.path, None)))
        with manager as response:
            if how == "parse":
                parsed = response.parse()
                return _dump(list(parsed) if t.stream else parsed)
            if how.startswith("iter_"):
                return list(getattr(response, how)())
            return getattr(response, how)()  # read / text / json
    if kind == "helper":
        return _helper(t, client, how)
    raise ValueError(style)


def _helper(t: Target, client: Any, how: str) -> Any:
    """The SDKs' stream helpers: ``.stream()`` managers, their events, text and final message."""
    kwargs = {k: v for k, v in t.kwargs.items() if k not in ("stream", "stream_options")}
    owner = t.path.rpartition(".")[0]
    method = resolve(client, owner + ".stream")
    with method(**call_kwargs(method, kwargs)) as stream:
        if how == "text_stream":
            seen = list(stream.text_stream)
        elif how == "until_done":
            stream.until_done()
            seen = None
        else:
            seen = [type(e).__name__ for e in stream]
        final = getattr(stream, {"anthropic": "get_final_message"}.get(t.sdk, "get_final_completion"), None)
        if final is None or "responses" in owner:
            final = stream.get_final_response
        return seen, _dump(final())


async def _async(t: Target, client: Any, style: str) -> Any:
    kind, _, how = style.partition(":")
    plain = _resource(client, t.path, None)
    if kind == "plain":
        result = await plain(*t.args, **arguments(t, plain))
        return _dump([c async for c in result] if t.stream else result)
    if kind == "raw":
        raw = await _resource(client, t.path, "with_raw_response")(*t.args, **arguments(t, plain))
        if how == "parse":
            parsed = raw.parse()
            if inspect.isawaitable(parsed):
                parsed = await parsed
            return _dump([c async for c in parsed] if t.stream else parsed)
        value = getattr(raw, how)
        return (await value()) if callable(value) else value
    if kind == "streaming":
        async with _resource(client, t.path, "with_streaming_response")(*t.args, **arguments(t, plain)) as response:
            if how == "parse":
                parsed = await response.parse()
                return _dump([c async for c in parsed] if t.stream else parsed)
            if how.startswith("iter_"):
                return [c async for c in getattr(response, how)()]
            return await getattr(response, how)()
    if kind == "helper":
        kwargs = {k: v for k, v in t.kwargs.items() if k not in ("stream", "stream_options")}
        owner = t.path.rpartition(".")[0]
        method = resolve(client, owner + ".stream")
        async with method(**call_kwargs(method, kwargs)) as stream:
            if how == "text_stream":
                seen = [x async for x in stream.text_stream]
            elif how == "until_done":
                await stream.until_done()
                seen = None
            else:
                seen = [type(e).__name__ async for e in stream]
            name = "get_final_message" if t.sdk == "anthropic" else (
                "get_final_response" if "responses" in owner else "get_final_completion")
            return seen, _dump(await getattr(stream, name)())
    raise ValueError(style)


def run(it: cassettes.Interaction, style: str, is_async: bool, t: Target | None = None) -> Any:
    """Make the recorded call in ``style`` through a fresh real client; what the caller got."""
    t = t or target(it)
    assert t is not None, f"no SDK method for {it.method} {it.uri}"
    client, _ = client_for(it, t.sdk, is_async)
    if is_async:
        return asyncio.run(_async(t, client, style))
    return _sync(t, client, style)


def as_text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr)
