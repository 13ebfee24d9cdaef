"""One coercion rule for token counts on every backend and path (``usage.check_token_count``),
through the real clients: an input-token count sent as ``true``, ``"10"``, ``10.7``, ``-5`` or
``2**70`` makes that response's usage unknown (no input tokens recorded, a ``usage_invalid``
fault counted), never 1, 10 or a rounded 10; ``12.0`` is 12. The responses follow each
provider's documented format, served to the real openai (``create``, the ``.parse()`` and
``.stream()`` helpers), anthropic, google-genai, boto3 and litellm clients."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Callable
from typing import Any

import pydantic
import pytest

from otel_tokens.capture.sdk import anthropic as anthropic_sdk
from otel_tokens.capture.sdk import bedrock_patches
from otel_tokens.capture.sdk import google_genai_patches
from otel_tokens.capture.sdk import litellm_patches
from otel_tokens.capture.sdk import openai as openai_sdk  # fmt: skip

from .. import cassettes
from ..telemetry.conftest import handling
from .replay import anthropic_client, openai_client
from .test_full_bill import (
    OPENAI,
    anthropic_usage,
    chat,
    message,
    response,
    responses_usage,
    served,
)

BAD = {"true": True, "numeric string": "10", "fraction": 10.7, "negative": -5, "beyond int64": 2**70}
VALUES = {**BAD, "integral float": 12.0}


def _sse_interaction(body: str, uri: str = OPENAI) -> cassettes.Interaction:
    return cassettes.Interaction("documented", 0, "POST", uri, None, 200,
                                 {"content-type": ["text/event-stream"]}, body)  # fmt: skip


# -- one function per path: sends a response whose input-token count is ``value`` ----------------

def openai_chat(value: Any) -> None:
    body = chat("gpt-4o-mini", "default", 100, 10)
    body["usage"]["prompt_tokens"] = value
    client, _ = openai_client(served(body))
    client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])


def openai_chat_stream(value: Any) -> None:
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini"}
    events = [{**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "ok"},
                                     "finish_reason": "stop"}]},
              {**chunk, "choices": [], "usage": {"prompt_tokens": value, "completion_tokens": 10,
                                                  "total_tokens": 110}}]  # fmt: skip
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    client, _ = openai_client([_sse_interaction(body)])
    for _ in client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}],
                                            stream=True, stream_options={"include_usage": True}):  # fmt: skip
        pass


def openai_responses(value: Any) -> None:
    usage = responses_usage(100, 10)
    usage["input_tokens"] = value
    item = {"type": "message", "id": "m", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": "ok", "annotations": []}]}  # fmt: skip
    client, _ = openai_client(served(response("gpt-4.1", [item], usage)))
    client.responses.create(model="gpt-4.1", input="hi")


# -- openai's structured-output helpers: .parse() rebuilds the object of the body (post-parser),
#    .stream() reads a create(stream=True) through its own state ------------------------------
class Answer(pydantic.BaseModel):
    answer: str


def _parsed_chat(value: Any) -> list[cassettes.Interaction]:
    body = chat("gpt-4o-mini", "default", 100, 10)
    body["choices"][0]["message"]["content"] = '{"answer": "ok"}'
    body["usage"]["prompt_tokens"] = value
    return served(body)


def _check_answer(parsed: Any) -> None:  # the host's structured result, whatever the usage said
    assert parsed.answer == "ok", parsed


def openai_chat_parse(value: Any) -> None:
    client, _ = openai_client(_parsed_chat(value))
    result = client.chat.completions.parse(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}],
                                           response_format=Answer)  # fmt: skip
    _check_answer(result.choices[0].message.parsed)


def openai_chat_parse_async(value: Any) -> None:
    client, _ = openai_client(_parsed_chat(value), is_async=True)
    result = asyncio.run(client.chat.completions.parse(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], response_format=Answer))
    _check_answer(result.choices[0].message.parsed)


def openai_chat_parse_raw(value: Any) -> None:
    client, _ = openai_client(_parsed_chat(value))
    raw = client.chat.completions.with_raw_response.parse(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], response_format=Answer)
    _check_answer(raw.parse().choices[0].message.parsed)


def _output_message(text: str) -> dict[str, Any]:
    return {"type": "message", "id": "m", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}  # fmt: skip


def openai_responses_parse(value: Any) -> None:
    usage = responses_usage(100, 10)
    usage["input_tokens"] = value
    client, _ = openai_client(served(response("gpt-4.1", [_output_message('{"answer": "ok"}')], usage)))
    _check_answer(client.responses.parse(model="gpt-4.1", input="hi", text_format=Answer).output_parsed)


def _chat_events(value: Any, content: str = "ok") -> str:
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini"}
    events = [{**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": content},
                                     "finish_reason": "stop"}]},
              {**chunk, "choices": [], "usage": {"prompt_tokens": value, "completion_tokens": 10,
                                                  "total_tokens": 110}}]  # fmt: skip
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"


def openai_chat_stream_helper(value: Any) -> None:
    client, _ = openai_client([_sse_interaction(_chat_events(value, '{"answer": "ok"}'))])
    with client.chat.completions.stream(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}],
                                        response_format=Answer, stream_options={"include_usage": True}) as stream:  # fmt: skip
        for _ in stream:
            pass
        _check_answer(stream.get_final_completion().choices[0].message.parsed)


def openai_responses_stream_helper(value: Any) -> None:
    usage = responses_usage(100, 10)
    usage["input_tokens"] = value
    done = response("gpt-4.1", [_output_message('{"answer": "ok"}')], usage)
    events = [{"type": "response.created", "sequence_number": 0,
               "response": {**done, "status": "in_progress", "output": [], "usage": None}},
              {"type": "response.completed", "sequence_number": 1, "response": done}]  # fmt: skip
    body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    client, _ = openai_client([_sse_interaction(body)])
    with client.responses.stream(model="gpt-4.1", input="hi", text_format=Answer) as stream:
        for _ in stream:
            pass
        _check_answer(stream.get_final_response().output_parsed)


def anthropic_messages(value: Any) -> None:
    client, _ = anthropic_client(served(message(anthropic_usage(value, 10)), uri="https://api.anthropic.com/v1/messages"))
    client.messages.create(model="claude-sonnet-4-6", max_tokens=64, messages=[{"role": "user", "content": "hi"}])


def anthropic_stream(value: Any) -> None:
    start = {"type": "message_start", "message": {
        "id": "m", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6", "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": value, "output_tokens": 1}}}  # fmt: skip
    events = [start, {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                      "usage": {"output_tokens": 9}}, {"type": "message_stop"}]  # fmt: skip
    body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    client, _ = anthropic_client([_sse_interaction(body, "https://api.anthropic.com/v1/messages")])
    for _ in client.messages.create(model="claude-sonnet-4-6", max_tokens=64, stream=True,
                                    messages=[{"role": "user", "content": "hi"}]):  # fmt: skip
        pass


def _gemini(value: Any, stream: bool) -> None:
    from .gemini_server import GeminiServer, answer

    server = GeminiServer()
    try:
        body = answer("ok", {"promptTokenCount": value, "candidatesTokenCount": 10, "totalTokenCount": 110})
        server.queue.append([body] if stream else body)
        client = server.client()
        if stream:
            for _ in client.models.generate_content_stream(model="gemini-2.5-flash", contents="hi"):
                pass
        else:
            client.models.generate_content(model="gemini-2.5-flash", contents="hi")
    finally:
        server.close()


def gemini(value: Any) -> None:
    _gemini(value, stream=False)


def gemini_stream(value: Any) -> None:
    _gemini(value, stream=True)


BEDROCK_MODEL = "us.anthropic.claude-3-5-haiku-20241022-v1:0"


def _bedrock(run: Callable[[Any, Any], None]) -> None:
    from .bedrock_server import BedrockServer

    server = BedrockServer()
    try:
        run(server, server.client())
    finally:
        server.close()


def bedrock_converse(value: Any) -> None:
    from .bedrock_server import Reply

    def run(server, client):
        server.queue.append(Reply({"output": {"message": {"role": "assistant", "content": [{"text": "ok"}]}},
                                   "stopReason": "end_turn", "metrics": {"latencyMs": 1},
                                   "usage": {"inputTokens": value, "outputTokens": 10, "totalTokens": 110}}))  # fmt: skip
        client.converse(modelId=BEDROCK_MODEL, messages=[{"role": "user", "content": [{"text": "hi"}]}])

    _bedrock(run)


def bedrock_converse_stream(value: Any) -> None:
    from .bedrock_server import Reply, frame

    def run(server, client):
        frames = [frame("messageStart", {"role": "assistant"}),
                  frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "ok"}}),
                  frame("messageStop", {"stopReason": "end_turn"}),
                  frame("metadata", {"usage": {"inputTokens": value, "outputTokens": 10, "totalTokens": 110},
                                     "metrics": {"latencyMs": 1}})]  # fmt: skip
        server.queue.append(Reply(None, frames=frames))
        for _ in client.converse_stream(modelId=BEDROCK_MODEL, messages=[{"role": "user", "content": [{"text": "hi"}]}])["stream"]:
            pass

    _bedrock(run)


def bedrock_invoke_model(value: Any) -> None:
    from .bedrock_server import Reply

    def run(server, client):
        server.queue.append(Reply({"id": "m", "type": "message", "role": "assistant", "content": [{"type": "text", "text": "ok"}],
                                   "stop_reason": "end_turn", "usage": {"input_tokens": value, "output_tokens": 10}}))  # fmt: skip
        client.invoke_model(modelId=BEDROCK_MODEL, body=json.dumps({"messages": []}))["body"].read()

    _bedrock(run)


def bedrock_invoke_model_headers(value: Any) -> None:
    """The token counts in InvokeModel's headers: text, so ``str(value)`` (``"True"``, ...)."""
    from .bedrock_server import Reply

    def run(server, client):
        headers = {"x-amzn-bedrock-input-token-count": str(value), "x-amzn-bedrock-output-token-count": "10"}
        server.queue.append(Reply({"id": "m", "type": "message", "role": "assistant", "content": [],
                                   "stop_reason": "end_turn"}, headers=headers))  # fmt: skip
        client.invoke_model(modelId=BEDROCK_MODEL, body=json.dumps({"messages": []}))["body"].read()

    _bedrock(run)


