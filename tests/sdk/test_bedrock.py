"""AWS Bedrock through the real boto3 client against a local endpoint speaking its wire formats
(documented format; see ``bedrock_server``): the four ``bedrock-runtime`` operations, usage
exact per class, costs equal to genai-prices' reading and pricing of the same response,
streams and bodies read only as the caller reads them, other AWS calls untouched."""

from __future__ import annotations

import json
from urllib.parse import unquote

import pytest

boto3 = pytest.importorskip("boto3", reason="boto3 is an optional extra (pip install otel-tokens[bedrock])")

import genai_prices  # noqa: E402

from otel_tokens.capture.sdk import bedrock_patches  # noqa: E402

from ..telemetry.conftest import handling  # noqa: E402
from .bedrock_server import BedrockServer, Reply, chunk, frame  # noqa: E402

MODEL = "us.anthropic.claude-3-5-haiku-20241022-v1:0"
USAGE = {"inputTokens": 300, "outputTokens": 80, "totalTokens": 1580, "cacheReadInputTokens": 1000,
         "cacheWriteInputTokens": 200}  # fmt: skip
EXPECTED = {"input_tokens": 1500, "output_tokens": 80, "cache_read.input_tokens": 1000,
            "cache_write.input_tokens": 200}  # fmt: skip


@pytest.fixture
def server():
    s = BedrockServer()
    yield s
    s.close()


@pytest.fixture
def telemetry():
    with handling(bedrock_patches) as t:
        yield t


def billed(usage: dict, model: str = MODEL) -> float:
    """genai-prices' own reading (its Bedrock extractor) and price of a Converse usage."""
    extracted = genai_prices.extract_usage({"usage": usage, "model": model}, provider_id="aws")
    return float(genai_prices.calc_price(extracted.usage, model, provider_id="aws").total_price)


def tokens(attrs) -> dict:
    names = ("input_tokens", "output_tokens", "cache_read.input_tokens", "cache_write.input_tokens")
    return {n: attrs.get(f"gen_ai.usage.{n}") for n in names}


def converse_body(usage: dict = USAGE) -> dict:
    return {"output": {"message": {"role": "assistant", "content": [{"text": "Hello."}]}},
            "stopReason": "end_turn", "usage": usage, "metrics": {"latencyMs": 120}}  # fmt: skip


MESSAGES = [{"role": "user", "content": [{"text": "Say hello."}]}]


def test_converse(telemetry, server):
    server.queue.append(Reply(converse_body()))
    client = server.client()
    result = client.converse(modelId=MODEL, messages=MESSAGES, system=[{"text": "Be brief."}])
    assert result["output"]["message"]["content"][0]["text"] == "Hello."
    assert [unquote(p) for p in server.paths] == [f"/model/{MODEL}/converse"]
    attrs = telemetry.span().attributes
    assert attrs["gen_ai.provider.name"] == "aws.bedrock"
    assert attrs["gen_ai.request.model"] == MODEL
    assert attrs["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert attrs["gen_ai.response.id"] == "req-1"
    assert tokens(attrs) == EXPECTED
    assert attrs["otel_tokens.cost.usd"] == pytest.approx(billed(USAGE), rel=1e-9)
    assert attrs["otel_tokens.estimate.input_tokens"] > 0


def test_converse_stream_is_read_as_the_caller_reads_it(telemetry, server):
    frames = [frame("messageStart", {"role": "assistant"}),
              frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hel"}}),
              frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "lo."}}),
              frame("contentBlockStop", {"contentBlockIndex": 0}),
              frame("messageStop", {"stopReason": "end_turn"}),
              frame("metadata", {"usage": USAGE, "metrics": {"latencyMs": 90}})]  # fmt: skip
    server.queue.append(Reply(None, frames=frames))
    client = server.client()
    response = client.converse_stream(modelId=MODEL, messages=MESSAGES)
    assert telemetry.finished() == []  # nothing read yet: the call is still open
    events = list(response["stream"])
    assert [next(iter(e)) for e in events] == ["messageStart", "contentBlockDelta", "contentBlockDelta",
                                               "contentBlockStop", "messageStop", "metadata"]  # fmt: skip
    (span,) = telemetry.finished()
    assert tokens(span.attributes) == EXPECTED
    assert span.attributes["otel_tokens.stream.end"] == "exhausted"
    assert span.attributes["otel_tokens.cost.usd"] == pytest.approx(billed(USAGE), rel=1e-9)


