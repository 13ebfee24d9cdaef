"""Pricing: genai-prices data, the cached fast path equal to the library, overrides, errors."""

from __future__ import annotations

import json
import random
from datetime import datetime, timezone

import pytest
from genai_prices import Usage as PricesUsage
from genai_prices import data_snapshot

from otel_tokens import PriceFileError, Pricer, Usage
from otel_tokens.account.pricing import _rates_from_library, load_price_file


def _models():
    snapshot = data_snapshot.get_snapshot()
    now = datetime.now(tz=timezone.utc)
    for provider in snapshot.providers:
        for model in provider.models:
            try:
                yield provider.id, model.id, model.get_prices(now)
            except Exception:
                continue


@pytest.mark.slow
def test_fast_path_equals_the_library_for_every_bundled_model():
    rnd = random.Random(7)
    checked = tiered = 0
    for provider_id, model_id, model_price in _models():
        rates = _rates_from_library(model_price, expires=float("inf"))
        for _ in range(3):
            inp = rnd.randint(0, 400_000)
            cr = rnd.randint(0, inp // 2)
            cw = rnd.randint(0, (inp - cr) // 2)
            out = rnd.randint(0, 20_000)
            usage = Usage(input_tokens=inp, cache_read_tokens=cr, cache_write_tokens=cw,
                          output_tokens=out)  # fmt: skip
            try:
                expected = float(model_price.calc_price(PricesUsage(
                    input_tokens=inp, cache_read_tokens=cr, cache_write_tokens=cw,
                    output_tokens=out))["total_price"])  # fmt: skip
            except Exception:
                continue  # a price the library itself cannot apply to plain tokens
            assert rates.cost(usage) == pytest.approx(expected, rel=1e-9, abs=1e-12), (
                provider_id, model_id, usage)
            checked += 1
        tiered += rates.tiered
    assert checked > 1000
    assert tiered > 10  # tiered prices exist and go through the library


def test_cache_aware_and_reasoning_priced_as_output():
    pricer = Pricer()
    plain = pricer.price(Usage(input_tokens=1_000_000, output_tokens=0), "openai", "gpt-4o")
    cached = pricer.price(Usage(input_tokens=1_000_000, cache_read_tokens=1_000_000,
                                output_tokens=0), "openai", "gpt-4o")  # fmt: skip
    assert plain.cost_usd == pytest.approx(2.5) and cached.cost_usd == pytest.approx(1.25)
    out = pricer.price(Usage(output_tokens=1000), "openai", "o3")
    with_reasoning = pricer.price(Usage(output_tokens=1000, reasoning_tokens=900), "openai", "o3")
    assert with_reasoning.cost_usd == out.cost_usd  # reasoning is inside output, priced as output
    write = pricer.price(Usage(input_tokens=1_000_000, cache_write_tokens=1_000_000),
                         "anthropic", "claude-sonnet-4-20250514")  # fmt: skip
    assert write.cost_usd == pytest.approx(3.75)


def test_sources_and_unpriced():
    pricer = Pricer()
    assert pricer.price(Usage(input_tokens=1, cost_usd=0.25), "x", "y").source == "provider"
    computed = pricer.price(Usage(input_tokens=1), "openai", "gpt-4o")
    assert computed.source == "computed" and not computed.unpriced
    missing = pricer.price(Usage(input_tokens=1), "openai", "no-such-model-anywhere")
    assert missing.cost_usd is None and missing.unpriced
    assert not pricer.price(Usage(), "openai", "gpt-4o").unpriced  # nothing to price


def test_unknown_provider_name_falls_back_to_the_model():
    assert Pricer().price(Usage(input_tokens=1000), "my_gateway", "gpt-4o").cost_usd == pytest.approx(0.0025)
    assert Pricer().price(Usage(input_tokens=1000), "azure.ai.openai", "gpt-4o").source == "computed"


def test_resolved_prices_are_cached():
    pricer = Pricer()
    pricer.price(Usage(input_tokens=1), "openai", "gpt-4o")
    pricer.price(Usage(input_tokens=2), "openai", "gpt-4o")
    assert list(pricer._cache) == [("openai", "gpt-4o", ())]  # (provider, model, price context)


def test_price_file_toml_and_json(tmp_path):
    toml = tmp_path / "p.toml"
    toml.write_text('[models."Private-1"]\ninput = 1\noutput = 2\ncache-write = 3\n')
    assert load_price_file(str(toml))["private-1"].cache_write == 3.0
    js = tmp_path / "p.json"
    js.write_text(json.dumps({"models": {"m": {"input": 0.5, "output": 1.5, "provider": "openai"}}}))
    pricer = Pricer(load_price_file(str(js)))
    assert pricer.price(Usage(input_tokens=2_000_000), "openai", "m").cost_usd == pytest.approx(1.0)
    assert pricer.price(Usage(input_tokens=2_000_000), "anthropic", "m").unpriced


@pytest.mark.parametrize("content, words", [
    ("not = [valid", "not valid TOML"),
    ("[other]\nx = 1\n", "'models' table"),
    ('[models.m]\noutput = 1\n', "'input' (USD per million tokens) is required"),
    ('[models.m]\ninput = -1\noutput = 1\n', "non-negative number"),
    ('[models.m]\ninput = "cheap"\noutput = 1\n', "non-negative number"),
    ('[models.m]\ninput = 1\noutput = 1\ncolour = "red"\n', "unknown key"),
    ('models = 3\n', "'models' table"),
])  # fmt: skip
def test_malformed_price_file_names_the_file_and_problem(tmp_path, content, words):
    path = tmp_path / "prices.toml"
    path.write_text(content)
    with pytest.raises(PriceFileError) as info:
        load_price_file(str(path))
    assert str(path) in str(info.value) and words in str(info.value)


def test_missing_or_malformed_price_file_in_the_settings_is_one_problem(tmp_path):
    """The settings report it (variable, value, what is accepted) and price without it."""
    from otel_tokens.settings import read

    for path, words in ((tmp_path / "nope.toml", "cannot read"), (tmp_path / "bad.json", "not valid JSON")):
        if path.suffix == ".json":
            path.write_text("{")
        found = read({"OTEL_TOKENS_PRICES_FILE": str(path)})
        (problem,) = found.problems
        assert problem.name == "OTEL_TOKENS_PRICES_FILE" and problem.value == str(path)
        assert words in problem.accepted and "TOML or JSON" in problem.accepted
        assert found.price_overrides == {}
        assert Pricer.from_settings(found).price(Usage(input_tokens=10, output_tokens=1), "openai",
                                                 "gpt-4o").cost_usd is not None