def bedrock_invoke_model_stream(value: Any) -> None:
    from .bedrock_server import Reply, chunk

    def run(server, client):
        events = [{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
                  {"type": "message_stop", "amazon-bedrock-invocationMetrics": {
                      "inputTokenCount": value, "outputTokenCount": 10, "invocationLatency": 3, "firstByteLatency": 1}}]  # fmt: skip
        server.queue.append(Reply(None, frames=[chunk(e) for e in events]))
        for _ in client.invoke_model_with_response_stream(modelId=BEDROCK_MODEL, body=json.dumps({"messages": []}))["body"]:
            pass

    _bedrock(run)


def _litellm(value: Any, stream: bool) -> None:
    import litellm

    from ..frameworks.test_litellm import CHAT, Server

    server = Server()
    try:
        # no cache detail: 1024 cached tokens inside a 12-token input is a record of its own kind
        usage = {**CHAT["usage"], "prompt_tokens": value, "prompt_tokens_details": None}
        if stream:
            chunk = {**CHAT, "object": "chat.completion.chunk", "usage": None}
            events = [{**chunk, "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]},
                      {**chunk, "choices": [], "usage": usage}]  # fmt: skip
            body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
            server.queue.append(("text/event-stream", body.encode()))
            for _ in litellm.completion(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}],
                                        api_base=server.url + "/v1", api_key="k", stream=True,
                                        stream_options={"include_usage": True}):  # fmt: skip
                pass
        else:
            server.json({**CHAT, "usage": usage})
            litellm.completion(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}],
                               api_base=server.url + "/v1", api_key="k")  # fmt: skip
    finally:
        server.close()


