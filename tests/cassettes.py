"""Recorded API traffic (VCR.py cassettes in ../shared/fixtures/cassettes), read in place.

The corpus lives beside the repository, never in it; on a user's own clone it is absent and
the tests that need it skip with a clear reason.
"""

from __future__ import annotations

import gzip
import json
import pathlib
from dataclasses import dataclass
from typing import Any, Iterator

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "fixtures"
CASSETTES = SHARED / "cassettes"


def require(path: pathlib.Path = CASSETTES) -> pathlib.Path:
    """The folder, or a skip saying why (the shared corpus is not beside this clone)."""
    if not path.is_dir():
        pytest.skip(f"shared fixtures not found at {path} (they sit beside the repository "
                    "in the project's workspace and CI, not in a clone)")  # fmt: skip
    return path


@dataclass(frozen=True)
class Interaction:
    """One recorded request/response pair."""

    cassette: str
    index: int
    method: str
    uri: str
    request_body: Any  # parsed JSON, or None
    status: int
    response_headers: dict[str, list[str]]
    response_text: str

    @property
    def provider(self) -> str:
        return "anthropic" if "anthropic" in self.uri else "openai"

    @property
    def host(self) -> str:
        from urllib.parse import urlparse

        return urlparse(self.uri).hostname or ""

    @property
    def is_stream(self) -> bool:
        return self.response_text.lstrip().startswith(("data:", "event:"))

    def response_json(self) -> Any:
        return json.loads(self.response_text)

    def sse_events(self) -> list[Any]:
        """The JSON payloads of a server-sent-events body, in order (``[DONE]`` dropped)."""
        events = []
        for line in self.response_text.splitlines():
            if line.startswith("data:"):
                data = line[5:].strip()
                if data and data != "[DONE]":
                    events.append(json.loads(data))
        return events


def _text(value: Any) -> str:
    if isinstance(value, dict):
        value = value.get("string", "")
    if isinstance(value, bytes):
        if value[:2] == b"\x1f\x8b":  # recorded as sent: gzip-compressed
            value = gzip.decompress(value)
        value = value.decode("utf-8", errors="replace")  # a binary body (an image) stays opaque
    return value or ""


def _body(side: dict) -> str:
    """A recorded body as text: ``body`` as recorded, or ``parsed_body`` (pydantic-ai's
    recordings keep JSON bodies parsed) serialized back to JSON."""
    if side.get("parsed_body") is not None:
        return json.dumps(side["parsed_body"])
    return _text(side.get("body"))


def load(path: pathlib.Path) -> list[Interaction]:
    """Every interaction of one cassette file."""
    import yaml

    data = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # C: ~10x faster
    out = []
    for i, item in enumerate(data.get("interactions") or []):
        req, resp = item["request"], item["response"]
        body = _body(req)
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        out.append(Interaction(
            cassette=f"{path.parent.name}/{path.name}", index=i, method=req["method"],
            uri=req["uri"], request_body=parsed, status=int(resp["status"]["code"]),
            response_headers={k: v for k, v in (resp.get("headers") or {}).items()},
            response_text=_body(resp),
        ))  # fmt: skip
    return out


def all_files(folder: str | None = None) -> list[pathlib.Path]:
    """Cassette files (sorted), optionally of one folder; empty when the corpus is absent."""
    base = CASSETTES / folder if folder else CASSETTES
    return sorted(base.rglob("*.yaml")) if base.is_dir() else []


def interactions(folder: str | None = None) -> Iterator[Interaction]:
    """Every interaction of every cassette (of one folder)."""
    for path in all_files(folder):
        yield from load(path)


def reported_input_tokens(it: Interaction) -> int | None:
    """The API's own count of the request's input tokens (cache tokens included), if any."""
    if it.status != 200 or not isinstance(it.request_body, dict):
        return None
    try:
        payloads = it.sse_events() if it.is_stream else [it.response_json()]
    except ValueError:
        return None
    found = None
    for event in payloads:
        if not isinstance(event, dict):
            continue
        if it.provider == "anthropic":
            usage = (event.get("message") or {}).get("usage") if event.get("type") == "message_start" \
                else event.get("usage") if event.get("type") in (None, "message") else None
            if usage and usage.get("input_tokens") is not None:
                found = (usage["input_tokens"] + (usage.get("cache_read_input_tokens") or 0)
                         + (usage.get("cache_creation_input_tokens") or 0))  # fmt: skip
        else:
            usage = event.get("usage") or (event.get("response") or {}).get("usage")
            if usage:
                value = usage.get("prompt_tokens", usage.get("input_tokens"))
                if value is not None:
                    found = value
    return found


def api_of(it: Interaction) -> str | None:
    """The estimator's API name for an interaction (None for endpoints it does not cover)."""
    if it.provider == "anthropic":
        return "anthropic_messages" if it.uri.rstrip("/").endswith("/messages") else None
    if "/chat/completions" in it.uri:
        return "openai_chat"
    if it.uri.rstrip("/").endswith("/responses"):
        return "openai_responses"
    if it.uri.rstrip("/").endswith("/embeddings"):
        return "openai_embeddings"
    return None


def request_of(it: Interaction):
    """The recorded request as an estimator ``Request`` (None when not covered)."""
    from otel_tokens.account.estimate import Request

    api, body = api_of(it), it.request_body
    if api is None or not isinstance(body, dict):
        return None
    if api == "openai_chat":
        tools = body.get("tools") or [{"type": "function", "function": f} for f in body.get("functions") or []]
        return Request(api, body.get("model"), body.get("messages") or [], None, tools,
                       body.get("response_format"))  # fmt: skip
    if api == "openai_responses":
        return Request(api, body.get("model"), body.get("input") or [], body.get("instructions"),
                       body.get("tools") or [], body.get("text"))  # fmt: skip
    if api == "openai_embeddings":
        inputs = body.get("input")
        return Request(api, body.get("model"), [inputs] if isinstance(inputs, str) else inputs or [])
    thinking = (body.get("thinking") or {}).get("type") == "enabled"
    return Request(api, body.get("model"), body.get("messages") or [], body.get("system"),
                   body.get("tools") or [], thinking=thinking)  # fmt: skip
