"""GitHub Copilot's OpenAI-compatible API (``api.githubcopilot.com``) and GitHub Models
(``models.github.ai``) through the real ``openai`` client, as those hosts answer.

Copilot is a provider genai-prices knows by URL (``github-copilot``, its own published
per-model rates, models included in the subscription at no token cost): recorded under that
name and priced at Copilot's rates, matched by endpoint, never at the model maker's. GitHub
Models has no price in genai-prices: its host is the provider, and a model name it alone
uses (``openai/gpt-4.1``) is left unpriced, never priced as 0 or at someone else's rate."""

from __future__ import annotations

import math

import pytest

from .hosts import Host, chat_body, chat_events
from .test_openai_compatible import call, price_at, span_of

genai_prices = pytest.importorskip("genai_prices")

COPILOT = "https://api.githubcopilot.com"


def _copilot_known() -> bool:
    from genai_prices import data_snapshot

    return any(p.id == "github-copilot" for p in data_snapshot.get_snapshot().providers)


needs_copilot = pytest.mark.skipif(not _copilot_known(),
                                   reason="this genai-prices has no github-copilot provider")  # fmt: skip


@needs_copilot
@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_copilot_is_its_own_provider_at_its_own_price(telemetry, stream):
    usage = {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100,
             "prompt_tokens_details": {"cached_tokens": 200}}  # fmt: skip
    model = "claude-sonnet-4"
    host = Host("openai", events=chat_events(model, usage)) if stream else Host("openai", chat_body(model, usage))
    assert call(COPILOT, host, model, stream=stream) == "Hello there"
    attrs = span_of(telemetry)
    assert attrs["gen_ai.provider.name"] == "github-copilot"
    assert attrs["server.address"] == "api.githubcopilot.com"
    assert attrs["otel_tokens.cost.price_match"] == "endpoint"
    assert attrs["gen_ai.usage.cache_read.input_tokens"] == 200
    assert math.isclose(attrs["otel_tokens.cost.usd"], price_at(
        "github-copilot", model, input_tokens=1000, cache_read_tokens=200, output_tokens=100))


@needs_copilot
def test_a_copilot_model_differently_priced_than_its_makers(telemetry):
    """``gpt-4.1`` is included in a Copilot subscription (genai-prices: no token rate, a live
    request reported 0): Copilot's figure, not OpenAI's list price."""
    usage = {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}
    call(COPILOT, Host("openai", chat_body("gpt-4.1", usage)), "gpt-4.1")
    attrs = span_of(telemetry)
    assert attrs["gen_ai.provider.name"] == "github-copilot"
    assert attrs["otel_tokens.cost.usd"] == price_at("github-copilot", "gpt-4.1", input_tokens=1000,
                                                     output_tokens=100)  # fmt: skip
    assert attrs["otel_tokens.cost.usd"] < price_at("openai", "gpt-4.1", input_tokens=1000, output_tokens=100)


def test_github_models_is_its_host_and_unpriced(telemetry):
    """No price for GitHub Models: tokens recorded, the cost left unknown (no attribute),
    not 0 and not the maker's."""
    usage = {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}
    model = "openai/gpt-4.1"
    call("https://models.github.ai/inference", Host("openai", chat_body(model, usage)), model)
    attrs = span_of(telemetry)
    assert attrs["gen_ai.provider.name"] == "models.github.ai"
    assert attrs["gen_ai.usage.input_tokens"] == 1000
    assert "otel_tokens.cost.usd" not in attrs
