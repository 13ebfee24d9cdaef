"""The billed media and gateway calls' tests: the real clients against a server on 127.0.0.1
answering in the provider's own shape, named as that provider (``OTEL_TOKENS_PROVIDER_URLS``,
as a user names a gateway) so that its calls are priced."""

from __future__ import annotations

import genai_prices


def price(model: str, provider: str = "openai", **usage: int) -> float:
    """genai-prices' own price of ``usage`` (not otel_tokens' code)."""
    return float(genai_prices.calc_price(genai_prices.Usage(**usage), model,
                                         provider_id=provider).total_price)  # fmt: skip


def spans(t) -> list[dict]:
    """The attributes of every finished span, in order."""
    return [dict(span.attributes) for span in t.finished()]


def tokens(attrs: dict) -> tuple:
    return attrs.get("gen_ai.usage.input_tokens"), attrs.get("gen_ai.usage.output_tokens")
