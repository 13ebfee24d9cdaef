"""Bedrock streams at the region's real endpoint: the real boto3 client (no ``endpoint_url``,
so the address is the one its region resolves to) answered through botocore's own
``before-send`` hook with event-stream frames (botocore parses them as from the wire), and
the ``anthropic`` SDK's ``AnthropicBedrock`` streaming through an httpx transport answering the
same framing. Each call is ``aws.bedrock`` at ``bedrock-runtime.<region>.amazonaws.com``,
its tokens exact, at genai-prices' Bedrock (``aws``) price. One ConverseStream answer is a
recording (pydantic-ai's, below); the other frames follow the documented shapes (see
``tests/sdk/bedrock_server``): no recording of an Anthropic model's Bedrock stream was found."""

from __future__ import annotations

import json
import math
from urllib.parse import unquote

import pytest

boto3 = pytest.importorskip("boto3", reason="boto3 is an optional extra (pip install otel-tokens[bedrock])")
anthropic = pytest.importorskip("anthropic")
genai_prices = pytest.importorskip("genai_prices")

from otel_tokens.capture.sdk import anthropic as anthropic_sdk
from otel_tokens.capture.sdk import bedrock_patches  # noqa: E402

from ..sdk.bedrock_server import chunk, frame  # noqa: E402
from ..sdk.replay import http_module  # noqa: E402
from ..telemetry.conftest import handling  # noqa: E402

REGION = "eu-central-1"
MESSAGES = [{"role": "user", "content": [{"text": "Say hello."}]}]


@pytest.fixture
def telemetry():
    with handling(bedrock_patches, anthropic_sdk) as t:
        yield t


def aws_price(model: str, **tokens: int) -> float:
    return float(genai_prices.calc_price(genai_prices.Usage(**tokens), model, provider_id="aws").total_price)


def streaming_client(frames: list[bytes], sent: list, region: str = REGION):
    """A real ``bedrock-runtime`` client of ``region`` whose request is answered, in
    botocore's ``before-send`` hook, with ``frames`` as an event-stream body."""
    import urllib3
    from botocore.awsrequest import AWSResponse

    client = boto3.client("bedrock-runtime", region_name=region, aws_access_key_id="AKIDEXAMPLE",
                          aws_secret_access_key="secret")  # fmt: skip

    def answer(request, **_):
        sent.append(request.url)
        import io

        raw = urllib3.HTTPResponse(body=io.BytesIO(b"".join(frames)), preload_content=False, status=200,
                                   headers={"content-type": "application/vnd.amazon.eventstream"})  # fmt: skip
        headers = {"content-type": "application/vnd.amazon.eventstream", "x-amzn-requestid": "req-42"}
        return AWSResponse(request.url, 200, headers, raw)

    client.meta.events.register("before-send.bedrock-runtime.*", answer)
    return client


@pytest.mark.parametrize("model", ["amazon.nova-lite-v1:0", "meta.llama3-1-8b-instruct-v1:0"])
def test_converse_stream_at_the_regions_endpoint(telemetry, model):
    usage = {"inputTokens": 420, "outputTokens": 35, "totalTokens": 455}
    frames = [frame("messageStart", {"role": "assistant"}),
              frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hello"}}),
              frame("contentBlockStop", {"contentBlockIndex": 0}),
              frame("messageStop", {"stopReason": "end_turn"}),
              frame("metadata", {"usage": usage, "metrics": {"latencyMs": 210}})]  # fmt: skip
    sent: list = []
    response = streaming_client(frames, sent).converse_stream(modelId=model, messages=MESSAGES)
    text = "".join(e["contentBlockDelta"]["delta"]["text"] for e in response["stream"] if "contentBlockDelta" in e)
    assert text == "Hello"
    assert sent[0].startswith(f"https://bedrock-runtime.{REGION}.amazonaws.com/model/")
    attrs = telemetry.span().attributes
    assert attrs["gen_ai.provider.name"] == "aws.bedrock"
    assert attrs["server.address"] == f"bedrock-runtime.{REGION}.amazonaws.com"
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (420, 35)
    assert math.isclose(attrs["otel_tokens.cost.usd"], aws_price(model, input_tokens=420, output_tokens=35),
                        rel_tol=1e-9)  # fmt: skip
    assert attrs["otel_tokens.stream.end"] == "exhausted"


