"""google-genai through the real client against a local server speaking the Gemini REST wire
format (documented format; see ``gemini_server``): sync, async, streams, Gemini API and Vertex
AI, one span per billed request with exact usage, costs equal to genai-prices' own reading
and pricing of the same response, the host seeing exactly what it would without us."""

from __future__ import annotations

import asyncio
import gc
import warnings

import pytest

genai = pytest.importorskip("google.genai", reason="google-genai is an optional extra (pip install otel-tokens[google-genai])")

import genai_prices  # noqa: E402

from otel_tokens.capture.sdk import google_genai_patches  # noqa: E402

from ..telemetry.conftest import handling  # noqa: E402
from .gemini_server import GeminiServer, answer  # noqa: E402

USAGE = {"promptTokenCount": 1200, "cachedContentTokenCount": 1000, "candidatesTokenCount": 300,
         "thoughtsTokenCount": 120, "toolUsePromptTokenCount": 40, "totalTokenCount": 1660}  # fmt: skip


@pytest.fixture
def server():
    s = GeminiServer()
    yield s
    s.close()


@pytest.fixture
def telemetry():
    with handling(google_genai_patches) as t:
        yield t


def billed(body: dict) -> float:
    """What genai-prices makes of the whole response: its Google extractor, then its price."""
    extracted = genai_prices.extract_usage(body, provider_id="google")
    return float(genai_prices.calc_price(extracted.usage, body["modelVersion"], provider_id="google").total_price)


def tokens(attrs) -> dict:
    names = ("input_tokens", "output_tokens", "cache_read.input_tokens", "reasoning.output_tokens")
    return {n: attrs.get(f"gen_ai.usage.{n}") for n in names}


EXPECTED = {"input_tokens": 1240, "output_tokens": 420, "cache_read.input_tokens": 1000,
            "reasoning.output_tokens": 120}  # fmt: skip


def test_generate_content_records_every_class_and_the_full_bill(telemetry, server):
    body = answer("Paris.", USAGE)
    server.queue.append(body)
    client = server.client()
    result = client.models.generate_content(model="gemini-2.5-flash", contents="Capital of France?")
    assert result.text == "Paris."
    span = telemetry.span()
    attrs = span.attributes
    assert span.name == "chat gemini-2.5-flash"
    assert attrs["gen_ai.provider.name"] == "gcp.gemini"
    assert attrs["gen_ai.response.model"] == "gemini-2.5-flash"
    assert attrs["gen_ai.response.id"] == "resp-gemini-1"
    assert attrs["gen_ai.response.finish_reasons"] == ("stop",)
    assert attrs["server.address"] == "127.0.0.1"
    assert tokens(attrs) == EXPECTED
    assert attrs["otel_tokens.usage.source"] == "reported"
    assert attrs["otel_tokens.cost.usd"] == pytest.approx(billed(body), rel=1e-9)
    assert attrs["otel_tokens.estimate.input_tokens"] > 0
    counted = {p.attributes["gen_ai.token.type"]: p.value for p in telemetry.points("otel_tokens.tokens")}
    assert counted == {"input": 1240, "output": 420, "cache_read": 1000, "reasoning": 120}


def test_a_stream_is_recorded_from_its_last_chunk_and_passed_through_unchanged(telemetry, server):
    chunks = [answer("Par", {"promptTokenCount": 1200, "cachedContentTokenCount": 1000}, reason=None),
              answer("is", {**USAGE, "candidatesTokenCount": 200}, reason=None),
              answer(".", USAGE)]  # fmt: skip
    server.queue.append(chunks)
    client = server.client()
    seen = [c.text for c in client.models.generate_content_stream(model="gemini-2.5-flash", contents="?")]
    assert seen == ["Par", "is", "."]
    (span,) = telemetry.finished()
    assert tokens(span.attributes) == EXPECTED
    assert span.attributes["otel_tokens.stream.end"] == "exhausted"
    assert span.attributes["otel_tokens.cost.usd"] == pytest.approx(billed(chunks[-1]), rel=1e-9)


def test_async_calls_and_streams(telemetry, server):
    client = server.client()
    server.queue.append(answer("a", USAGE))
    server.queue.append([answer("b", {"promptTokenCount": 1200}, reason=None), answer("c", USAGE)])

    async def main():
        whole = await client.aio.models.generate_content(model="gemini-2.5-flash", contents="x")
        parts = [c.text async for c in await client.aio.models.generate_content_stream(
            model="gemini-2.5-flash", contents="y")]  # fmt: skip
        return whole.text, parts

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a coroutine never awaited
        assert asyncio.run(main()) == ("a", ["b", "c"])
        gc.collect()
    assert [tokens(s.attributes) for s in telemetry.finished()] == [EXPECTED, EXPECTED]


