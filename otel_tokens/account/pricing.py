"""USD cost of a call: provider-reported when the backend says, else computed from genai-prices.

* A cost the backend reported (``Usage.cost_usd``, e.g. Claude Code's ``total_cost_usd``)
  wins: source ``provider``.
* Otherwise the price comes from ``genai-prices``' bundled data (never a network call):
  cache-aware, with reasoning priced as output (it is counted inside output). Prices are
  resolved once per (provider, model) and cached for an hour (prices can change over time).
  Flat per-token prices are applied from the library's own resolved rates; tiered prices
  (by prompt size) go through the library's calculation. Source ``computed``.
* The full bill, not only the token price: a response's :class:`~otel_tokens.usage.Billing`
  gives the price context (service tier, batch processing: genai-prices' price variants,
  resolved once per (provider, model, context)) and billed units beyond the token classes
  (web and file searches, audio tokens, 1-hour cache writes, audio seconds), priced by the
  library's own calculation. Each result names the components it priced; a component the
  data has no price for (a tier without its own rates, a fee the model lists no price for)
  is named as unpriced, never silently 0.
* The price is the call's provider's (``gen_ai.provider.name``, named by the client's
  endpoint: :mod:`otel_tokens.endpoints`), genai-prices' own fallbacks included, never
  another provider's for a model of the same name; a provider genai-prices does not know (a
  host) is priced by a search across providers by model name; a self-hosted endpoint is never
  priced. :attr:`PriceResult.match` says which (span ``otel_tokens.cost.price_match``).
* A model with no price: no cost, and the caller counts ``otel_tokens.unpriced_requests``.
* ``OTEL_TOKENS_PRICES_FILE`` (TOML or JSON, read by :mod:`otel_tokens.settings` with
  :func:`load_price_file`) overrides prices per model, for private or discounted models.

``genai_prices`` takes ~100 ms to import, so it is imported lazily (and warmed up in the
background by ``instrument()``), never at ``import otel_tokens``.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Literal, Mapping, NamedTuple

from .. import threads
from ..endpoints import is_self_hosted
from ..errors import OtelTokensError
from ..usage import Billing, Usage

__all__ = ["OverridePrice", "PriceFileError", "PriceResult", "Pricer", "load_price_file"]

_log = logging.getLogger(__name__)

CostSource = Literal["provider", "computed", "estimated"]

#: ``gen_ai.provider.name`` values (semantic conventions) -> genai-prices provider ids.
PROVIDER_IDS: dict[str, str] = {
    "openai": "openai",
    "anthropic": "anthropic",
    "azure.ai.openai": "azure",
    "azure.ai.inference": "azure",
    "gcp.gemini": "google",
    "gcp.vertex_ai": "google",
    "gcp.gen_ai": "google",
    "aws.bedrock": "aws",
    "mistral_ai": "mistral",
    "groq": "groq",
    "deepseek": "deepseek",
    "x_ai": "x-ai",
    "perplexity": "perplexity",
    "cohere": "cohere",
}

_CACHE_TTL_SECONDS = 3600.0
_CACHE_MAX = 1024  # resolved (provider, model, context) prices kept; the oldest goes first
_LIBRARY_CACHE_MAX = 1024  # entries of genai-prices' own lookup caches before they are cleared
_PER_MILLION = 1_000_000


class PriceFileError(OtelTokensError, ValueError):
    """``OTEL_TOKENS_PRICES_FILE`` names a file that cannot be read or is malformed."""


class PriceResult(NamedTuple):
    """A call's cost and where it came from; ``unpriced`` when there were tokens to price but
    no price for the model. ``components``: what the cost covers beyond plain tokens (e.g.
    ``web_searches``, ``service_tier=flex``); ``unpriced_components``: what the response was
    billed for that no price covers (the cost is then a lower bound, or at the standard rate
    for an unknown tier). (A named tuple: immutable.)"""

    cost_usd: float | None
    source: CostSource | None
    unpriced: bool = False
    components: tuple[str, ...] = ()
    unpriced_components: tuple[str, ...] = ()
    #: how the price was found (span ``otel_tokens.cost.price_match``): ``endpoint`` (the
    #: provider the client's endpoint is), ``model_name`` (endpoint unknown: a search across
    #: providers by model name), ``price_file``, ``self_hosted`` (a local server: never
    #: priced as another provider); None for a reported cost or no price
    match: str | None = None


_NO_TOKENS = PriceResult(None, None)
_UNPRICED = PriceResult(None, None, unpriced=True)
#: price-context values that mean the standard price (no variant to look for)
_STANDARD = frozenset(("default", "standard", "auto", "on_demand"))


@dataclass(frozen=True, slots=True)
class OverridePrice:
    """USD per million tokens for one model (cache rates default to the input rate)."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None
    provider: str | None = None