def litellm_completion(value: Any) -> None:
    _litellm(value, stream=False)


def litellm_stream(value: Any) -> None:
    _litellm(value, stream=True)


# -- litellm's own HTTP clients (not an SDK): Anthropic's and Gemini's wire formats -------------
def _anthropic_events(value: Any) -> bytes:
    start = {"type": "message_start", "message": {
        "id": "m", "type": "message", "role": "assistant", "model": "claude-3-5-haiku-20241022", "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": value, "output_tokens": 1}}}  # fmt: skip
    events = [start, {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
              {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
              {"type": "content_block_stop", "index": 0},
              {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
               "usage": {"output_tokens": 9}}, {"type": "message_stop"}]  # fmt: skip
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _gemini_body(value: Any) -> dict[str, Any]:
    return {"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": value, "candidatesTokenCount": 10, "totalTokenCount": 110},
            "modelVersion": "gemini-2.5-flash"}  # fmt: skip


def _litellm_own(model: str, body: Any, stream: bool, is_async: bool = False,
                 kind: str = "text/event-stream", **extra: Any) -> None:  # fmt: skip
    """One litellm call to ``model`` answered by ``body`` (a JSON body, or stream bytes of
    content type ``kind``); the host's answer, text and all, checked unchanged."""
    import litellm

    from ..frameworks.test_litellm import Server

    server = Server()
    options = {"stream_options": {"include_usage": True}} if stream else {}
    call = {"model": model, "messages": [{"role": "user", "content": "hi"}], "api_base": server.url,
            "api_key": "k", "stream": stream, **options, **extra}  # fmt: skip

    async def async_text() -> str:
        result = await litellm.acompletion(**call)
        if not stream:
            return result.choices[0].message.content
        return "".join([c.choices[0].delta.content or "" async for c in result if c.choices])

    def text() -> str:
        if is_async:
            return asyncio.run(async_text())
        result = litellm.completion(**call)
        if not stream:
            return result.choices[0].message.content
        return "".join(c.choices[0].delta.content or "" for c in result if c.choices)

    try:
        if stream:
            server.queue.append((kind, body))
        else:
            server.json(body)
        assert text() == "ok"
    finally:
        server.close()
        # litellm leaves a streamed response unclosed: its byte stream, in a reference cycle
        # with the response, is finalised by the cyclic collector, which may run inside
        # httpcore's pool lock during a later request, whose close then waits on that lock for
        # ever (httpcore's, with or without otel_tokens). Collected here, outside any lock.
        gc.collect()


def litellm_anthropic(value: Any) -> None:
    _litellm_own("anthropic/claude-3-5-haiku-20241022", message(anthropic_usage(value, 10)), stream=False)


def litellm_anthropic_stream(value: Any) -> None:
    _litellm_own("anthropic/claude-3-5-haiku-20241022", _anthropic_events(value), stream=True)


def litellm_anthropic_async_stream(value: Any) -> None:
    _litellm_own("anthropic/claude-3-5-haiku-20241022", _anthropic_events(value), stream=True, is_async=True)


def litellm_gemini(value: Any) -> None:
    _litellm_own("gemini/gemini-2.5-flash", _gemini_body(value), stream=False)


def litellm_gemini_stream(value: Any) -> None:
    _litellm_own("gemini/gemini-2.5-flash", f"data: {json.dumps(_gemini_body(value))}\n\n".encode(), stream=True)


def litellm_gemini_async(value: Any) -> None:
    _litellm_own("gemini/gemini-2.5-flash", _gemini_body(value), stream=False, is_async=True)


def litellm_gemini_async_stream(value: Any) -> None:
    body = f"data: {json.dumps(_gemini_body(value))}\n\n".encode()
    _litellm_own("gemini/gemini-2.5-flash", body, stream=True, is_async=True)


def litellm_bedrock_converse(value: Any) -> None:
    body = {"output": {"message": {"role": "assistant", "content": [{"text": "ok"}]}}, "stopReason": "end_turn",
            "metrics": {"latencyMs": 1}, "usage": {"inputTokens": value, "outputTokens": 10, "totalTokens": 110}}  # fmt: skip
    _litellm_own(f"bedrock/converse/{BEDROCK_MODEL}", body, stream=False, **AWS)


AWS = {"aws_region_name": "us-east-1", "aws_access_key_id": "AKIDEXAMPLE",
       "aws_secret_access_key": "secret"}  # fmt: skip


def _converse_frames(value: Any) -> bytes:
    """A ConverseStream (documented format: botocore's ``bedrock-runtime`` model) answering "ok",
    its usage in the final ``metadata`` event."""
    from .bedrock_server import frame

    return b"".join([frame("messageStart", {"role": "assistant"}),
                     frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "ok"}}),
                     frame("contentBlockStop", {"contentBlockIndex": 0}),
                     frame("messageStop", {"stopReason": "end_turn"}),
                     frame("metadata", {"usage": {"inputTokens": value, "outputTokens": 10, "totalTokens": 110},
                                        "metrics": {"latencyMs": 1}})])  # fmt: skip


