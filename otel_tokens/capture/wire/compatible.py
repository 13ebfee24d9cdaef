"""Usage fields that OpenAI-compatible providers add to the OpenAI chat shape, read right.

The same reading genai-prices' per-provider extractors apply (``chat`` flavours), so cache
reads are priced as cache reads and every output token is counted:

* DeepSeek: ``prompt_cache_hit_tokens`` are the cache reads (``prompt_cache_miss_tokens``
  the rest of the prompt) when ``prompt_tokens_details.cached_tokens`` is not given;
* xAI: ``completion_tokens_details.reasoning_tokens`` come on top of ``completion_tokens``
  (seen as ``total_tokens`` = prompt + completion + reasoning), so output includes them
  (:func:`output_tokens`, applied before the usage record is made);
* Gemini's OpenAI-compatible endpoint: a thinking model's thought tokens are in
  ``total_tokens`` but in neither ``completion_tokens`` nor its details (recorded: prompt 35,
  completion 12, total 109); Google bills them as output, so a total beyond prompt and
  completion, with no reasoning listed and no other provider field to explain it, is
  reasoning output (:func:`unlisted_reasoning`);
* Perplexity (and xAI's older shape): top-level ``reasoning_tokens`` and ``citation_tokens``
  are output beyond ``completion_tokens``; ``num_search_queries`` are billed web searches;
  ``cached_prompt_text_tokens`` are cache reads;
* Moonshot (and Together): a top-level ``cached_tokens`` is the cache reads;
* OpenRouter: ``usage.cost`` is the bill in USD (with BYOK, plus
  ``cost_details.upstream_inference_cost``); Perplexity: ``usage.cost.total_cost``: the
  call's cost, source ``provider``.

Values are untrusted: a count that is not a token count raises ``ValueError`` (the usage is
then recorded as unusable), a cost that is not a finite non-negative number is ignored.
"""

from __future__ import annotations

import math
from typing import Any

from ...usage import Usage, check_token_count
from ..lifecycle import sdk_field as _get

__all__ = [
    "billed_units",
    "has_vendor_fields",
    "output_tokens",
    "unlisted_reasoning",
    "vendor_usage",
]

#: top-level usage fields no OpenAI response has (their presence is the cue)
_VENDOR_FIELDS = (
    "prompt_cache_hit_tokens",
    "cached_prompt_text_tokens",
    "cached_tokens",
    "reasoning_tokens",
    "citation_tokens",
    "cost",
    "num_search_queries",
)
#: top-level cache-read counts, by provider: DeepSeek, xAI's older shape, Moonshot/Together
_CACHE_READ_FIELDS = ("prompt_cache_hit_tokens", "cached_prompt_text_tokens", "cached_tokens")


def has_vendor_fields(usage: Any) -> bool:
    """May :func:`vendor_usage` change what was read? An SDK object's
    extra fields are in ``model_extra`` (empty for OpenAI's own responses)."""
    if isinstance(usage, dict):
        return any(name in usage for name in _VENDOR_FIELDS)
    return bool(getattr(usage, "model_extra", None))


def _count(usage: Any, name: str) -> int | None:
    return check_token_count(name, _get(usage, name))


def _cost(usage: Any) -> float | None:
    """OpenRouter's reported cost in USD (BYOK: its fee plus the upstream provider's bill)."""
    cost = _get(usage, "cost")
    if cost is not None and not isinstance(cost, (int, float)):  # Perplexity: a breakdown
        cost = _get(cost, "total_cost")
    if (
        isinstance(cost, bool)
        or not isinstance(cost, (int, float))
        or not math.isfinite(cost)
        or cost < 0
    ):
        return None
    if _get(usage, "is_byok") is True:
        upstream = _get(_get(usage, "cost_details"), "upstream_inference_cost")
        if (
            isinstance(upstream, (int, float))
            and not isinstance(upstream, bool)
            and math.isfinite(upstream)
            and upstream >= 0
        ):
            cost += upstream
    return float(cost)


def output_tokens(usage: Any, prompt: Any, completion: Any, reasoning: Any) -> Any:
    """``completion_tokens``, plus the reasoning tokens when the provider counts them apart
    (xAI: ``total_tokens`` = prompt + completion + reasoning); called only with reasoning."""
    total = _get(usage, "total_tokens")
    if (
        type(total) is int
        and type(prompt) is int
        and type(completion) is int
        and type(reasoning) is int
        and total == prompt + completion + reasoning
    ):
        return completion + reasoning
    return completion


def unlisted_reasoning(usage: Any, prompt: Any, completion: Any) -> int | None:
    """Output tokens ``total_tokens`` counts beyond ``prompt_tokens`` + ``completion_tokens``
    when no reasoning is listed (Gemini's thought tokens); None when the total says nothing
    more or another provider field may explain it (:func:`vendor_usage` reads those)."""
    total = _get(usage, "total_tokens")
    if (
        type(total) is not int
        or type(prompt) is not int
        or type(completion) is not int
        or total <= prompt + completion
        or has_vendor_fields(usage)
    ):
        return None
    check_token_count("total_tokens", total)
    return total - prompt - completion


def vendor_usage(usage: Any, found: Usage) -> Usage:
    """``found`` (read as OpenAI's shape) with the provider's own fields applied."""
    changes: dict[str, Any] = {}
    if found.cache_read_tokens is None:
        hit = None
        for name in _CACHE_READ_FIELDS:
            hit = _count(usage, name)
            if hit is not None:
                break
        if hit is not None and found.input_tokens is not None and hit <= found.input_tokens:
            changes["cache_read_tokens"] = hit
    output = found.output_tokens
    top_reasoning = _count(usage, "reasoning_tokens")
    citations = _count(usage, "citation_tokens")
    if output is not None and (top_reasoning or citations):
        changes["output_tokens"] = output + (top_reasoning or 0) + (citations or 0)
        if top_reasoning:
            changes["reasoning_tokens"] = top_reasoning
    cost = _cost(usage)
    if cost is not None:
        changes["cost_usd"] = cost
    return found.replace(**changes) if changes else found


def billed_units(usage: Any) -> dict[str, Any]:
    """Billed units a compatible provider reports beyond tokens (Perplexity's web searches
    and citation tokens), as genai-prices names them; {} when none."""
    units: dict[str, Any] = {}
    searches = _count(usage, "num_search_queries")
    if searches:
        units["web_searches"] = searches
    citations = _count(usage, "citation_tokens")
    if citations:
        units["output_citation_tokens"] = citations
    return units