@dataclass(frozen=True, slots=True)
class _Rates:
    """USD per request and per token; ``library`` set when the price is tiered and needs
    genai-prices' own calculation."""

    input: float
    output: float
    cache_read: float
    cache_write: float
    reasoning: float | None = None  # None: priced as output
    per_request: float = 0.0
    tiered: bool = False  # by prompt size: not linear, the library prices each call
    model_price: Any = None  # genai-prices' ModelPrice (None for a price-file override)
    context: tuple[str, ...] = ()  # the price context items that matched a variant
    unmatched: tuple[str, ...] = ()  # price context items the data has no variant for
    expires: float = math.inf
    match: str | None = None  # see PriceResult.match

    def cost(self, usage: Usage) -> float:
        if self.tiered:
            return _library_cost(self.model_price, usage)
        cr = usage.cache_read_tokens or 0
        cw = usage.cache_write_tokens or 0
        fresh = (usage.input_tokens or 0) - cr - cw
        output = usage.output_tokens or 0
        cost = self.per_request + fresh * self.input + cr * self.cache_read + cw * self.cache_write
        reasoning = usage.reasoning_tokens
        if self.reasoning is not None and reasoning:
            return cost + (output - reasoning) * self.output + reasoning * self.reasoning
        return cost + output * self.output


def _library_usage(usage: Usage, units: tuple[tuple[str, Any], ...] = ()) -> Any:
    """genai-prices' usage record: the token classes (reasoning as output reasoning) and
    any further billed units."""
    import genai_prices

    values = {
        "input_tokens": usage.input_tokens or 0,
        "cache_read_tokens": usage.cache_read_tokens or 0,
        "cache_write_tokens": usage.cache_write_tokens or 0,
        "output_tokens": usage.output_tokens or 0,
    }
    if usage.reasoning_tokens:
        values["output_reasoning_tokens"] = usage.reasoning_tokens
    values.update(units)
    return genai_prices.Usage(**values)


def _library_cost(model_price: Any, usage: Usage, units: tuple[tuple[str, Any], ...] = ()) -> float:
    return float(model_price.calc_price(_library_usage(usage, units))["total_price"])


def _rates_from_library(model_price: Any, expires: float) -> _Rates:
    """Rates of a genai-prices ``ModelPrice``, measured by the library itself.

    A flat price is linear in each token class, so the library's cost of an empty request
    (per-request fees) and of a million tokens of each class give every rate; the cost of a
    call is then a few multiplications instead of a ~50 us Decimal calculation. Tiered prices
    (by prompt size) are not linear and keep the library's calculation.
    """
    from genai_prices.types import TieredPrices

    if any(isinstance(v, TieredPrices) for v in vars(model_price).values()):
        return _Rates(0.0, 0.0, 0.0, 0.0, tiered=True, model_price=model_price, expires=expires)
    m = _PER_MILLION

    def probe(**tokens: int) -> float:
        return _library_cost(model_price, Usage(**tokens))

    base = probe()
    output = (probe(output_tokens=m) - base) / m
    reasoning = (probe(output_tokens=m, reasoning_tokens=m) - base) / m
    return _Rates(
        input=(probe(input_tokens=m) - base) / m,
        output=output,
        cache_read=(probe(input_tokens=m, cache_read_tokens=m) - base) / m,
        cache_write=(probe(input_tokens=m, cache_write_tokens=m) - base) / m,
        reasoning=None if reasoning == output else reasoning,
        per_request=base,
        model_price=model_price,
        expires=expires,
    )