#: a real ConverseStream answer, verbatim: pydantic/pydantic-ai @ 4fda38988 (MIT),
#: tests/models/cassettes/test_bedrock/test_bedrock_model_stream_empty_text_delta.yaml
#: (openai.gpt-oss-120b-1:0 in us-east-1: reasoning, text, usage 70 in / 43 out)
RECORDED_CONVERSE_STREAM = (
    "AAAAsgAAAFKKQLTFCzpldmVudC10eXBlBwAMbWVzc2FnZVN0YXJ0DTpjb250ZW50LXR5cGUHABBhcHBsaWNhdGlvbi9q"
    "c29uDTptZXNzYWdlLXR5cGUHAAVldmVudHsicCI6ImFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6QUJDREVGR0hJSktM"
    "TU5PUFFSU1RVVldYWVowIiwicm9sZSI6ImFzc2lzdGFudCJ9QP+CaAAAAKIAAABXmsrXyAs6ZXZlbnQtdHlwZQcAEWNv"
    "bnRlbnRCbG9ja0RlbHRhDTpjb250ZW50LXR5cGUHABBhcHBsaWNhdGlvbi9qc29uDTptZXNzYWdlLXR5cGUHAAVldmVu"
    "dHsiY29udGVudEJsb2NrSW5kZXgiOjAsImRlbHRhIjp7InRleHQiOiIifSwicCI6ImFiY2RlZmdoaSJ9NTLrNAAAALkA"
    "AABW+v1BzQs6ZXZlbnQtdHlwZQcAEGNvbnRlbnRCbG9ja1N0b3ANOmNvbnRlbnQtdHlwZQcAEGFwcGxpY2F0aW9uL2pz"
    "b24NOm1lc3NhZ2UtdHlwZQcABWV2ZW50eyJjb250ZW50QmxvY2tJbmRleCI6MCwicCI6ImFiY2RlZmdoaWprbG1ub3Bx"
    "cnN0dXZ3eHl6QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVowIn2IAETUAAABWQAAAFducmUhCzpldmVudC10eXBlBwAR"
    "Y29udGVudEJsb2NrRGVsdGENOmNvbnRlbnQtdHlwZQcAEGFwcGxpY2F0aW9uL2pzb24NOm1lc3NhZ2UtdHlwZQcABWV2"
    "ZW50eyJjb250ZW50QmxvY2tJbmRleCI6MSwiZGVsdGEiOnsicmVhc29uaW5nQ29udGVudCI6eyJ0ZXh0IjoiVGhlIHVz"
    "ZXIganVzdCBzYXlzIFwiSGlcIi4gV2UgbmVlZCB0byByZXNwb25kIGFwcHJvcHJpYXRlbHksIGZyaWVuZGx5IGdyZWV0"
    "aW5nLiBObyBzcGVjaWFsIGluc3RydWN0aW9ucy4gU2hvdWxkIGJlIHNob3J0LiJ9fSwicCI6ImFiY2RlZmdoaWprbG1u"
    "b3BxcnN0dXZ3eHl6QUJDREVGR0hJSktMTU5PUFFSU1RVVldYIn2DKrHfAAAAsQAAAFbKjQoMCzpldmVudC10eXBlBwAQ"
    "Y29udGVudEJsb2NrU3RvcA06Y29udGVudC10eXBlBwAQYXBwbGljYXRpb24vanNvbg06bWVzc2FnZS10eXBlBwAFZXZl"
    "bnR7ImNvbnRlbnRCbG9ja0luZGV4IjoxLCJwIjoiYWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXpBQkNERUZHSElKS0xN"
    "Tk9QUVJTIn1Cad1JAAAA5AAAAFdNeXohCzpldmVudC10eXBlBwARY29udGVudEJsb2NrRGVsdGENOmNvbnRlbnQtdHlw"
    "ZQcAEGFwcGxpY2F0aW9uL2pzb24NOm1lc3NhZ2UtdHlwZQcABWV2ZW50eyJjb250ZW50QmxvY2tJbmRleCI6MiwiZGVs"
    "dGEiOnsidGV4dCI6IkhlbGxvISBIb3cgY2FuIEkgaGVscCJ9LCJwIjoiYWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXpB"
    "QkNERUZHSElKS0xNTk9QUVJTVFVWV1hZWjAxIn2L4Y7bAAAAuwAAAFf3OiI7CzpldmVudC10eXBlBwARY29udGVudEJs"
    "b2NrRGVsdGENOmNvbnRlbnQtdHlwZQcAEGFwcGxpY2F0aW9uL2pzb24NOm1lc3NhZ2UtdHlwZQcABWV2ZW50eyJjb250"
    "ZW50QmxvY2tJbmRleCI6MiwiZGVsdGEiOnsidGV4dCI6IiB5b3UgdG9kYXk/In0sInAiOiJhYmNkZWZnaGlqa2xtbm9w"
    "cXJzdHV2dyJ9dKsF8AAAAI4AAABW6fwlWws6ZXZlbnQtdHlwZQcAEGNvbnRlbnRCbG9ja1N0b3ANOmNvbnRlbnQtdHlw"
    "ZQcAEGFwcGxpY2F0aW9uL2pzb24NOm1lc3NhZ2UtdHlwZQcABWV2ZW50eyJjb250ZW50QmxvY2tJbmRleCI6MiwicCI6"
    "ImFiY2RlZmdoaWoifbla37UAAACDAAAAUY8IdEkLOmV2ZW50LXR5cGUHAAttZXNzYWdlU3RvcA06Y29udGVudC10eXBl"
    "BwAQYXBwbGljYXRpb24vanNvbg06bWVzc2FnZS10eXBlBwAFZXZlbnR7InAiOiJhYiIsInN0b3BSZWFzb24iOiJlbmRf"
    "dHVybiJ9kFbppAAAAOQAAABOKRLS4Qs6ZXZlbnQtdHlwZQcACG1ldGFkYXRhDTpjb250ZW50LXR5cGUHABBhcHBsaWNh"
    "dGlvbi9qc29uDTptZXNzYWdlLXR5cGUHAAVldmVudHsibWV0cmljcyI6eyJsYXRlbmN5TXMiOjc1M30sInAiOiJhYmNk"
    "ZWZnaGlqa2xtbiIsInVzYWdlIjp7ImlucHV0VG9rZW5zIjo3MCwib3V0cHV0VG9rZW5zIjo0Mywic2VydmVyVG9vbFVz"
    "YWdlIjp7fSwidG90YWxUb2tlbnMiOjExM319saJH4A=="
)