def _invoke_frames(value: Any, billed: Any = None) -> bytes:
    """An InvokeModelWithResponseStream of Anthropic's events (each base64 in a ``chunk``),
    closed by Bedrock's invocation metrics (the billed counts: ``billed``, else ``value``)."""
    from .bedrock_server import chunk

    lines = _anthropic_events(value).decode().split("\n")
    events = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    events[-1]["amazon-bedrock-invocationMetrics"] = {
        "inputTokenCount": value if billed is None else billed, "outputTokenCount": 10,
        "invocationLatency": 3, "firstByteLatency": 1}  # fmt: skip
    return b"".join(chunk(e) for e in events)


def _litellm_bedrock(route: str, frames: bytes, is_async: bool) -> None:
    _litellm_own(f"bedrock/{route}/{BEDROCK_MODEL}", frames, stream=True, is_async=is_async,
                 kind="application/vnd.amazon.eventstream", **AWS)  # fmt: skip


def litellm_bedrock_converse_stream(value: Any) -> None:
    _litellm_bedrock("converse", _converse_frames(value), is_async=False)


def litellm_bedrock_converse_async_stream(value: Any) -> None:
    _litellm_bedrock("converse", _converse_frames(value), is_async=True)


def litellm_bedrock_invoke_stream(value: Any) -> None:
    _litellm_bedrock("invoke", _invoke_frames(value), is_async=False)


