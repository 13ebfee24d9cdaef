"""A local server answering in each provider's own wire shape (documented shapes: no public
recording of these providers' traffic is at hand), with a known usage block, whole or
streamed as the provider streams it: OpenAI-compatible chat (Groq's usage in ``x_groq`` on a
stream), embeddings, Cohere v2 (chat, server-sent events, embed), Ollama (NDJSON)."""

from __future__ import annotations

import json
from typing import Any

from ..local_server import Answer, LocalServer
from ..providers.hosts import chat_body, chat_events

#: the usage every OpenAI-shaped answer reports
USAGE = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}
EMBED_USAGE = {"prompt_tokens": 9, "total_tokens": 9}


def sse(events: list[Any], named: bool = False) -> bytes:
    """Server-sent events (``named``: an ``event:`` line naming each, as Cohere and Anthropic
    send them)."""
    out = []
    for event in events:
        if isinstance(event, str):
            out.append(f"data: {event}\n\n")
        elif named:
            out.append(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n")
        else:
            out.append(f"data: {json.dumps(event)}\n\n")
    return "".join(out).encode()


def ndjson(objects: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(o) + "\n" for o in objects).encode()


# -- OpenAI-compatible -----------------------------------------------------------------------------
def openai_answer(path: str, body: dict[str, Any], usage_in: str = "usage") -> Answer:
    model = body.get("model") or "deployment-model"
    if path.endswith("/embeddings"):
        data = {
            "id": "emb-1",
            "object": "list",
            "model": model,
            "usage": EMBED_USAGE,
            "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2]}],
        }
        return 200, "application/json", json.dumps(data).encode(), {}
    if body.get("stream"):
        return 200, "text/event-stream", sse(chat_events(model, USAGE, usage_in)), {}
    return 200, "application/json", json.dumps(chat_body(model, USAGE)).encode(), {}


# -- Cohere v2 -----------------------------------------------------------------------------------
COHERE_BILLED = {"input_tokens": 11, "output_tokens": 5}
COHERE_TOKENS = {"input_tokens": 211, "output_tokens": 5}


def cohere_answer(path: str, body: dict[str, Any]) -> Answer:
    usage = {"billed_units": COHERE_BILLED, "tokens": COHERE_TOKENS}
    if path.endswith("/embed"):
        data = {
            "id": "emb-1",
            "texts": body.get("texts"),
            "response_type": "embeddings_by_type",
            "embeddings": {"float": [[0.1, 0.2] for _ in body.get("texts") or ()]},
            "meta": {"api_version": {"version": "2"}, "billed_units": {"input_tokens": 4}},
        }
        return 200, "application/json", json.dumps(data).encode(), {}
    if body.get("stream"):
        events = [
            {
                "type": "message-start",
                "id": "co-1",
                "delta": {"message": {"role": "assistant", "content": []}},
            },
            {
                "type": "content-start",
                "index": 0,
                "delta": {"message": {"content": {"type": "text", "text": ""}}},
            },
            {
                "type": "content-delta",
                "index": 0,
                "delta": {"message": {"content": {"text": "Hello"}}},
            },
            {
                "type": "content-delta",
                "index": 0,
                "delta": {"message": {"content": {"text": " there"}}},
            },
            {"type": "content-end", "index": 0},
            {"type": "message-end", "delta": {"finish_reason": "COMPLETE", "usage": usage}},
        ]
        return 200, "text/event-stream", sse(events, named=True), {}
    data = {
        "id": "co-1",
        "finish_reason": "COMPLETE",
        "usage": usage,
        "message": {"role": "assistant", "content": [{"type": "text", "text": "Hello there"}]},
    }
    return 200, "application/json", json.dumps(data).encode(), {}


# -- Ollama ----------------------------------------------------------------------------------------
OLLAMA_COUNTS = {"prompt_eval_count": 26, "eval_count": 12}


def _ollama_last(model: str, field: str) -> dict[str, Any]:
    last = {
        "model": model,
        "created_at": "2025-01-01T00:00:00Z",
        "done": True,
        "done_reason": "stop",
        "total_duration": 5043500667,
        "load_duration": 5025959,
        "prompt_eval_duration": 325953000,
        "eval_duration": 4709213000,
        **OLLAMA_COUNTS,
    }
    if field == "message":
        last["message"] = {"role": "assistant", "content": ""}
    else:
        last["response"], last["context"] = "", [1, 2, 3]
    return last


def ollama_answer(path: str, body: dict[str, Any]) -> Answer:
    model = body.get("model")
    if path.endswith("/api/embed"):
        data = {
            "model": model,
            "embeddings": [[0.1, 0.2]],
            "total_duration": 14143917,
            "load_duration": 1019500,
            "prompt_eval_count": 8,
        }
        return 200, "application/json", json.dumps(data).encode(), {}
    field = "message" if path.endswith("/api/chat") else "response"
    last = _ollama_last(model, field)
    if body.get("stream") is False:
        whole = {
            **last,
            field: {"role": "assistant", "content": "Hello there"}
            if field == "message"
            else "Hello there",
        }
        return 200, "application/json", json.dumps(whole).encode(), {}
    parts = []
    for text in ("Hello", " there"):
        part = {"model": model, "created_at": "2025-01-01T00:00:00Z", "done": False}
        part[field] = {"role": "assistant", "content": text} if field == "message" else text
        parts.append(part)
    return 200, "application/x-ndjson", ndjson([*parts, last]), {}


def any_answer(path: str, body: Any) -> Answer:
    """Each path answered in its provider's shape (Groq's stream usage in ``x_groq`` under
    ``/openai/``, Groq's own path)."""
    body = body if isinstance(body, dict) else {}
    path = path.partition("?")[0]
    if path.startswith("/api/"):
        return ollama_answer(path, body)
    if path.startswith(("/v2/", "/v1/embed")) and not path.endswith("/embeddings"):
        return cohere_answer(path, body)
    return openai_answer(path, body, "x_groq" if path.startswith("/openai/") else "usage")


class WireServer(LocalServer):
    """A real HTTP server on 127.0.0.1 answering every provider's shape (:func:`any_answer`)."""

    def __init__(self) -> None:
        super().__init__(any_answer)
