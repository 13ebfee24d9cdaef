"""Private gateways: ``OTEL_TOKENS_PROVIDER_URLS`` names the provider behind a base URL, and a
price file prices what genai-prices does not (a self-hosted model, under its host's name)."""

from __future__ import annotations

import math

import pytest

from otel_tokens import settings as otel_settings
from otel_tokens.account.pricing import Pricer

from .hosts import Host, chat_body
from .test_openai_compatible import call, price_at, span_of

USAGE = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}


def test_a_base_url_mapped_to_a_provider_is_that_provider(telemetry, monkeypatch):
    monkeypatch.setenv("OTEL_TOKENS_PROVIDER_URLS",
                       "http://10.1.2.3:4000=openai; https://Gateway.corp.example/deepseek=deepseek")
    otel_settings.reload()
    call("http://10.1.2.3:4000/v1", Host("openai", chat_body("gpt-4o-mini", USAGE)), "gpt-4o-mini")
    attrs = span_of(telemetry)
    assert attrs["gen_ai.provider.name"] == "openai" and attrs["server.address"] == "10.1.2.3"
    assert attrs["otel_tokens.cost.price_match"] == "endpoint"
    assert math.isclose(attrs["otel_tokens.cost.usd"],
                        price_at("openai", "gpt-4o-mini", input_tokens=100, output_tokens=20))


def test_the_longest_prefix_wins(telemetry, monkeypatch):
    monkeypatch.setenv("OTEL_TOKENS_PROVIDER_URLS",
                       "https://gateway.corp.example=openai;https://gateway.corp.example/deepseek=deepseek")
    otel_settings.reload()
    call("https://gateway.corp.example/deepseek/v1", Host("openai", chat_body("deepseek-chat", USAGE)),
         "deepseek-chat")  # fmt: skip
    assert span_of(telemetry)["gen_ai.provider.name"] == "deepseek"


def test_a_malformed_entry_is_a_problem_and_the_rest_applies(monkeypatch):
    monkeypatch.setenv("OTEL_TOKENS_PROVIDER_URLS", "gateway.corp=openai;https://ok.example=groq")
    settings = otel_settings.read()
    assert settings.provider_urls == (("https://ok.example", "groq"),)
    assert [p.name for p in settings.problems] == ["OTEL_TOKENS_PROVIDER_URLS"]


def test_a_price_file_prices_a_self_hosted_model(tmp_path):
    """A local vLLM's model, given a price under its host's name: priced from the file."""
    path = tmp_path / "prices.toml"
    path.write_text('[models."llama-3.1-8b"]\ninput = 0.05\noutput = 0.1\nprovider = "10.0.0.7"\n')
    pricer = Pricer.from_settings(otel_settings.read({"OTEL_TOKENS_PRICES_FILE": str(path)}))
    from otel_tokens.usage import Usage

    result = pricer.price(Usage(input_tokens=1_000_000, output_tokens=1_000_000), "10.0.0.7", "llama-3.1-8b")
    assert result.cost_usd == pytest.approx(0.15) and result.match == "price_file"
    elsewhere = pricer.price(Usage(input_tokens=10, output_tokens=10), "192.168.1.9", "llama-3.1-8b")
    assert elsewhere.cost_usd is None and elsewhere.match == "self_hosted"


@pytest.mark.parametrize("provider", ["ollama", "hosted_vllm", "lm_studio", "localhost", "::1", "192.168.0.4"])
def test_self_hosted_names_are_never_priced(provider):
    """litellm's self-hosted routes and local hosts: a model another provider sells is not
    priced at its price."""
    from otel_tokens.usage import Usage

    result = Pricer().price(Usage(input_tokens=100, output_tokens=10), provider, "gpt-4o-mini")
    assert result.cost_usd is None and result.unpriced and result.match == "self_hosted"