def litellm_bedrock_invoke_async_stream(value: Any) -> None:
    _litellm_bedrock("invoke", _invoke_frames(value), is_async=True)


def litellm_cohere(value: Any) -> None:
    """Cohere's v2 chat (documented format), over litellm's own client."""
    body = {"id": "c", "finish_reason": "COMPLETE",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
            "usage": {"billed_units": {"input_tokens": value, "output_tokens": 10},
                      "tokens": {"input_tokens": value, "output_tokens": 10}}}  # fmt: skip
    _litellm_own("cohere/command-r-plus", body, stream=False)


#: path -> (capture modules, the optional client library it needs)
PATHS: dict[str, tuple[Callable[[Any], None], tuple[Any, ...], str | None]] = {
    "openai chat": (openai_chat, (openai_sdk,), None),
    "openai chat stream": (openai_chat_stream, (openai_sdk,), None),
    "openai responses": (openai_responses, (openai_sdk,), None),
    "openai chat parse": (openai_chat_parse, (openai_sdk,), None),
    "openai chat parse async": (openai_chat_parse_async, (openai_sdk,), None),
    "openai chat parse raw": (openai_chat_parse_raw, (openai_sdk,), None),
    "openai responses parse": (openai_responses_parse, (openai_sdk,), None),
    "openai chat stream helper": (openai_chat_stream_helper, (openai_sdk,), None),
    "openai responses stream helper": (openai_responses_stream_helper, (openai_sdk,), None),
    "anthropic messages": (anthropic_messages, (anthropic_sdk,), None),
    "anthropic stream": (anthropic_stream, (anthropic_sdk,), None),
    "google-genai": (gemini, (google_genai_patches,), "google.genai"),
    "google-genai stream": (gemini_stream, (google_genai_patches,), "google.genai"),
    "bedrock converse": (bedrock_converse, (bedrock_patches,), "boto3"),
    "bedrock converse_stream": (bedrock_converse_stream, (bedrock_patches,), "boto3"),
    "bedrock invoke_model": (bedrock_invoke_model, (bedrock_patches,), "boto3"),
    "bedrock invoke_model headers": (bedrock_invoke_model_headers, (bedrock_patches,), "boto3"),
    "bedrock invoke_model_with_response_stream": (bedrock_invoke_model_stream, (bedrock_patches,), "boto3"),
    "litellm completion": (litellm_completion, (openai_sdk, litellm_patches), "litellm"),
    "litellm stream": (litellm_stream, (openai_sdk, litellm_patches), "litellm"),
    "litellm anthropic": (litellm_anthropic, (openai_sdk, litellm_patches), "litellm"),
    "litellm anthropic stream": (litellm_anthropic_stream, (openai_sdk, litellm_patches), "litellm"),
    "litellm anthropic async stream": (litellm_anthropic_async_stream, (openai_sdk, litellm_patches), "litellm"),
    "litellm gemini": (litellm_gemini, (openai_sdk, litellm_patches), "litellm"),
    "litellm gemini stream": (litellm_gemini_stream, (openai_sdk, litellm_patches), "litellm"),
    "litellm gemini async": (litellm_gemini_async, (openai_sdk, litellm_patches), "litellm"),
    "litellm gemini async stream": (litellm_gemini_async_stream, (openai_sdk, litellm_patches), "litellm"),
    "litellm bedrock converse": (litellm_bedrock_converse, (openai_sdk, litellm_patches), "litellm"),
    **{f"litellm bedrock {name}": (run, (openai_sdk, litellm_patches), "litellm") for name, run in (
        ("converse stream", litellm_bedrock_converse_stream),
        ("converse async stream", litellm_bedrock_converse_async_stream),
        ("invoke stream", litellm_bedrock_invoke_stream),
        ("invoke async stream", litellm_bedrock_invoke_async_stream))},
    "litellm cohere": (litellm_cohere, (openai_sdk, litellm_patches), "litellm"),
}