def test_recorded_converse_stream(telemetry):
    import base64

    model = "openai.gpt-oss-120b-1:0"
    sent: list = []
    client = streaming_client([base64.b64decode(RECORDED_CONVERSE_STREAM)], sent, region="us-east-1")
    response = client.converse_stream(modelId=model, messages=[{"role": "user", "content": [{"text": "Hi"}]}])
    text = "".join(e["contentBlockDelta"]["delta"].get("text", "") for e in response["stream"]
                   if "contentBlockDelta" in e)  # fmt: skip
    assert text == "Hello! How can I help you today?"
    attrs = telemetry.span().attributes
    assert attrs["gen_ai.provider.name"] == "aws.bedrock"
    assert attrs["server.address"] == "bedrock-runtime.us-east-1.amazonaws.com"
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (70, 43)
    assert math.isclose(attrs["otel_tokens.cost.usd"], aws_price(model, input_tokens=70, output_tokens=43),
                        rel_tol=1e-9)  # fmt: skip


def anthropic_events(model: str) -> list[dict]:
    """Anthropic's message events as Bedrock streams them (the last with its invocation
    metrics)."""
    return [
        {"type": "message_start", "message": {
            "id": "msg_bdrk_1", "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 600, "output_tokens": 1, "cache_read_input_tokens": 400,
                      "cache_creation_input_tokens": 0}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello there"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
         "usage": {"output_tokens": 48}},
        {"type": "message_stop", "amazon-bedrock-invocationMetrics": {
            "inputTokenCount": 600, "outputTokenCount": 48, "invocationLatency": 812, "firstByteLatency": 301,
            "cacheReadInputTokenCount": 400, "cacheWriteInputTokenCount": 0}},
    ]  # fmt: skip


CLAUDE = "anthropic.claude-3-5-haiku-20241022-v1:0"


