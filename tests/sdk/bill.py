"""The provider's bill for a recorded response, computed independently of otel_tokens.

genai-prices' own ``extract_usage`` reads the whole response body (for a stream: the object
carrying its final usage), ``calc_price`` prices it with the response's service tier as the
price context, and hosted-tool fees are added from the response's own items (web searches
that searched, file searches) at the model's listed rates. None: genai-prices has no price
for the model.
"""

from __future__ import annotations

from typing import Any

import genai_prices

from .. import cassettes

_STANDARD_TIERS = ("default", "auto", "standard")
_FLAVORS = {"openai chat": "chat", "openai responses": "responses", "openai completions": "chat"}


def final_body(it: cassettes.Interaction, anthropic: bool) -> dict[str, Any]:
    """The response object carrying the usage: the body, or rebuilt from the stream's events
    (Anthropic: ``message_start`` then each ``message_delta``'s fields; OpenAI: the last
    event carrying usage, or its ``response``/``data`` object)."""
    if not it.is_stream:
        return it.response_json()
    events = it.sse_events()
    if anthropic:
        message: dict[str, Any] = {}
        usage: dict[str, Any] = {}
        for event in events:
            if event.get("type") == "message_start":
                message = dict(event["message"])
                usage.update((k, v) for k, v in (message.get("usage") or {}).items() if k != "output_tokens")
            elif event.get("type") == "message_delta":
                usage.update((k, v) for k, v in (event.get("usage") or {}).items() if v is not None)
        return {**message, "usage": usage}
    for event in reversed(events):
        for inner in (event.get("response"), event.get("data"), event):
            if isinstance(inner, dict) and inner.get("usage"):
                return inner
    return events[-1]


def _usage(body: dict[str, Any], endpoint: str, provider: str) -> Any:
    usage = body.get("usage") or {}
    if endpoint == "openai embeddings":
        return genai_prices.Usage(input_tokens=usage["prompt_tokens"])
    if endpoint == "openai audio/transcriptions":
        audio = (usage.get("input_token_details") or {}).get("audio_tokens")
        return genai_prices.Usage(input_tokens=usage["input_tokens"], output_tokens=usage.get("output_tokens"),
                                  input_audio_tokens=audio)  # fmt: skip
    flavor = "default" if provider == "anthropic" else _FLAVORS.get(endpoint, "chat")  # runs: chat's
    return genai_prices.extract_usage(body, provider_id=provider, api_flavor=flavor).usage


def full_bill(it: cassettes.Interaction, endpoint: str, model: str | None) -> float | None:
    """USD the provider billed for the response (None when genai-prices has no price)."""
    provider = "anthropic" if endpoint.startswith("anthropic") else "openai"
    body = final_body(it, provider == "anthropic")
    model = body.get("model") or model
    tier = body.get("service_tier")
    context = {"service_tier": tier} if isinstance(tier, str) and tier not in _STANDARD_TIERS else None
    try:
        priced = genai_prices.calc_price(_usage(body, endpoint, provider), model,
                                         provider_id=provider, price_context=context)  # fmt: skip
    except LookupError:
        return None
    items = body.get("output") if isinstance(body.get("output"), list) else []
    searches = sum(1 for item in items if item.get("type") == "web_search_call"
                   and (item.get("action") or {}).get("type", "search") == "search")  # fmt: skip
    files = sum(1 for item in items if item.get("type") == "file_search_call")
    rates = priced.model_price
    fees = (searches * float(rates.web_searches_kcount or 0) + files * float(rates.storage_searches_kcount or 0)) / 1000
    return float(priced.total_price) + fees