#: what the rule makes of each value: None (the usage is unknown, a usage_invalid fault) or
#: the count; a header carries text, where a count is plain decimal digits (check_token_text)
EXPECTED: dict[str, int | None] = {**dict.fromkeys(BAD), "integral float": 12}
HEADER_EXPECTED: dict[str, int | None] = {**dict.fromkeys(VALUES), "numeric string": 10}  # "True", "10", ...


def _cases():
    for path in PATHS:
        for name, value in VALUES.items():
            yield pytest.param(path, name, value, id=f"{path}-{name}")


@pytest.mark.parametrize("path, name, value", list(_cases()))
def test_one_rule_for_a_count_on_every_path(path, name, value):
    run, modules, needs = PATHS[path]
    if needs:
        pytest.importorskip(needs, reason=f"{needs} is an optional extra")
    expected = (HEADER_EXPECTED if path.endswith("headers") else EXPECTED)[name]
    with handling(*modules) as t:
        try:
            run(value)
            raised = None
        except Exception as exc:  # noqa: BLE001 - the client library itself refused the response
            raised = exc
        (span,) = t.finished()
        tokens = span.attributes.get("gen_ai.usage.input_tokens")
        invalid = t.errors().get("usage_invalid", 0)
    if raised is not None:  # passed through to the caller as it was: nothing made of the value
        reported = span.attributes.get("otel_tokens.usage.source") == "reported"
        assert expected is None and span.attributes.get("error.type"), raised
        assert tokens is None or not reported, (tokens, raised)  # at most a marked estimate
    elif expected is None:
        assert tokens is None and invalid >= 1, (tokens, invalid)  # unknown and counted: never 1, 10
    else:
        assert tokens == expected and invalid == 0, (tokens, invalid)


@pytest.mark.parametrize("value, broken", [(True, True), ("10", True), (2**70, True), (20, False)])
def test_litellm_streamed_lines_are_checked_however_the_network_splits_them(value, broken):
    """litellm's own clients' streams are watched as bytes arrive: an event cut across reads
    (here every byte a read of its own, CRLF line ends) is checked once it is whole."""
    from otel_tokens.capture.sdk.litellm_http import _Lines
    from otel_tokens.capture.sent import Sent

    sent = Sent()
    lines = _Lines(sent)
    body = _anthropic_events(value).replace(b"\n", b"\r\n")
    for i in range(len(body)):
        lines.feed(body[i:i + 1])
    lines.end()
    assert sent.usage and (sent.error is not None) == broken, sent.error


def test_litellm_a_streamed_line_beyond_the_cap_is_let_go():
    """A line longer than any usage event is dropped, not kept (memory stays bounded), and the
    lines after it are read."""
    from otel_tokens.capture.sdk import litellm_http
    from otel_tokens.capture.sent import Sent

    sent = Sent()
    lines = litellm_http._Lines(sent)
    huge = b"data: {" + b" " * (litellm_http._MAX_LINE + 10)
    for i in range(0, len(huge), 65536):
        lines.feed(huge[i:i + 65536])
    assert sum(map(len, lines.parts)) <= litellm_http._MAX_LINE + 65536
    lines.feed(b'"usage": {"input_tokens": true}}\n')  # the end of the huge line: let go
    lines.feed(b'data: {"usage": {"input_tokens": 5}}')
    lines.end()  # the last line, without a line end
    assert sent.usage and sent.error is None


@pytest.mark.parametrize("route", ["converse", "invoke"])
@pytest.mark.parametrize("value, broken", [(True, True), ("10", True), (2**70, True), (20, False)])
def test_litellm_bedrock_frames_are_checked_however_the_network_splits_them(route, value, broken):
    """Bedrock's binary frames are read (botocore's parser) as bytes arrive: a frame cut
    across reads (here every byte a read of its own) is checked once it is whole."""
    pytest.importorskip("botocore", reason="botocore's frame parser (the bedrock extra)")
    from otel_tokens.capture.sdk.litellm_http import _frames
    from otel_tokens.capture.sent import Sent

    sent = Sent()
    frames = _frames(sent)
    body = _converse_frames(value) if route == "converse" else _invoke_frames(value)
    for i in range(len(body)):
        frames.feed(body[i:i + 1])
    frames.end()
    assert sent.usage and (sent.error is not None) == broken, sent.error


