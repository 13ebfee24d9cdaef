"""A request's output limit (``max_tokens`` in each API's spelling) is read once, at capture,
into the call record's request (``Request.max_output_tokens``: what a fleet budget reserves):
through the real clients, a value that is not a token count read as absent."""

from __future__ import annotations

import pytest

import otel_tokens
from otel_tokens.capture.sdk import anthropic as anthropic_sdk
from otel_tokens.capture.sdk import openai as openai_sdk

from .test_capture_records import CHAT, MESSAGE, _client, recorded

RESPONSE = {"id": "resp_7", "object": "response", "created_at": 0, "model": "gpt-4o",
            "status": "completed", "output": [], "parallel_tool_calls": False, "tools": [],
            "tool_choice": "auto",
            "usage": {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7,
                      "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}}}  # fmt: skip
EMBEDDING = {"object": "list", "model": "text-embedding-3-small",
             "data": [{"object": "embedding", "index": 0, "embedding": [0.1]}],
             "usage": {"prompt_tokens": 3, "total_tokens": 3}}  # fmt: skip


def _limit(handler) -> int | None:
    (record,) = handler.records
    handler.records.clear()
    return record["request"].max_output_tokens


@pytest.mark.parametrize(("given", "read"), [
    ({"max_tokens": 50}, 50), ({"max_completion_tokens": 70, "max_tokens": 50}, 70), ({}, None),
    ({"max_tokens": 12.0}, 12), ({"max_tokens": "ten"}, None), ({"max_tokens": -3}, None),
    ({"max_tokens": True}, None), ({"max_tokens": 10.5}, None),
])  # fmt: skip
def test_openai_chat(given, read):
    with recorded(openai_sdk) as handler, otel_tokens.agent("a"):
        _client("openai", CHAT).chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}], **given)
        assert _limit(handler) == read


def test_openai_responses_embeddings_and_anthropic():
    with recorded(openai_sdk, anthropic_sdk) as handler, otel_tokens.agent("a"):
        client = _client("openai", RESPONSE)
        client.responses.create(model="gpt-4o", input="hi", max_output_tokens=80)
        assert _limit(handler) == 80
        client.responses.create(model="gpt-4o", input="hi")
        assert _limit(handler) is None
        _client("openai", EMBEDDING).embeddings.create(model="text-embedding-3-small", input="x")
        assert _limit(handler) == 0  # an embedding has no output
        _client("anthropic", MESSAGE).messages.create(
            model="claude-test", max_tokens=10, messages=[{"role": "user", "content": "x"}])
        assert _limit(handler) == 10


def test_google_genai_config():
    pytest.importorskip("google.genai", reason="google-genai is an optional extra")
    from google.genai import types

    from otel_tokens.capture.sdk import google_genai_patches

    from .gemini_server import GeminiServer, answer

    server = GeminiServer()
    try:
        with recorded(google_genai_patches) as handler, otel_tokens.agent("a"):
            client = server.client()
            for config, read in (({"max_output_tokens": 64}, 64),
                                 (types.GenerateContentConfig(max_output_tokens=65), 65),
                                 (None, None)):  # fmt: skip
                server.queue.append(answer("ok", {"promptTokenCount": 3,
                                                  "candidatesTokenCount": 1}))  # fmt: skip
                client.models.generate_content(model="gemini-2.5-flash", contents="x",
                                               config=config)  # fmt: skip
                assert _limit(handler) == read
    finally:
        server.close()


def test_bedrock_converse_inference_config():
    pytest.importorskip("boto3", reason="boto3 is an optional extra")
    from otel_tokens.capture.sdk import bedrock_patches

    from .bedrock_server import BedrockServer, Reply
    from .test_bedrock import MESSAGES, MODEL, converse_body

    server = BedrockServer()
    try:
        with recorded(bedrock_patches) as handler, otel_tokens.agent("a"):
            client = server.client()
            for extra, read in (({"inferenceConfig": {"maxTokens": 32}}, 32), ({}, None)):
                server.queue.append(Reply(converse_body()))
                client.converse(modelId=MODEL, messages=MESSAGES, **extra)
                assert _limit(handler) == read
    finally:
        server.close()
