"""A local HTTP server for the real client libraries: each POST is answered by a function of
(path, parsed JSON body) returning (status, content type, payload, extra headers); a
``content-length`` among the headers, above the payload's length, sends a body cut short."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

Answer = tuple[int, str, bytes, dict[str, str]]


class _Server(ThreadingHTTPServer):
    # many callers connect at once (16 in the fleet budget test, each call a new connection):
    # socketserver's backlog of 5 drops connections when the accepting thread is slow to run
    request_queue_size = 128


class LocalServer:
    def __init__(self, answer: Callable[[str, Any], Answer]) -> None:
        self.requests: list[tuple[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                try:
                    body = json.loads(raw or b"null")
                except ValueError:
                    body = None
                server.requests.append((self.path, body))
                status, kind, payload, headers = answer(self.path, body)
                self.send_response(status)
                self.send_header("content-type", kind)
                # a content-length above the payload's cuts the body short (the connection
                # closes after each answer)
                length = headers.pop("content-length", None) or str(len(payload))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("content-length", length)
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self._http = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}"
        threading.Thread(target=self._http.serve_forever, daemon=True).start()

    @property
    def paths(self) -> list[str]:
        return [path for path, _ in self.requests]

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()