def test_vertex_ai_is_its_own_provider_at_google_prices(telemetry, server):
    body = answer("ok", USAGE)
    server.queue.append(body)
    client = server.client(vertexai=True)
    client.models.generate_content(model="gemini-2.5-flash", contents="?")
    assert "publishers/google/models/gemini-2.5-flash" in server.requests[-1][0]
    attrs = telemetry.span().attributes
    assert attrs["gen_ai.provider.name"] == "gcp.vertex_ai"
    assert attrs["otel_tokens.cost.usd"] == pytest.approx(billed(body), rel=1e-9)


def test_each_request_of_automatic_function_calling_is_its_own_call(telemetry, server):
    """``generate_content`` with a Python tool sends two billed requests: two calls, each with
    its own usage (a wrapper around the public method would see only the last)."""

    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "sunny"

    call = {"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}]}, "finishReason": "STOP"}],
        "modelVersion": "gemini-2.5-flash", "responseId": "r1",
        "usageMetadata": {"promptTokenCount": 80, "candidatesTokenCount": 10, "totalTokenCount": 90}}  # fmt: skip
    final = answer("Sunny in Paris.", {"promptTokenCount": 110, "candidatesTokenCount": 8, "totalTokenCount": 118},
                   response_id="r2")  # fmt: skip
    server.queue += [call, final]
    from google.genai import types

    client = server.client()
    result = client.models.generate_content(
        model="gemini-2.5-flash", contents="Weather in Paris?",
        config=types.GenerateContentConfig(tools=[get_weather]))  # fmt: skip
    assert result.text == "Sunny in Paris."
    spans = telemetry.finished()
    assert [(s.attributes["gen_ai.usage.input_tokens"], s.attributes["gen_ai.usage.output_tokens"]) for s in spans] \
        == [(80, 10), (110, 8)]  # fmt: skip
    assert [s.attributes["gen_ai.response.id"] for s in spans] == ["r1", "r2"]


def test_audio_tokens_are_billed_at_audio_rates(telemetry, server):
    usage = {"promptTokenCount": 900, "candidatesTokenCount": 50, "totalTokenCount": 950,
             "promptTokensDetails": [{"modality": "AUDIO", "tokenCount": 800}, {"modality": "TEXT", "tokenCount": 100}]}  # fmt: skip
    body = answer("heard", usage, model="gemini-2.5-flash")
    server.queue.append(body)
    client = server.client()
    client.models.generate_content(model="gemini-2.5-flash", contents="listen")
    attrs = telemetry.span().attributes
    assert attrs["otel_tokens.cost.usd"] == pytest.approx(billed(body), rel=1e-9)
    assert "input_audio_tokens" in attrs["otel_tokens.cost.components"]


def test_a_failed_request_fails_the_call_and_raises_unchanged(telemetry, server):
    from google.genai import errors

    server.queue.append({"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}})
    client = server.client()
    with pytest.raises(errors.ServerError) as raised:
        client.models.generate_content(model="gemini-2.5-flash", contents="?")
    assert raised.value.code == 503
    attrs = telemetry.span().attributes
    assert attrs["error.type"] == "503"  # the HTTP status, as the backend-error alerts read it
    assert "gen_ai.usage.input_tokens" not in attrs and "otel_tokens.usage.source" not in attrs


def test_a_refused_stream_fails_with_its_status(telemetry, server):
    from google.genai import errors

    server.queue.append({"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}})
    client = server.client()
    with pytest.raises(errors.ClientError):
        list(client.models.generate_content_stream(model="gemini-2.5-flash", contents="?"))
    (span,) = telemetry.finished()
    assert span.attributes["error.type"] == "429"
    assert "gen_ai.usage.input_tokens" not in span.attributes


def test_a_response_without_usage_is_unknown_not_zero(telemetry, server):
    server.queue.append(answer("no usage", None))
    client = server.client()
    client.models.generate_content(model="gemini-2.5-flash", contents="?")
    attrs = telemetry.span().attributes
    assert "gen_ai.usage.input_tokens" not in attrs and "otel_tokens.cost.usd" not in attrs
    assert telemetry.errors().get("usage_missing") == 1


def test_results_are_what_the_uninstrumented_client_returns(telemetry, server):
    body = answer("same", USAGE)
    server.queue += [body, body]
    client = server.client()
    instrumented = client.models.generate_content(model="gemini-2.5-flash", contents="?")
    google_genai_patches.uninstall()
    plain = client.models.generate_content(model="gemini-2.5-flash", contents="?")
    google_genai_patches.install()
    assert type(instrumented) is type(plain)
    assert instrumented.model_dump(exclude={"sdk_http_response"}) == plain.model_dump(exclude={"sdk_http_response"})
    assert server.requests[0][1] == server.requests[1][1]  # the request sent is untouched
    assert len(telemetry.finished()) == 1
