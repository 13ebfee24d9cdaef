"""USD cost of a call: provider-reported when the backend says, else computed from genai-prices.

* A cost the backend reported (``Usage.cost_usd``, e.g. Claude Code's ``total_cost_usd``)
  wins: source ``provider``.
* Otherwise the price comes from ``genai-prices``' bundled data (never a network call):
  cache-aware, with reasoning priced as output (it is counted inside output). Prices are
  resolved once per (provider, model) and cached for an hour (prices can change over time).
  Flat per-token prices are applied from the library's own resolved rates; tiered prices
  (by prompt size) go through the library's calculation. Source ``computed``.
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
from dataclasses import dataclass
from typing import Any, Literal, Mapping

from ..errors import OtelTokensError
from ..usage import Usage

__all__ = ["OverridePrice", "PriceFileError", "PriceResult", "Pricer", "load_price_file"]

_log = logging.getLogger(__name__)

CostSource = Literal["provider", "computed"]

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
_PER_MILLION = 1_000_000


class PriceFileError(OtelTokensError, ValueError):
    """``OTEL_TOKENS_PRICES_FILE`` names a file that cannot be read or is malformed."""


@dataclass(frozen=True, slots=True)
class PriceResult:
    """A call's cost and where it came from; ``unpriced`` when there were tokens to price but
    no price for the model."""

    cost_usd: float | None
    source: CostSource | None
    unpriced: bool = False


_NO_TOKENS = PriceResult(None, None)
_UNPRICED = PriceResult(None, None, unpriced=True)


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
    per_request: float = 0.0
    library: Any = None
    expires: float = math.inf

    def cost(self, usage: Usage) -> float:
        if self.library is not None:
            return _library_cost(self.library, usage)
        cr = usage.cache_read_tokens or 0
        cw = usage.cache_write_tokens or 0
        fresh = (usage.input_tokens or 0) - cr - cw
        return (
            self.per_request
            + fresh * self.input
            + cr * self.cache_read
            + cw * self.cache_write
            + (usage.output_tokens or 0) * self.output
        )


def _library_cost(model_price: Any, usage: Usage) -> float:
    import genai_prices

    priced = model_price.calc_price(
        genai_prices.Usage(
            input_tokens=usage.input_tokens or 0,
            cache_read_tokens=usage.cache_read_tokens or 0,
            cache_write_tokens=usage.cache_write_tokens or 0,
            output_tokens=usage.output_tokens or 0,
        )
    )
    return float(priced["total_price"])


def _rates_from_library(model_price: Any, expires: float) -> _Rates:
    """Rates of a genai-prices ``ModelPrice``, measured by the library itself.

    A flat price is linear in each token class, so the library's cost of an empty request
    (per-request fees) and of a million tokens of each class give every rate; the cost of a
    call is then a few multiplications instead of a ~50 us Decimal calculation. Tiered prices
    (by prompt size) are not linear and keep the library's calculation.
    """
    from genai_prices.types import TieredPrices

    if any(isinstance(v, TieredPrices) for v in vars(model_price).values()):
        return _Rates(0.0, 0.0, 0.0, 0.0, library=model_price, expires=expires)
    m = _PER_MILLION

    def probe(**tokens: int) -> float:
        return _library_cost(model_price, Usage(**tokens))

    base = probe()
    return _Rates(
        input=(probe(input_tokens=m) - base) / m,
        output=(probe(output_tokens=m) - base) / m,
        cache_read=(probe(input_tokens=m, cache_read_tokens=m) - base) / m,
        cache_write=(probe(input_tokens=m, cache_write_tokens=m) - base) / m,
        per_request=base,
        expires=expires,
    )


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
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                math.isfinite(value) and value >= 0
            ):
                raise PriceFileError(f"{where}: '{key}' must be a non-negative number, got {value!r}")
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
            threading.Thread(target=load, name="otel_tokens-prices", daemon=True).start()
        else:
            load()

    def price(self, usage: Usage, provider: str | None, model: str | None) -> PriceResult:
        """The call's cost: reported by the backend, computed, or None (unpriced)."""
        if usage.cost_usd is not None:
            return PriceResult(usage.cost_usd, "provider")
        if usage.input_tokens is None and usage.output_tokens is None:
            return _NO_TOKENS  # nothing to price: neither priced nor "unpriced"
        model = usage.model or model
        provider = usage.provider or provider
        if not model:
            return _UNPRICED
        key = (provider, model)
        rates = self._cache.get(key, _MISSING)
        if rates is _MISSING or (rates is not None and rates.expires < time.monotonic()):
            rates = self._resolve(provider, model)
            self._cache[key] = rates
        if rates is None:
            return _UNPRICED
        return PriceResult(rates.cost(usage), "computed")

    def _resolve(self, provider: str | None, model: str) -> _Rates | None:
        override = self._overrides.get(model.lower())
        if override is not None and (override.provider in (None, provider)):
            return _Rates(
                input=override.input / _PER_MILLION,
                output=override.output / _PER_MILLION,
                cache_read=(override.cache_read if override.cache_read is not None
                            else override.input) / _PER_MILLION,
                cache_write=(override.cache_write if override.cache_write is not None
                             else override.input) / _PER_MILLION,
            )  # fmt: skip
        from datetime import datetime, timezone

        from genai_prices import data_snapshot

        snapshot = data_snapshot.get_snapshot()
        provider_id = PROVIDER_IDS.get(provider or "")
        try:
            found_provider, model_info = snapshot.find_provider_model(model, None, provider_id, None)
        except LookupError:
            if provider_id is None:
                return None
            try:  # e.g. a gateway reporting its own provider name: price by the model alone
                found_provider, model_info = snapshot.find_provider_model(model, None, None, None)
            except LookupError:
                return None
        model_price = model_info.get_prices(datetime.now(tz=timezone.utc))
        return _rates_from_library(model_price, time.monotonic() + _CACHE_TTL_SECONDS)


_MISSING: Any = object()