def test_invoke_model_takes_the_token_count_headers(telemetry, server):
    body = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-3-5-haiku-20241022",
            "content": [{"type": "text", "text": "Hi"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 21, "output_tokens": 5}}  # fmt: skip
    headers = {"x-amzn-bedrock-input-token-count": "21", "x-amzn-bedrock-output-token-count": "5"}
    server.queue.append(Reply(body, headers=headers))
    client = server.client()
    request = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 64, "messages": [{"role": "user", "content": "Hi"}]}
    result = client.invoke_model(modelId=MODEL, body=json.dumps(request))
    (span,) = telemetry.finished()  # ended before the caller reads the body
    assert json.loads(result["body"].read()) == body  # the body is the caller's, unread by us
    assert span.attributes["gen_ai.usage.input_tokens"] == 21 and span.attributes["gen_ai.usage.output_tokens"] == 5
    assert span.attributes["otel_tokens.cost.usd"] == pytest.approx(
        billed({"inputTokens": 21, "outputTokens": 5}), rel=1e-9)  # fmt: skip


def test_invoke_model_without_headers_reads_usage_from_the_body_the_caller_read(telemetry, server):
    body = {"id": "msg_2", "type": "message", "role": "assistant", "content": [{"type": "text", "text": "Hi"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 30, "output_tokens": 7, "cache_read_input_tokens": 100}}  # fmt: skip
    server.queue.append(Reply(body))
    client = server.client()
    result = client.invoke_model(modelId=MODEL, body=json.dumps({"messages": [{"role": "user", "content": "Hi"}]}))
    assert telemetry.finished() == []
    assert json.loads(result["body"].read()) == body
    attrs = telemetry.span().attributes
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.cache_read.input_tokens"]) == (130, 100)
    assert attrs["gen_ai.response.finish_reasons"] == ("end_turn",)


def test_invoke_model_with_response_stream_takes_the_invocation_metrics(telemetry, server):
    events = [{"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [],
                                                    "model": "claude", "usage": {"input_tokens": 40, "output_tokens": 1}}},
              {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hey"}},
              {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}},
              {"type": "message_stop", "amazon-bedrock-invocationMetrics": {
                  "inputTokenCount": 40, "outputTokenCount": 9, "invocationLatency": 300, "firstByteLatency": 100}}]  # fmt: skip
    server.queue.append(Reply(None, frames=[chunk(e) for e in events]))
    client = server.client()
    response = client.invoke_model_with_response_stream(modelId=MODEL, body=json.dumps({"messages": []}))
    seen = [json.loads(e["chunk"]["bytes"])["type"] for e in response["body"]]
    assert seen == ["message_start", "content_block_delta", "message_delta", "message_stop"]
    attrs = telemetry.span().attributes
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (40, 9)
    assert attrs["gen_ai.response.finish_reasons"] == ("end_turn",)


def test_a_throttled_call_fails_with_its_status(telemetry, server):
    server.queue.append(Reply({"message": "Too many requests"}, status=429,
                              headers={"x-amzn-errortype": "ThrottlingException:http://internal.amazon.com/"}))  # fmt: skip
    client = server.client()
    with pytest.raises(client.exceptions.ThrottlingException):
        client.converse(modelId=MODEL, messages=MESSAGES)
    attrs = telemetry.span().attributes
    assert attrs["error.type"] == "429"
    assert "gen_ai.usage.input_tokens" not in attrs


def test_other_operations_and_services_are_not_recorded(telemetry, server):
    server.queue.append(Reply({"guardrailId": "g", "action": "NONE", "outputs": [], "assessments": [],
                               "usage": {"topicPolicyUnits": 1}}))  # fmt: skip
    client = server.client()
    client.apply_guardrail(guardrailIdentifier="g", guardrailVersion="1", source="INPUT", content=[])
    assert telemetry.finished() == []
