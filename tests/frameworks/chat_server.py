"""A local OpenAI-compatible Chat Completions server for the frameworks' own model clients:
each request is answered with the next prepared reply, as JSON or, when the request asks to
stream, as server-sent chunks (the usage chunk only when ``stream_options.include_usage``
asks for it, as OpenAI does)."""

from __future__ import annotations

import json
from typing import Any

from ..local_server import Answer, LocalServer
__all__ = ["ChatServer", "completion", "tool_call"]


def completion(message: dict, prompt: int, completion_tokens: int) -> dict:
    """A chat completion answering ``message`` with these token counts."""
    return {"id": f"chatcmpl-{prompt}", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", **message},
                         "finish_reason": "tool_calls" if "tool_calls" in message else "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion_tokens,
                      "total_tokens": prompt + completion_tokens}}  # fmt: skip


def tool_call(name: str, arguments: dict, call_id: str | None = None) -> dict:
    """An assistant message calling tool ``name`` with ``arguments``."""
    return {"content": None, "tool_calls": [{"id": call_id or f"call_{name}", "type": "function",
                                             "function": {"name": name, "arguments": json.dumps(arguments)}}]}  # fmt: skip


def chunks(reply: dict, include_usage: bool) -> bytes:
    """The reply as Chat Completions stream chunks (documented format), ending with [DONE]."""
    choice = reply["choices"][0]
    message = choice["message"]
    base = {"id": reply["id"], "object": "chat.completion.chunk", "created": 1, "model": reply["model"]}
    deltas: list[dict] = [{"role": "assistant", "content": ""}]
    if message.get("content"):
        deltas.append({"content": message["content"]})
    for index, call in enumerate(message.get("tool_calls") or []):
        deltas.append({"tool_calls": [{"index": index, **call}]})
    events = [{**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]} for delta in deltas]
    events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]})
    if include_usage:
        events.append({**base, "choices": [], "usage": reply["usage"]})
    lines = [f"data: {json.dumps(event)}\n\n" for event in events] + ["data: [DONE]\n\n"]
    return "".join(lines).encode()


class ChatServer:
    """``url`` (ending in ``/v1``) answers each chat completion with the next of ``replies``;
    a request past the last is answered 500 (the framework then fails the test)."""

    def __init__(self, *replies: dict) -> None:
        self.replies = list(replies)
        self.streamed: list[bool] = []
        self._server = LocalServer(self.answer)
        self.url = self._server.url + "/v1"

    def answer(self, path: str, body: Any) -> Answer:
        if not path.endswith("/chat/completions") or not self.replies:
            return 500, "application/json", b'{"error": {"message": "unexpected request"}}', {}
        reply = self.replies.pop(0)
        stream = isinstance(body, dict) and bool(body.get("stream"))
        self.streamed.append(stream)
        if not stream:
            return 200, "application/json", json.dumps(reply).encode(), {}
        include = bool(((body.get("stream_options") or {}).get("include_usage")))
        return 200, "text/event-stream", chunks(reply, include), {}

    @property
    def requests(self) -> list[Any]:
        return [body for _, body in self._server.requests]

    def close(self) -> None:
        self._server.close()
