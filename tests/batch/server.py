"""A local server answering GET requests as OpenAI's Files API and Anthropic's Message
Batches API answer them: a batch's output file (JSONL, the shape of OpenAI's "request output
object" reference example) and a Message Batch with its ``results_url`` and results (JSONL,
the shape of Anthropic's "Retrieve Message Batch Results" example), each row with a known
usage block."""

from __future__ import annotations

import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def jsonl(rows: list[Any]) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


# -- OpenAI: a batch's output file --------------------------------------------------------------
def chat_line(n: int, model: str, prompt: int, completion: int, cached: int = 0) -> dict:
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    }
    body = {
        "id": f"chatcmpl-B{n}",
        "object": "chat.completion",
        "created": 1711475054,
        "model": model,
        "service_tier": "default",
        "system_fingerprint": None,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "2 + 2 equals 4."},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": usage,
    }
    return {
        "id": f"batch_req_{n}",
        "custom_id": f"request-{n}",
        "response": {"status_code": 200, "request_id": f"req_{n}", "body": body},
        "error": None,
    }


def response_line(n: int, model: str, inp: int, out: int, reasoning: int) -> dict:
    """A Responses API answer (``/v1/responses`` batches)."""
    usage = {"input_tokens": inp, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": out, "output_tokens_details": {"reasoning_tokens": reasoning},
             "total_tokens": inp + out}  # fmt: skip
    message = {"type": "message", "id": f"msg_{n}", "status": "completed", "role": "assistant",
               "content": [{"type": "output_text", "text": "4", "annotations": []}]}  # fmt: skip
    body = {"id": f"resp_{n}", "object": "response", "created_at": 1741476542,
            "status": "completed", "model": model, "output": [message], "usage": usage}  # fmt: skip
    return {
        "id": f"batch_req_{n}",
        "custom_id": f"request-{n}",
        "response": {"status_code": 200, "request_id": f"req_{n}", "body": body},
        "error": None,
    }


def embedding_line(n: int, model: str, tokens: int) -> dict:
    body = {
        "object": "list",
        "model": model,
        "data": [{"object": "embedding", "index": 0, "embedding": [0.1, -0.2]}],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
    return {
        "id": f"batch_req_{n}",
        "custom_id": f"request-{n}",
        "response": {"status_code": 200, "request_id": f"req_{n}", "body": body},
        "error": None,
    }


def failed_line(n: int) -> dict:
    """A request the API answered with an error status (billed nothing)."""
    body = {
        "error": {
            "message": "Invalid 'messages'",
            "type": "invalid_request_error",
            "param": "messages",
            "code": None,
        }
    }
    return {
        "id": f"batch_req_{n}",
        "custom_id": f"request-{n}",
        "response": {"status_code": 400, "request_id": f"req_{n}", "body": body},
        "error": None,
    }


def error_line(n: int) -> dict:
    """A request that failed without an HTTP answer (expired)."""
    return {
        "id": f"batch_req_{n}",
        "custom_id": f"request-{n}",
        "response": None,
        "error": {
            "code": "batch_expired",
            "message": "This request could not be executed before the completion window expired.",
        },
    }


# -- Anthropic: a Message Batch and its results --------------------------------------------------
def succeeded(n: int, model: str, inp: int, out: int, read: int = 0, write: int = 0) -> dict:
    usage = {
        "input_tokens": inp,
        "output_tokens": out,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": write,
        "service_tier": "batch",
    }
    message = {
        "id": f"msg_0{n}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": "Hello again!"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": usage,
    }
    return {"custom_id": f"request-{n}", "result": {"type": "succeeded", "message": message}}


def errored(n: int) -> dict:
    error = {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "Validation error: max_tokens"},
    }
    return {"custom_id": f"request-{n}", "result": {"type": "errored", "error": error}}


def ended(n: int, kind: str) -> dict:
    """A ``canceled`` or ``expired`` row."""
    return {"custom_id": f"request-{n}", "result": {"type": kind}}


def message_batch(batch_id: str, results_url: str) -> dict:
    return {
        "id": batch_id,
        "type": "message_batch",
        "processing_status": "ended",
        "request_counts": {
            "processing": 0,
            "succeeded": 2,
            "errored": 1,
            "canceled": 1,
            "expired": 1,
        },
        "ended_at": "2024-09-24T18:37:24.100435Z",
        "created_at": "2024-09-24T18:37:24.100435Z",
        "expires_at": "2024-09-25T18:37:24.100435Z",
        "archived_at": None,
        "cancel_initiated_at": None,
        "results_url": results_url,
    }


class BatchServer:
    """GET ``path`` -> (content type, bytes) from :attr:`files`; every path asked is kept."""

    def __init__(self) -> None:
        self.files: dict[str, tuple[str, bytes]] = {}
        self.paths: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.paths.append(self.path)
                kind, payload = server.files.get(self.path.split("?")[0], ("text/plain", b""))
                self.send_response(200 if payload else 404)
                self.send_header("content-type", kind)
                if payload[:2] == b"\x1f\x8b":  # gzip's magic number
                    self.send_header("content-encoding", "gzip")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}"
        self.openai_url, self.anthropic_url = f"{self.url}/oa/v1", f"{self.url}/an"
        threading.Thread(target=self._http.serve_forever, daemon=True).start()

    def output_file(self, file_id: str, rows: list[dict], gzipped: bool = False) -> None:
        """An OpenAI file's content (``gzipped``: sent with a gzip content encoding)."""
        content = gzip.compress(jsonl(rows)) if gzipped else jsonl(rows)
        self.files[f"/oa/v1/files/{file_id}/content"] = ("application/octet-stream", content)

    def batch(self, batch_id: str, rows: list[dict]) -> None:
        """An ended Message Batch and its results."""
        base = f"/an/v1/messages/batches/{batch_id}"
        batch = message_batch(batch_id, f"{self.url}{base}/results")
        self.files[base] = ("application/json", json.dumps(batch).encode())
        self.files[f"{base}/results"] = ("application/binary", jsonl(rows))

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()