def test_invoke_model_with_response_stream_at_the_regions_endpoint(telemetry):
    sent: list = []
    client = streaming_client([chunk(e) for e in anthropic_events(CLAUDE)], sent)
    body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 64,
            "messages": [{"role": "user", "content": "Say hello"}]}  # fmt: skip
    response = client.invoke_model_with_response_stream(modelId=CLAUDE, body=json.dumps(body))
    kinds = [json.loads(e["chunk"]["bytes"])["type"] for e in response["body"]]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert unquote(sent[0]) == f"https://bedrock-runtime.{REGION}.amazonaws.com/model/{CLAUDE}/invoke-with-response-stream"
    attrs = telemetry.span().attributes
    assert attrs["gen_ai.provider.name"] == "aws.bedrock"
    assert attrs["server.address"] == f"bedrock-runtime.{REGION}.amazonaws.com"
    assert attrs["gen_ai.usage.output_tokens"] == 48
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.cache_read.input_tokens"]) == (1000, 400)
    assert attrs["otel_tokens.cost.price_match"] == "endpoint"
    assert math.isclose(attrs["otel_tokens.cost.usd"], aws_price(
        CLAUDE, input_tokens=1000, cache_read_tokens=400, output_tokens=48), rel_tol=1e-9)


def _event_stream_transport(frames: list[bytes], sent: list):
    http = http_module("anthropic")

    def handler(request):
        sent.append(str(request.url))
        return http.Response(200, headers={"content-type": "application/vnd.amazon.eventstream",
                                           "x-amzn-requestid": "req-7"}, content=b"".join(frames))  # fmt: skip

    return http.Client(transport=http.MockTransport(handler))


@pytest.mark.parametrize("helper", [False, True], ids=["create", "stream_helper"])
def test_anthropic_bedrock_streams_at_the_bedrock_price(telemetry, helper):
    from anthropic import AnthropicBedrock

    sent: list = []
    http_client = _event_stream_transport([chunk(e) for e in anthropic_events(CLAUDE)], sent)
    client = AnthropicBedrock(aws_access_key="AKIDEXAMPLE", aws_secret_key="secret", aws_region="us-west-2",
                              http_client=http_client, max_retries=0)  # fmt: skip
    kwargs = {"model": CLAUDE, "max_tokens": 64, "messages": [{"role": "user", "content": "Say hello"}]}
    if helper:
        with client.messages.stream(**kwargs) as stream:
            text = "".join(stream.text_stream)
    else:
        text = "".join(e.delta.text for e in client.messages.create(stream=True, **kwargs)
                       if e.type == "content_block_delta")  # fmt: skip
    assert text == "Hello there"
    assert unquote(sent[0]).endswith(f"/model/{CLAUDE}/invoke-with-response-stream")
    attrs = telemetry.span().attributes
    assert attrs["gen_ai.provider.name"] == "aws.bedrock"
    assert attrs["server.address"] == "bedrock-runtime.us-west-2.amazonaws.com"
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.cache_read.input_tokens"]) == (1000, 400)
    assert attrs["gen_ai.usage.output_tokens"] == 48
    assert math.isclose(attrs["otel_tokens.cost.usd"], aws_price(
        CLAUDE, input_tokens=1000, cache_read_tokens=400, output_tokens=48), rel_tol=1e-9)


def test_async_anthropic_bedrock_streams_at_the_bedrock_price(telemetry):
    import asyncio

    from anthropic import AsyncAnthropicBedrock

    http = http_module("anthropic")
    body = b"".join(chunk(e) for e in anthropic_events(CLAUDE))

    def handler(request):
        return http.Response(200, headers={"content-type": "application/vnd.amazon.eventstream"}, content=body)

    client = AsyncAnthropicBedrock(aws_access_key="AKIDEXAMPLE", aws_secret_key="secret", aws_region="ap-northeast-1",
                                   http_client=http.AsyncClient(transport=http.MockTransport(handler)),
                                   max_retries=0)  # fmt: skip

    async def run() -> str:
        stream = await client.messages.create(model=CLAUDE, max_tokens=64, stream=True,
                                              messages=[{"role": "user", "content": "Say hello"}])  # fmt: skip
        return "".join([e.delta.text async for e in stream if e.type == "content_block_delta"])

    assert asyncio.run(run()) == "Hello there"
    attrs = telemetry.span().attributes
    assert (attrs["gen_ai.provider.name"], attrs["server.address"]) == (
        "aws.bedrock", "bedrock-runtime.ap-northeast-1.amazonaws.com")
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (1000, 48)
    assert math.isclose(attrs["otel_tokens.cost.usd"], aws_price(
        CLAUDE, input_tokens=1000, cache_read_tokens=400, output_tokens=48), rel_tol=1e-9)
