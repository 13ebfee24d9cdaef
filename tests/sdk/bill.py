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
    # "openai responses/<id>" (retrieve) and "openai responses/compact" are Responses bodies
    flavor = "default" if provider == "anthropic" else _FLAVORS.get(endpoint.split("/")[0], "chat")
    return genai_prices.extract_usage(body, provider_id=provider, api_flavor=flavor).usage


#: Anthropic ``usage.iterations`` billed on top of the top-level usage (which holds only the
#: message iterations): a compaction at the request's model, an advisor's at its own model
_APART = ("compaction", "advisor_message")


def iterations_apart(it: cassettes.Interaction) -> list[dict[str, Any]]:
    """Anthropic iterations billed apart from the top-level usage (the last value of the stream)."""
    if not it.uri.startswith("https://api.anthropic.com") and "anthropic" not in it.uri:
        return []
    usage = final_body(it, True).get("usage") or {}
    return [item for item in usage.get("iterations") or () if item.get("type") in _APART]


def apart_tokens(it: cassettes.Interaction) -> dict[str, int]:
    """Token classes of the iterations billed apart (input with its cache reads and writes)."""
    out = {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}
    for item in iterations_apart(it):
        read, write = item.get("cache_read_input_tokens") or 0, item.get("cache_creation_input_tokens") or 0
        out["input"] += (item.get("input_tokens") or 0) + read + write
        out["output"] += item.get("output_tokens") or 0
        out["cache_read"] += read
        out["cache_write"] += write
    return out


def _apart_bill(it: cassettes.Interaction, model: str | None) -> float:
    total = 0.0
    for item in iterations_apart(it):
        usage = genai_prices.extract_usage({"usage": item}, provider_id="anthropic").usage
        total += float(genai_prices.calc_price(usage, item.get("model") or model, provider_id="anthropic").total_price)
    return total


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
    return float(priced.total_price) + fees + _apart_bill(it, model)