def test_litellm_bedrock_billed_counts_are_held_to_the_rule_too():
    """InvokeModel's closing invocation metrics (what Bedrock bills) are usage as sent: a count
    there that breaks the rule makes the call's usage unknown, whatever the model's events said."""
    pytest.importorskip("litellm", reason="the litellm extra")
    with handling(openai_sdk, litellm_patches) as t:
        litellm_bedrock_invoke_stream(20)
        _litellm_bedrock("invoke", _invoke_frames(20, billed="20"), is_async=False)
        valid, broken = t.finished()
        assert valid.attributes["gen_ai.usage.input_tokens"] == 20
        assert broken.attributes.get("gen_ai.usage.input_tokens") is None
        assert t.errors() == {"usage_invalid": 1}


def test_litellm_a_bedrock_stream_botocore_cannot_read_is_let_go():
    """Frames that fail their checksum are litellm's to report (its own reader fails on them):
    the caller gets litellm's error as it was, and otel_tokens counts no fault of its own."""
    pytest.importorskip("litellm", reason="the litellm extra")
    body = bytearray(_converse_frames(20))
    body[-1] ^= 0xFF  # the last frame's message CRC
    with handling(openai_sdk, litellm_patches) as t:
        with pytest.raises(Exception) as raised:  # litellm's own, passed through
            _litellm_bedrock("converse", bytes(body), is_async=False)
        assert "Checksum mismatch" in str(raised.value), raised.value  # botocore's, said by litellm
        (span,) = t.finished()
        assert span.attributes.get("error.type")
        assert "internal" not in t.errors(), t.errors()


# -- an openai stream's events are read as sent by the stream itself, not per chunk object ------
def _hook_calls(run: Callable[[], None]) -> int:
    """How many times otel_tokens' per-object hook on openai's ``_process_response_data`` ran
    during ``run()``."""
    from otel_tokens.capture import sent

    code, calls = sent._openai_data.__code__, [0]

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is code:
            calls[0] += 1

    import sys

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return calls[0]


def _check_stream(t: Any, name: str) -> None:
    """The stream's span (after one non-streamed call's) says what the rule makes of ``name``."""
    _, span = t.finished()
    tokens = span.attributes.get("gen_ai.usage.input_tokens")
    invalid = t.errors().get("usage_invalid", 0)
    if EXPECTED[name] is None:
        assert tokens is None and invalid == 1, (tokens, invalid)
    else:
        assert tokens == EXPECTED[name] and invalid == 0, (tokens, invalid)


@pytest.mark.parametrize("name", ["numeric string", "beyond int64", "integral float"])
def test_an_openai_stream_is_checked_as_sent_without_the_per_chunk_hook(name):
    """Once the hook is loaded, a stream makes its chunks with the client's own method (the
    hook per chunk cost more than reading the chunk): its events' usage is checked as sent
    on its SSE decoder, with the same outcome as through the hook."""
    with handling(openai_sdk) as t:
        assert _hook_calls(lambda: openai_chat(20)) == 1  # a non-streamed body: the hook, loaded
        assert _hook_calls(lambda: openai_chat_stream(VALUES[name])) == 0
        _check_stream(t, name)


@pytest.mark.parametrize("name", ["numeric string", "integral float"])
def test_an_openai_stream_keeps_the_hook_when_another_wrapper_is_on_top(name):
    """Where another instrumentation has wrapped ``_process_response_data`` over the hook, the
    stream leaves the client alone: the hook holds each chunk object, the outcome the same."""
    import wrapt
    from openai._base_client import BaseClient

    with handling(openai_sdk) as t:
        openai_chat(20)  # the hook loaded
        ours = vars(BaseClient)["_process_response_data"]
        wrapt.wrap_function_wrapper(BaseClient, "_process_response_data",
                                    lambda wrapped, instance, args, kwargs: wrapped(*args, **kwargs))  # fmt: skip
        try:
            assert _hook_calls(lambda: openai_chat_stream(VALUES[name])) == 2  # one per chunk
        finally:
            BaseClient._process_response_data = ours
        _check_stream(t, name)
