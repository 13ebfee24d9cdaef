"""A transport answering as a provider's host does: the real ``openai``/``anthropic`` client,
pointed at the provider's real base URL, gets a response shaped as that provider sends it
(a JSON body, or server-sent events for a stream), with the headers given."""

from __future__ import annotations

import json
from typing import Any

from ..sdk.replay import http_module


class Host:
    """Answers every request with ``body`` (JSON) or ``events`` (an SSE stream)."""

    def __init__(self, sdk: str, body: Any = None, events: list[Any] | None = None,
                 headers: dict[str, str] | None = None, sse_names: bool = False) -> None:  # fmt: skip
        self.http = http_module(sdk)
        self.body, self.events, self.headers = body, events, dict(headers or {})
        self.sse_names = sse_names  # Anthropic's streams name each event
        self.sent: list[Any] = []

    def handler(self, request: Any) -> Any:
        self.sent.append(request)
        if self.events is None:
            return self.http.Response(200, headers={"content-type": "application/json", **self.headers},
                                      content=json.dumps(self.body).encode())  # fmt: skip
        lines = []
        for event in self.events:
            if isinstance(event, str):
                lines.append(f"data: {event}\n\n")
            elif self.sse_names:
                lines.append(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n")
            else:
                lines.append(f"data: {json.dumps(event)}\n\n")
        return self.http.Response(200, headers={"content-type": "text/event-stream", **self.headers},
                                  content="".join(lines).encode())  # fmt: skip

    def client(self, is_async: bool = False) -> Any:
        transport = self.http.MockTransport(self.handler)
        return (self.http.AsyncClient if is_async else self.http.Client)(transport=transport)


def chat_body(model: str, usage: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A chat completion as OpenAI-compatible providers answer it."""
    return {"id": "cmpl-1", "object": "chat.completion", "created": 1, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello there"},
                         "finish_reason": "stop"}],
            "usage": usage, **extra}  # fmt: skip


def chat_events(model: str, usage: dict[str, Any], usage_in: str = "usage") -> list[Any]:
    """A streamed chat completion: content chunks, a finishing chunk, then usage
    (``usage_in="x_groq"``: Groq's final chunk carrying it in ``x_groq.usage``)."""
    base = {"id": "cmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model}
    events: list[Any] = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hello"},
                              "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {"content": " there"}, "finish_reason": None}]},
    ]  # fmt: skip
    if usage_in == "x_groq":
        events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                       "x_groq": {"id": "req_1", "usage": usage}})  # fmt: skip
    else:
        events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        events.append({**base, "choices": [], "usage": usage})
    events.append("[DONE]")
    return events
