"""Real SDK clients replaying recorded traffic: a mock transport serves each cassette's
responses, in order, to the real ``openai``/``anthropic`` client.

openai >= 3 and anthropic >= 2 run on ``httpx2``; older majors on ``httpx``. The transport
module is chosen to match the installed client, so the same tests run on both majors.
"""

from __future__ import annotations

import importlib
import inspect
import json
from typing import Any

from .. import cassettes

_KEEP_HEADERS = ("content-type", "request-id", "x-request-id", "openai-processing-ms")


def http_module(sdk: str) -> Any:
    """``httpx2`` or ``httpx``: whichever the installed SDK uses."""
    base = importlib.import_module(f"{sdk}._base_client")
    return importlib.import_module("httpx2" if hasattr(base, "httpx2") else "httpx")


def call_kwargs(method: Any, body: dict[str, Any]) -> dict[str, Any]:
    """The recorded request body as keyword arguments of the client's ``method``: what it names,
    the rest (fields this SDK version has no parameter for) through ``extra_body``."""
    params = inspect.signature(method).parameters
    known = {k: v for k, v in body.items() if k in params}
    extra = {k: v for k, v in body.items() if k not in params}
    if extra:
        known["extra_body"] = extra
    return known


def major(sdk: str) -> int:
    return int(importlib.import_module(sdk).__version__.split(".")[0])


class Replay:
    """Serves recorded responses in order; records what the client actually sent."""

    def __init__(self, interactions: list[cassettes.Interaction], sdk: str) -> None:
        self.interactions = list(interactions)
        self.sent: list[Any] = []
        self.http = http_module(sdk)

    def handler(self, request: Any) -> Any:
        self.sent.append(request)
        if not self.interactions:
            raise AssertionError(f"no recorded response left for {request.method} {request.url}")
        it = self.interactions.pop(0)
        headers = {}
        for key, value in it.response_headers.items():
            if key.lower() in _KEEP_HEADERS:
                headers[key] = value[0] if isinstance(value, list) else value
        if it.is_stream:
            headers["content-type"] = "text/event-stream"
        return self.http.Response(it.status, headers=headers, content=it.response_text.encode())

    def sent_json(self, index: int = -1) -> Any:
        return json.loads(self.sent[index].content)

    def sync_client(self) -> Any:
        return self.http.Client(transport=self.http.MockTransport(self.handler))

    def async_client(self) -> Any:
        return self.http.AsyncClient(transport=self.http.MockTransport(self.handler))


def openai_client(interactions: list[cassettes.Interaction], *, is_async: bool = False, azure: bool = False):
    """A real OpenAI (or Azure OpenAI) client answering from ``interactions``; (client, replay)."""
    import openai

    replay = Replay(interactions, "openai")
    http_client = replay.async_client() if is_async else replay.sync_client()
    if azure:
        cls = openai.AsyncAzureOpenAI if is_async else openai.AzureOpenAI
        client = cls(api_key="test", api_version="2024-10-21", http_client=http_client,
                     azure_endpoint="https://example-resource.openai.azure.com")  # fmt: skip
    else:
        cls = openai.AsyncOpenAI if is_async else openai.OpenAI
        client = cls(api_key="test", http_client=http_client, max_retries=0)
    return client, replay


def anthropic_client(interactions: list[cassettes.Interaction], *, is_async: bool = False, **options: Any):
    """A real Anthropic client answering from ``interactions``; (client, replay)."""
    import anthropic

    replay = Replay(interactions, "anthropic")
    cls = anthropic.AsyncAnthropic if is_async else anthropic.Anthropic
    http_client = replay.async_client() if is_async else replay.sync_client()
    return cls(api_key="test", http_client=http_client, max_retries=0, **options), replay