def _unit_priced(model_price: Any, unit: str) -> bool:
    """Whether ``model_price`` prices a billed unit: a token kind falls back to its parent
    class's price (an audio input token is an input token unless priced apart); a fee (a
    search, a second of audio) needs a price of its own."""
    from genai_prices.data_units import unit_data

    spec = unit_data.get(unit)
    if spec is None:
        return False
    if spec["dimensions"].get("family") == "tokens":
        return True
    return model_price is not None and getattr(model_price, spec["price_key"], None) is not None


def load_price_file(path: str) -> dict[str, OverridePrice]:
    """Read an override price file (TOML or JSON) into ``{model (lower case): price}``.

    Layout: a ``models`` table of model name -> ``input``, ``output`` (required),
    ``cache_read``, ``cache_write`` (USD per million tokens) and optional ``provider``.
    """
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise PriceFileError(f"price file {path!r}: cannot read it: {exc.strerror}") from None
    try:
        if path.lower().endswith(".json"):
            data = json.loads(raw)
        else:
            data = _toml_loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        kind = "JSON" if path.lower().endswith(".json") else "TOML"
        raise PriceFileError(f"price file {path!r}: not valid {kind}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        raise PriceFileError(f"price file {path!r}: expected a 'models' table of model prices")
    unknown_top = sorted(set(data) - {"models"})
    if unknown_top:
        raise PriceFileError(f"price file {path!r}: unknown top-level key(s) {unknown_top}")
    out: dict[str, OverridePrice] = {}
    for model, entry in data["models"].items():
        where = f"price file {path!r}, model {model!r}"
        if not isinstance(entry, dict):
            raise PriceFileError(f"{where}: expected a table of prices")
        entry = {k.replace("-", "_"): v for k, v in entry.items()}
        unknown = sorted(set(entry) - {"input", "output", "cache_read", "cache_write", "provider"})
        if unknown:
            raise PriceFileError(f"{where}: unknown key(s) {unknown}")
        values: dict[str, Any] = {}
        for key in ("input", "output", "cache_read", "cache_write"):
            value = entry.get(key)
            if value is None:
                if key in ("input", "output"):
                    raise PriceFileError(f"{where}: '{key}' (USD per million tokens) is required")
                continue
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not (math.isfinite(value) and value >= 0)
            ):
                raise PriceFileError(
                    f"{where}: '{key}' must be a non-negative number, got {value!r}"
                )
            values[key] = float(value)
        provider = entry.get("provider")
        if provider is not None and not isinstance(provider, str):
            raise PriceFileError(f"{where}: 'provider' must be a string")
        out[str(model).lower()] = OverridePrice(provider=provider, **values)
    return out


def _toml_loads(text: str) -> Any:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(str(exc)) from None


