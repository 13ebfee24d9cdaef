"""google-genai ``models.embed_content`` (sync and ``aio``) through the real client against a
local server answering in the REST shapes the SDK's own converters read
(``_EmbedContentResponse_from_mldev`` / ``_from_vertex``): the Gemini API's
``batchEmbedContents`` (no usage: unknown, marked), Vertex AI's ``predict`` (each embedding's
``statistics.token_count``, ``metadata.billableCharacterCount``) and ``embedContent``
(``usageMetadata``). The HTTP layer beneath records nothing more."""

from __future__ import annotations

import asyncio

import pytest

from otel_tokens.capture.sdk import google_genai_patches
from otel_tokens.capture.http import http_patches

from ..sdk.gemini_server import GeminiServer
from ..telemetry.conftest import handling
from .conftest import price, spans, tokens

pytest.importorskip("google.genai")

VALUES = [0.013, -0.008, 0.021]
TEXTS = ["What is your name?", "What is your favorite color?"]


@pytest.fixture
def server():
    running = GeminiServer()
    yield running
    running.close()


def _embed_both(server: GeminiServer, model: str, vertexai: bool, contents=TEXTS) -> list:
    """The same embedding, sync and async; the vectors the program got."""
    client = server.client(vertexai)  # (kept: a client closes when collected)
    got = client.models.embed_content(model=model, contents=contents)

    async def run_async():
        return await client.aio.models.embed_content(model=model, contents=contents)

    return [[e.values for e in r.embeddings] for r in (got, asyncio.run(run_async()))]


def test_gemini_api_embeddings_are_recorded_with_usage_unknown(server):
    batch = {"embeddings": [{"values": VALUES}, {"values": VALUES}]}
    server.queue += [batch, batch]
    with handling(google_genai_patches) as t:
        vectors = _embed_both(server, "gemini-embedding-001", vertexai=False)
    assert vectors == [[VALUES, VALUES]] * 2  # passed through
    assert server.paths[0].endswith("/models/gemini-embedding-001:batchEmbedContents")
    found = spans(t)
    assert [(a["gen_ai.operation.name"], a["gen_ai.provider.name"]) for a in found] == [
        ("embeddings", "gcp.gemini")
    ] * 2
    assert [tokens(a) for a in found] == [(None, None)] * 2  # unknown, never 0
    assert t.errors() == {"usage_missing": 2}


def test_vertex_predict_reads_each_embeddings_token_count(server):
    predicted = {
        "predictions": [
            {
                "embeddings": {
                    "statistics": {"truncated": False, "token_count": 6.0},
                    "values": VALUES,
                }
            },
            {
                "embeddings": {
                    "statistics": {"truncated": False, "token_count": 8},
                    "values": VALUES,
                }
            },
        ],
        "metadata": {"billableCharacterCount": 46},
    }
    server.queue += [predicted, predicted]
    with handling(google_genai_patches) as t:
        vectors = _embed_both(server, "text-embedding-005", vertexai=True)
    assert vectors == [[VALUES, VALUES]] * 2
    assert server.paths[0].endswith("/models/text-embedding-005:predict")
    found = spans(t)
    assert len(found) == 2
    for attrs in found:
        assert attrs["gen_ai.provider.name"] == "gcp.vertex_ai"
        assert tokens(attrs) == (14, None)
    assert t.errors() == {} and t.points("otel_tokens.usage.missing") == []


@pytest.mark.parametrize("order", ["http-first", "sdk-first"])
def test_vertex_embed_content_is_exact_priced_and_counted_once(server, order):
    embedded = {"embedding": {"values": VALUES}, "usageMetadata": {"promptTokenCount": 7}}
    server.queue += [embedded, embedded]
    first, second = (http_patches, google_genai_patches)[:: 1 if order == "http-first" else -1]
    with handling(first, second) as t:
        vectors = _embed_both(server, "gemini-embedding-001", vertexai=True, contents="Hello")
    assert vectors == [[VALUES]] * 2
    assert server.paths[0].endswith("/models/gemini-embedding-001:embedContent")
    found = spans(t)
    assert len(found) == 2  # one each, the HTTP layer beneath silent
    for attrs in found:
        assert attrs["gen_ai.provider.name"] == "gcp.vertex_ai" and tokens(attrs) == (7, None)
        assert attrs["otel_tokens.cost.usd"] == pytest.approx(
            price("gemini-embedding-001", "google", input_tokens=7)
        )


def test_a_count_that_is_not_whole_is_unusable(server):
    predicted = {
        "predictions": [{"embeddings": {"statistics": {"token_count": 6.5}, "values": VALUES}}]
    }
    server.queue += [predicted, predicted]
    with handling(google_genai_patches) as t:
        vectors = _embed_both(server, "text-embedding-005", vertexai=True, contents="Hello")
    assert vectors == [[VALUES]] * 2
    assert [tokens(a) for a in spans(t)] == [(None, None)] * 2
    assert t.errors() == {"usage_invalid": 2}
