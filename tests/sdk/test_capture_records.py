"""Capture only builds call records: through the real clients, what reaches the handler is one
record per call holding the request's and the response's facts, nothing priced or emitted."""

from __future__ import annotations

import contextlib
import json

import pytest

import otel_tokens
from otel_tokens import Handler, Usage
from otel_tokens.capture.sdk import anthropic as anthropic_sdk
from otel_tokens.capture.sdk import openai as openai_sdk

from ..telemetry.conftest import handling
from .replay import http_module

CHAT = {"id": "chatcmpl-7", "object": "chat.completion", "created": 0, "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "hi"}}],
        "usage": {"prompt_tokens": 30, "completion_tokens": 4,
                  "prompt_tokens_details": {"cached_tokens": 10}}}  # fmt: skip
MESSAGE = {"id": "msg_7", "type": "message", "role": "assistant", "model": "claude-test",
           "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
           "usage": {"input_tokens": 20, "output_tokens": 5, "cache_read_input_tokens": 100}}  # fmt: skip


class Recording(Handler):
    """The handler, keeping a copy of every record handed to it at the call's end."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.records: list[dict] = []

    def finish(self, call, tracking):
        self.records.append({name: getattr(call, name) for name in (
            "operation", "provider", "request_model", "stream", "server_address", "request",
            "usage", "response_model", "response_id", "finish_reasons", "error", "output_text",
            "end_attributes")})  # fmt: skip
        super().finish(call, tracking)


@contextlib.contextmanager
def recorded(*modules):
    """A :class:`Recording` handler as the process's, these modules' patches installed."""
    with handling(*modules, handler_class=Recording) as t:
        yield t.handler


@pytest.fixture
def recording():
    with recorded(openai_sdk, anthropic_sdk) as handler:
        yield handler


def _client(sdk, body):
    http = http_module(sdk)
    transport = http.MockTransport(lambda request: http.Response(200, json=body))
    module = __import__(sdk)
    cls = module.OpenAI if sdk == "openai" else module.Anthropic
    return cls(api_key="k", max_retries=0, http_client=http.Client(transport=transport))


def test_an_openai_call_hands_over_one_record_of_its_facts(recording):
    messages = [{"role": "user", "content": "hello"}]
    with otel_tokens.agent("a"):
        reply = _client("openai", CHAT).chat.completions.create(model="gpt-4o", messages=messages)
    assert reply.choices[0].message.content == "hi"
    (record,) = recording.records
    assert {k: record[k] for k in ("operation", "provider", "request_model", "stream",
                                   "server_address", "response_model", "response_id",
                                   "finish_reasons", "error", "output_text")} == {
        "operation": "chat", "provider": "openai", "request_model": "gpt-4o", "stream": False,
        "server_address": "api.openai.com", "response_model": "gpt-4o-2024-08-06",
        "response_id": "chatcmpl-7", "finish_reasons": ("stop",), "error": None, "output_text": None,
    }  # fmt: skip
    assert record["request"].api == "openai_chat" and record["request"].messages == messages
    # the usage names no provider of its own: the call's (its endpoint's) is the provider
    assert record["usage"] == Usage(input_tokens=30, output_tokens=4, cache_read_tokens=10,
                                    model="gpt-4o-2024-08-06", provider=None,
                                    response_id="chatcmpl-7")  # fmt: skip


def test_an_anthropic_call_hands_over_one_record_of_its_facts(recording):
    with otel_tokens.agent("a"):
        _client("anthropic", MESSAGE).messages.create(
            model="claude-test", max_tokens=10, messages=[{"role": "user", "content": "x"}])
    (record,) = recording.records
    assert (record["provider"], record["request_model"], record["response_id"]) == (
        "anthropic", "claude-test", "msg_7")
    assert record["usage"].input_tokens == 120 and record["usage"].cache_read_tokens == 100
    assert record["finish_reasons"] == ("end_turn",)


def test_a_stream_hands_over_its_text_only_when_no_output_was_reported(recording):
    http = http_module("openai")
    chunks = [{"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4o",
               "choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None}]}
              for word in ("one ", "two")]  # fmt: skip
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    transport = http.MockTransport(lambda request: http.Response(
        200, headers={"content-type": "text/event-stream"}, content=body.encode()))  # fmt: skip
    import openai

    client = openai.OpenAI(api_key="k", max_retries=0, http_client=http.Client(transport=transport))
    with otel_tokens.agent("a"):
        text = "".join(c.choices[0].delta.content for c in client.chat.completions.create(
            model="gpt-4o", messages=[], stream=True))  # fmt: skip
    assert text == "one two"
    (record,) = recording.records
    assert record["stream"] is True and record["usage"] is None
    assert record["output_text"] == "one two"
    assert record["end_attributes"] == {"otel_tokens.stream.end": "exhausted"}