class Pricer:
    """Prices :class:`Usage` records; resolved prices are cached per (provider, model)."""

    def __init__(self, overrides: Mapping[str, OverridePrice] | None = None) -> None:
        self._overrides = dict(overrides or {})
        self._cache: dict[tuple[str | None, str], _Rates | None] = {}
        self._warm = threading.Event()

    @classmethod
    def from_settings(cls, settings: Any) -> Pricer:
        """A pricer with the settings' price-file overrides (``OTEL_TOKENS_PRICES_FILE``)."""
        return cls(dict(settings.price_overrides))

    def warm_up(self, background: bool = True) -> None:
        """Import genai-prices and load its data ahead of the first call (off the hot path)."""
        if self._warm.is_set():
            return

        def load() -> None:
            try:
                from genai_prices import data_snapshot

                data_snapshot.get_snapshot()
            except Exception:  # a broken install only means no computed prices
                _log.warning("otel_tokens: genai-prices could not be loaded", exc_info=True)
            finally:
                self._warm.set()

        if background:
            threads.start(load, "otel_tokens-prices")
        else:
            load()

    def price(
        self, usage: Usage, provider: str | None, model: str | None, billing: Billing | None = None
    ) -> PriceResult:
        """The call's cost: reported by the backend, computed, or None (unpriced)."""
        if usage.cost_usd is not None:
            return PriceResult(usage.cost_usd, "provider")
        if (
            usage.input_tokens is None
            and usage.output_tokens is None
            and not (billing and billing.units)
        ):
            return _NO_TOKENS  # nothing to price: neither priced nor "unpriced"
        model = usage.model or model
        provider = usage.provider or provider
        if not model:
            return _UNPRICED
        key = (provider, model, billing.context if billing is not None else ())
        rates = self._cache.get(key, _MISSING)
        if type(rates) is not _Rates or rates.expires < time.monotonic():  # else a current price
            rates = self._refreshed(key, rates)
            if type(rates) is not _Rates:
                return _UNPRICED if rates is None else rates  # unpriced, maybe saying why
        if billing is None:
            return PriceResult(rates.cost(usage), "computed", match=rates.match)
        return self._billed(rates, usage, billing)

    def _refreshed(
        self, key: tuple[str | None, str, tuple[tuple[str, str], ...]], rates: Any
    ) -> _Rates | PriceResult | None:
        """The rates of ``key`` (provider, model, context) when the cache holds none current
        (``rates``: what it holds): resolved and cached (bounded); a PriceResult: unpriced,
        saying why (self-hosted, an endpoint's model); None: unpriced."""
        if rates is _MISSING or type(rates) is _Rates:  # not resolved yet, or expired
            rates = self._resolve(*key)
            cache = self._cache
            if len(cache) >= _CACHE_MAX and key not in cache:
                del cache[next(iter(cache))]  # bounded: model names may come from clients
            cache[key] = rates
        return rates

    def priced_by_alone(
        self,
        provider: str | None,
        model: str | None,
        unit: str,
        context: tuple[tuple[str, str], ...] = (),
    ) -> bool:
        """Whether genai-prices prices ``model`` by ``unit`` and by no token (tts-1: per input
        character): a unit counted from the request is then the call's whole bill."""
        if not model:
            return False
        key = (provider, model, context)
        rates = self._cache.get(key, _MISSING)
        if type(rates) is not _Rates or rates.expires < time.monotonic():
            rates = self._refreshed(key, rates)
        price = rates.model_price if type(rates) is _Rates else None
        if price is None or _is_token_unit(unit) or not _unit_priced(price, unit):
            return False
        return price.input_mtok is None and price.output_mtok is None

    @staticmethod
    def _billed(rates: _Rates, usage: Usage, billing: Billing) -> PriceResult:
        """The full bill: tokens at the context's rates, plus every further billed unit."""
        units = billing.units
        priced = tuple(u for u, _ in units if _unit_priced(rates.model_price, u))
        unpriced = rates.unmatched + tuple(u for u, _ in units if u not in priced)
        cost = rates.cost(usage)
        if priced and rates.model_price is not None:
            billed = tuple((u, n) for u, n in units if u in priced)
            try:
                cost = _library_cost(rates.model_price, usage, billed)
            except Exception as exc:  # inconsistent counts: the token price stands, units unpriced
                _log.debug("otel_tokens: billed units not priced: %s", exc)
                unpriced, priced = unpriced + priced, ()
        elif priced:  # a price-file override: token kinds at their class's rate, fees unpriced
            unpriced += tuple(u for u in priced if not _is_token_unit(u))
            priced = tuple(u for u in priced if _is_token_unit(u))
        return PriceResult(
            cost,
            "computed",
            components=rates.context + priced,
            unpriced_components=unpriced,
            match=rates.match,
        )

    def _resolve(
        self, provider: str | None, model: str, context: tuple[tuple[str, str], ...] = ()
    ) -> _Rates | PriceResult | None:
        wanted = tuple((k, v) for k, v in context if v not in _STANDARD)
        override = self._overrides.get(model.lower())
        if override is not None and (override.provider in (None, provider)):
            return _Rates(
                input=override.input / _PER_MILLION,
                output=override.output / _PER_MILLION,
                cache_read=(
                    override.cache_read if override.cache_read is not None else override.input
                )
                / _PER_MILLION,
                cache_write=(
                    override.cache_write if override.cache_write is not None else override.input
                )
                / _PER_MILLION,
                unmatched=tuple(f"{k}={v}" for k, v in wanted),
                match="price_file",
            )
        from datetime import datetime, timezone

        found, match = _find_model(provider, model)
        if found is None:
            return (
                _UNPRICED if match is None else PriceResult(None, None, unpriced=True, match=match)
            )
        now = datetime.now(tz=timezone.utc)
        matched, unmatched = _variants(found, wanted, now)
        model_price = found.get_prices(now, dict(matched) if matched else None)
        rates = replace(
            _rates_from_library(model_price, time.monotonic() + _CACHE_TTL_SECONDS), match=match
        )
        if not wanted:
            return rates
        return replace(
            rates,
            context=tuple(f"{k}={v}" for k, v in matched),
            unmatched=tuple(f"{k}={v}" for k, v in unmatched),
        )


