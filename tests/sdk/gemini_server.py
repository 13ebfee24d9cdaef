"""A local Gemini API / Vertex AI server speaking the REST wire format the ``google-genai`` client
parses (camelCase JSON; streams as server-sent events, ``alt=sse``), for the real client.

No recording of Gemini traffic is available here, so the bodies follow the documented format
(the fields of the REST reference and of the SDK's own ``_GenerateContentResponse_from_mldev``
/ ``_from_vertex`` converters), said so in each test.
"""

from __future__ import annotations

import json
from typing import Any

from ..local_server import Answer, LocalServer


def answer(text: str, usage: dict[str, Any] | None, model: str = "gemini-2.5-flash",
           reason: str | None = "STOP", response_id: str = "resp-gemini-1") -> dict[str, Any]:  # fmt: skip
    """One ``GenerateContentResponse`` body."""
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}
    if reason:
        candidate["finishReason"] = reason
    body: dict[str, Any] = {"candidates": [candidate], "modelVersion": model, "responseId": response_id}
    if usage is not None:
        body["usageMetadata"] = usage
    return body


class GeminiServer(LocalServer):
    """Answers each request with the next queued body (a dict, or a list of chunks for a
    stream); records the requests' paths and JSON bodies."""

    def __init__(self) -> None:
        self.queue: list[Any] = []
        super().__init__(self._answer)

    def _answer(self, path: str, body: Any) -> Answer:
        reply = self.queue.pop(0) if self.queue else {"error": {"code": 500, "message": "nothing queued"}}
        if isinstance(reply, list):  # a stream: one SSE event per chunk
            payload = "".join(f"data: {json.dumps(chunk)}\r\n\r\n" for chunk in reply).encode()
            return 200, "text/event-stream", payload, {}
        status = reply["error"]["code"] if "error" in reply else 200
        return status, "application/json", json.dumps(reply).encode(), {}

    def client(self, vertexai: bool = False) -> Any:
        """A real ``google.genai.Client`` talking to this server (Vertex AI in express mode)."""
        from google import genai
        from google.genai import types

        options = types.HttpOptions(base_url=self.url, retry_options=types.HttpRetryOptions(attempts=1))
        if vertexai:
            return genai.Client(vertexai=True, api_key="test-key", http_options=options)
        return genai.Client(api_key="test-key", http_options=options)
