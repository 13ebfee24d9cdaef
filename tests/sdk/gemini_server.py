"""A local Gemini API / Vertex AI server speaking the REST wire format the ``google-genai`` client
parses (camelCase JSON; streams as server-sent events, ``alt=sse``), for the real client.

No recording of Gemini traffic is available here, so the bodies follow the documented format
(the fields of the REST reference and of the SDK's own ``_GenerateContentResponse_from_mldev``
/ ``_from_vertex`` converters), said so in each test.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


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


class GeminiServer:
    """Answers each request with the next queued body (a dict, or a list of chunks for a
    stream); records the requests' paths and JSON bodies."""

    def __init__(self) -> None:
        self.queue: list[Any] = []
        self.requests: list[tuple[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("content-length") or 0)
                server.requests.append((self.path, json.loads(self.rfile.read(length) or b"null")))
                body = server.queue.pop(0) if server.queue else {"error": {"code": 500, "message": "nothing queued"}}
                status = 200
                if isinstance(body, list):  # a stream: one SSE event per chunk
                    payload = "".join(f"data: {json.dumps(chunk)}\r\n\r\n" for chunk in body).encode()
                    kind = "text/event-stream"
                else:
                    payload, kind = json.dumps(body).encode(), "application/json"
                    if "error" in body:
                        status = body["error"]["code"]
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def client(self, vertexai: bool = False) -> Any:
        """A real ``google.genai.Client`` talking to this server (Vertex AI in express mode)."""
        from google import genai
        from google.genai import types

        options = types.HttpOptions(base_url=self.url, retry_options=types.HttpRetryOptions(attempts=1))
        if vertexai:
            return genai.Client(vertexai=True, api_key="test-key", http_options=options)
        return genai.Client(api_key="test-key", http_options=options)