def _is_token_unit(unit: str) -> bool:
    from genai_prices.data_units import unit_data

    spec = unit_data.get(unit)
    return spec is not None and spec["dimensions"].get("family") == "tokens"


def _find_model(provider: str | None, model: str) -> tuple[Any, str | None]:
    """(genai-prices' model, how it was matched) for a call to ``provider``: at that provider
    when genai-prices knows it (its own fallbacks included: Azure to OpenAI), never at
    another's; a self-hosted endpoint is never priced; any other endpoint (a host genai-prices
    does not know) by a search across providers by model name. (None, why) when not found."""
    from genai_prices import data_snapshot

    snapshot = data_snapshot.get_snapshot()
    _bound_library_caches(snapshot)
    if is_self_hosted(provider):  # first: a host named "openai-proxy" is not OpenAI
        return None, "self_hosted"
    provider_id = price_id(provider, snapshot)
    if provider_id is not None:
        try:
            return snapshot.find_provider_model(model, None, provider_id, None)[1], "endpoint"
        except LookupError:
            if provider_id not in _MAKERS_PRICE:
                return None, None
    try:
        return snapshot.find_provider_model(model, None, None, None)[1], "model_name"
    except LookupError:
        return None, None


#: providers whose bill is not tokens (Copilot: premium requests), their dollar figure the
#: model maker's token price when genai-prices lists none of their own for the model
_MAKERS_PRICE = frozenset(("github-copilot",))


def price_id(provider: str | None, snapshot: Any = None) -> str | None:
    """The genai-prices provider id of a ``gen_ai.provider.name`` (a semantic-conventions
    name, a genai-prices id or one of its aliases, e.g. litellm's ``together_ai``); None for
    a host name or a name genai-prices does not know."""
    if not provider:
        return None
    known = PROVIDER_IDS.get(provider)
    if known is not None or "." in provider or ":" in provider:
        return known
    from genai_prices.data_snapshot import find_provider_by_id, get_snapshot

    found = find_provider_by_id((snapshot or get_snapshot()).providers, provider)
    return found.id if found is not None else None


def _bound_library_caches(snapshot: Any) -> None:
    """genai-prices caches every model name it is asked about, found or not, for the life of
    the process; names a gateway's clients choose would grow them without end. Past a bound
    they are cleared (a cache: clearing costs one lookup again, never a wrong price)."""
    for name in ("_lookup_cache", "_provider_cache", "_provider_misses"):
        cache = getattr(snapshot, name, None)
        if cache is not None and len(cache) > _LIBRARY_CACHE_MAX:
            cache.clear()


def _variants(
    model_info: Any, wanted: tuple[tuple[str, str], ...], now: Any
) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """(context items the model has a price variant for, those it has none for)."""
    if not wanted:
        return (), ()
    known = set()
    for variant in model_info.price_variants or ():
        if variant.constraint is None or variant.constraint.active(now):
            known.update(variant.when.items())
    matched = tuple(item for item in wanted if item in known)
    return matched, tuple(item for item in wanted if item not in known)


_MISSING: Any = object()
