"""`Usage`: the one normalized usage record every backend produces.

Instrumentors translate whatever a backend reports (OpenAI ``usage`` blocks, Anthropic stream
events, agent-CLI output) into this record, so that accounting and telemetry never see a
provider's shape. Meanings follow the OpenTelemetry GenAI semantic conventions:

* ``input_tokens`` *includes* ``cache_read_tokens`` and ``cache_write_tokens``;
* ``output_tokens`` *includes* ``reasoning_tokens``;
* ``None`` means "the backend did not say" and is never turned into 0.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import operator
from dataclasses import dataclass, fields
from typing import Any, Literal, Mapping, NamedTuple

from . import faults

__all__ = [
    "TOKEN_CLASSES",
    "USAGE_SOURCES",
    "Billing",
    "Usage",
    "UsageSource",
    "check_amount",
    "check_sent_usage",
    "check_token_count",
    "check_token_text",
]

UsageSource = Literal["reported", "estimated", "parsed_text"]

#: Names of the token-count fields, in the order used everywhere (ledger columns, metrics).
TOKEN_CLASSES: tuple[str, ...] = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)

#: The largest token count a record accepts: int64, what OTLP, Prometheus and the ledger's
#: SQLite and in-memory columns can hold. No backend counts that many tokens; a larger value
#: is garbage that would otherwise break the ledger's columns and every exporter's batch.
MAX_TOKEN_COUNT = 2**63 - 1

#: Valid ``source`` values, from most to least authoritative.
USAGE_SOURCES: tuple[str, ...] = ("reported", "parsed_text", "estimated")


def check_token_count(name: str, value: Any) -> int | None:
    """Return ``value`` as an ``int`` token count, or raise ``ValueError`` naming ``name``.

    The one coercion rule for a count as a backend sent it, on every backend and path:
    an integer, or an integral float such as ``12.0`` (some JSON emitters write those), is
    the count; a boolean (never 1/0), a string (``"10"`` too: JSON has numbers), a fraction
    (``10.7``, never rounded or cut), NaN/inf, a negative or a value beyond int64 is not a
    count. A count a transport can only carry as text (an HTTP header) goes through
    :func:`check_token_text`.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer token count, got a boolean ({value!r})")
    if type(value) is int:  # the common case, kept cheap
        if 0 <= value <= MAX_TOKEN_COUNT:
            return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{name} must be a finite token count, got {value!r}")
        if not value.is_integer():
            raise ValueError(f"{name} must be a whole number of tokens, got {value!r}")
        value = int(value)
    else:
        try:
            value = operator.index(value)
        except TypeError:
            raise ValueError(
                f"{name} must be an integer token count, got {type(value).__name__} {value!r}"
            ) from None
    if value < 0:
        raise ValueError(f"{name} must not be negative, got {value}")
    if value > MAX_TOKEN_COUNT:
        raise ValueError(f"{name} is beyond any real token count (> 2**63 - 1), got {value}")
    return value


def check_token_text(name: str, text: Any) -> int | None:
    """A token count sent as text (Bedrock's ``x-amzn-bedrock-*-token-count`` headers): plain
    ASCII decimal digits, surrounding blanks allowed, then the rule of
    :func:`check_token_count`; anything else (``"10.7"``, ``"+5"``, ``"1_0"``, ``"true"``,
    non-ASCII digits) raises ``ValueError`` naming ``name``."""
    if text is None:
        return None
    if isinstance(text, bytes):
        text = text.decode("ascii", "replace")
    if not isinstance(text, str):
        return check_token_count(name, text)
    digits = text.strip(" \t")
    if not (digits.isascii() and digits.isdigit()):
        raise ValueError(f"{name} must be a whole number of tokens in decimal digits, got {text!r}")
    return check_token_count(name, int(digits))


#: how a token-count field of a usage block ends, in any provider's spelling (``prompt_tokens``,
#: ``inputTokens``, ``promptTokenCount``, ``token_count``); totals are not recorded, not checked
_COUNT_SUFFIXES = ("tokens", "tokencount", "token_count")


def check_sent_usage(usage: Any) -> None:
    """Hold a usage block *as the provider sent it* (decoded JSON, before a client library
    made numbers of it: openai's, google-genai's and botocore's parsers turn ``true`` into 1
    and ``"10"`` into 10) to :func:`check_token_count`: every token count in it, at any depth
    (details objects, modality lists), must be one; raises ``ValueError`` naming the first
    that is not.

    The common block (plain counts, details objects of plain counts) is passed by one loop
    over its values; anything else takes the full walk (:func:`_check_sent`), which decides."""
    if type(usage) is dict:
        for value in usage.values():
            kind = type(value)
            if kind is int:
                if 0 <= value <= MAX_TOKEN_COUNT:
                    continue
            elif kind is dict:
                for count in value.values():
                    if (
                        type(count) is not int or not 0 <= count <= MAX_TOKEN_COUNT
                    ) and count is not None:
                        break
                else:
                    continue  # every count of the details object is plain
            elif value is None:
                continue
            break  # not plain: the full walk decides
        else:
            return
    _check_sent(usage)


def _check_sent(usage: Any) -> None:
    """:func:`check_sent_usage`'s full walk, naming the first count that breaks the rule."""
    kind = type(usage)
    if kind is list:
        for item in usage:
            _check_sent(item)
        return
    if kind is not dict:
        return
    for name, value in usage.items():
        kind = type(value)
        if kind is int and 0 <= value <= MAX_TOKEN_COUNT or value is None:
            continue  # a count, whatever the field
        if kind is dict:  # a details object of plain counts: read in place
            for count in value.values():
                if count is not None and (
                    type(count) is not int or not 0 <= count <= MAX_TOKEN_COUNT
                ):
                    _check_sent(value)
                    break
        elif kind is list:
            _check_sent(value)
        elif isinstance(name, str):
            low = name.lower()
            if low.endswith(_COUNT_SUFFIXES) and not low.startswith("total"):
                check_token_count(name, value)


def check_amount(name: str, value: Any) -> float | None:
    """Return ``value`` as a finite, non-negative ``float`` (USD, premium requests) or raise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must not be negative, got {value}")
    return value


class Billing(NamedTuple):
    """What a call is billed for beyond its token classes, in genai-prices' vocabulary (the
    account step prices it; capture only reads it off the response, or the request).

    ``context``: the price context, e.g. ``(("service_tier", "flex"),)`` or
    ``(("processing", "batch"),)``; ``units``: billed units other than the five token
    classes, e.g. ``(("web_searches", 2), ("input_audio_tokens", 40),
    ("cache_write_1h_tokens", 900))``; ``counted``: units capture counted from the request,
    not reported (a speech request's ``input_characters``): the bill only where the model's
    price is by them and by no token (tts-1), as the account step reads the price data, else
    dropped. All are sorted tuples (hashable: prices are cached per context).
    """

    context: tuple[tuple[str, str], ...] = ()
    units: tuple[tuple[str, int | float], ...] = ()
    counted: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(
        cls,
        context: Mapping[str, Any] | None = None,
        units: Mapping[str, Any] | None = None,
        counted: Mapping[str, Any] | None = None,
    ) -> Billing | None:
        """A record from mappings, keeping string contexts and whole positive counts only;
        None when nothing is left (the common case: plain token pricing)."""
        ctx = tuple(sorted((k, v) for k, v in (context or {}).items() if isinstance(v, str) and v))
        billed, asked = _counts(units), _counts(counted)
        return cls(ctx, billed, asked) if ctx or billed or asked else None


def _counts(units: Mapping[str, Any] | None) -> tuple[tuple[str, int | float], ...]:
    """The positive counts of ``units``, sorted; an invalid one is counted and left out."""
    counted = []
    for key, value in (units or {}).items():
        check = check_amount if key.endswith("seconds") else check_token_count
        try:  # a duration (seconds of audio) may be fractional; every other unit is a count
            count = check(key, value)
        except ValueError as exc:  # counted; the rest of the response still stands
            faults.report("usage_invalid", exc)
            continue
        if count:
            counted.append((key, count))
    return tuple(sorted(counted))


def _add_optional(a: Any, b: Any) -> Any:
    """None-aware sum: None + x is x, None + None stays None."""
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def _same_or_none(a: str | None, b: str | None) -> str | None:
    """Keep a label when both sides agree (or one is unknown); drop it when they differ."""
    if a is None:
        return b
    if b is None or a == b:
        return a
    return None


def _check_labels(model: Any, provider: Any, response_id: Any) -> None:
    """Raise for a label that is not a string (a ``str`` subclass passes)."""
    for name, value in (("model", model), ("provider", provider), ("response_id", response_id)):
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{name} must be a string or None, got {type(value).__name__}")


def _refuse_classes(
    input_tokens: int | None,
    output_tokens: int | None,
    cache_read: int | None,
    cache_write: int | None,
    reasoning: int | None,
) -> None:
    """Raise for cache tokens beyond the input, or reasoning beyond the output."""
    if input_tokens is not None and (cache_read or 0) + (cache_write or 0) > input_tokens:
        raise ValueError(
            f"input_tokens ({input_tokens}) must include cache_read_tokens "
            f"({cache_read}) and cache_write_tokens ({cache_write})"
        )
    raise ValueError(f"output_tokens ({output_tokens}) must include reasoning_tokens ({reasoning})")


def _checked_counts(
    input_tokens: Any,
    output_tokens: Any,
    cache_read_tokens: Any,
    cache_write_tokens: Any,
    reasoning_tokens: Any,
) -> tuple[int | None, int | None, int | None, int | None, int | None]:
    """A usage record's token counts checked (the common case at once, else each normalized or
    refused) and consistent with one another, as the semantic conventions count them."""
    top = MAX_TOKEN_COUNT  # each class unknown or an int in range
    if not (
        (input_tokens is None or type(input_tokens) is int and 0 <= input_tokens <= top)
        and (output_tokens is None or type(output_tokens) is int and 0 <= output_tokens <= top)
        and (
            cache_read_tokens is None
            or type(cache_read_tokens) is int
            and 0 <= cache_read_tokens <= top
        )
        and (
            cache_write_tokens is None
            or type(cache_write_tokens) is int
            and 0 <= cache_write_tokens <= top
        )
        and (
            reasoning_tokens is None
            or type(reasoning_tokens) is int
            and 0 <= reasoning_tokens <= top
        )
    ):
        input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens = map(
            check_token_count,
            TOKEN_CLASSES,
            (
                input_tokens,
                output_tokens,
                cache_read_tokens,
                cache_write_tokens,
                reasoning_tokens,
            ),
        )
    # The semantic conventions count cache tokens inside input and reasoning inside output;
    # a record that breaks this would make fresh input (and the cost split) negative.
    if (
        input_tokens is not None
        and (cache_read_tokens or 0) + (cache_write_tokens or 0) > input_tokens
    ) or (
        output_tokens is not None
        and reasoning_tokens is not None
        and reasoning_tokens > output_tokens
    ):
        _refuse_classes(
            input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens
        )
    return input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens


def _checked_others(
    premium_requests: Any,
    cost_usd: Any,
    model: Any,
    provider: Any,
    response_id: Any,
    source: Any,
) -> tuple[float | None, float | None]:
    """A usage record's other fields checked: the amounts (normalized), its source and its
    labels (strings or None); returns the amounts."""
    if premium_requests is not None:
        premium_requests = check_amount("premium_requests", premium_requests)
    if cost_usd is not None:
        cost_usd = check_amount("cost_usd", cost_usd)
    if source not in USAGE_SOURCES:
        raise ValueError(f"source must be one of {', '.join(USAGE_SOURCES)}; got {source!r}")
    if (
        (model is not None and type(model) is not str)
        or (provider is not None and type(provider) is not str)
        or (response_id is not None and type(response_id) is not str)
    ):
        _check_labels(model, provider, response_id)
    return premium_requests, cost_usd


@dataclass(frozen=True, slots=True, init=False)
class Usage:
    """What one backend call consumed, normalized across providers.

    Token classes are ``int | None``; ``None`` means unknown (not reported), never zero.
    ``cost_usd`` is a cost the *backend itself* reported (e.g. Claude Code's
    ``total_cost_usd``); computed prices live in the pricing module, not here.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    premium_requests: float | None = None
    cost_usd: float | None = None
    model: str | None = None
    provider: str | None = None
    response_id: str | None = None
    source: UsageSource = "reported"

    def __init__(
        self,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        cache_read_tokens: int | None = None,
        cache_write_tokens: int | None = None,
        reasoning_tokens: int | None = None,
        premium_requests: float | None = None,
        cost_usd: float | None = None,
        model: str | None = None,
        provider: str | None = None,
        response_id: str | None = None,
        source: UsageSource = "reported",
    ) -> None:
        # Checked (the counts first, then the other fields; each normalized or refused),
        # then set as plain slots (see _Unfrozen; kept for speed: docs/benchmarks.md). The
        # generated frozen __init__'s signature: tests/core/test_usage.py compares it with
        # fields().
        counts = _checked_counts(
            input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens
        )
        input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens = (
            counts
        )
        premium_requests, cost_usd = _checked_others(
            premium_requests, cost_usd, model, provider, response_id, source
        )
        if type(self) is not Usage:  # a subclass (another layout): through the slots' setters
            _set_fields(
                self,
                input_tokens,
                output_tokens,
                cache_read_tokens,
                cache_write_tokens,
                reasoning_tokens,
                premium_requests,
                cost_usd,
                model,
                provider,
                response_id,
                source,
            )
            return
        _AS_UNFROZEN(self, _Unfrozen)  # plain slot stores, then a Usage again (see _Unfrozen)
        record: Any = self
        record.input_tokens = input_tokens
        record.output_tokens = output_tokens
        record.cache_read_tokens = cache_read_tokens
        record.cache_write_tokens = cache_write_tokens
        record.reasoning_tokens = reasoning_tokens
        record.premium_requests = premium_requests
        record.cost_usd = cost_usd
        record.model = model
        record.provider = provider
        record.response_id = response_id
        record.source = source
        record.__class__ = Usage

    # -- derived values -------------------------------------------------------------------
    @property
    def fresh_input_tokens(self) -> int | None:
        """Input tokens neither read from nor written to a cache (None when input is unknown).

        An unreported cache class counts as no cache use: the backend said nothing of caching.
        """
        if self.input_tokens is None:
            return None
        return self.input_tokens - (self.cache_read_tokens or 0) - (self.cache_write_tokens or 0)

    @property
    def total_tokens(self) -> int | None:
        """Input plus output (None only when both are unknown)."""
        return _add_optional(self.input_tokens, self.output_tokens)

    @property
    def is_empty(self) -> bool:
        """True when no token class, cost or premium-request figure is known."""
        return all(getattr(self, n) is None for n in TOKEN_CLASSES) and (
            self.premium_requests is None and self.cost_usd is None
        )

    # -- combination ----------------------------------------------------------------------
    def __add__(self, other: object) -> Usage:
        """Sum two records across calls: None + 5 is 5, None + None stays None.

        Labels (model, provider, response id) survive only when both sides agree; the
        source of a sum is the least authoritative of its parts.
        """
        if not isinstance(other, Usage):
            return NotImplemented
        source = max(self.source, other.source, key=USAGE_SOURCES.index)
        return Usage(
            input_tokens=_add_optional(self.input_tokens, other.input_tokens),
            output_tokens=_add_optional(self.output_tokens, other.output_tokens),
            cache_read_tokens=_add_optional(self.cache_read_tokens, other.cache_read_tokens),
            cache_write_tokens=_add_optional(self.cache_write_tokens, other.cache_write_tokens),
            reasoning_tokens=_add_optional(self.reasoning_tokens, other.reasoning_tokens),
            premium_requests=_add_optional(self.premium_requests, other.premium_requests),
            cost_usd=_add_optional(self.cost_usd, other.cost_usd),
            model=_same_or_none(self.model, other.model),
            provider=_same_or_none(self.provider, other.provider),
            response_id=self.response_id if self.response_id == other.response_id else None,
            source=source,
        )

    def __radd__(self, other: object) -> Usage:
        """Lets ``sum(usages)`` work: ``0 + usage`` is ``usage``."""
        if isinstance(other, int) and not isinstance(other, bool) and other == 0:
            return self
        return NotImplemented

    def replace(self, **changes: Any) -> Usage:
        """A copy with ``changes`` applied (validated like a new record)."""
        return dataclasses.replace(self, **changes)

    # -- serialization --------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain dict of every field (None kept, so "unknown" survives a round trip)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Usage:
        """Inverse of :meth:`to_dict`; unknown keys are a clear error, not silently dropped."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown Usage field(s): {', '.join(unknown)}")
        return cls(**dict(data))


#: The slots' setters, in field order (for ``Usage.__init__`` of a subclass).
_SETTERS = tuple(Usage.__dict__[f.name].__set__ for f in fields(Usage))


def _set_fields(record: Usage, *values: Any) -> None:
    """Every field of a new record of a Usage subclass, in field order, through the setters."""
    for setter, value in zip(_SETTERS, values):
        setter(record, value)


class _Unfrozen:
    """Usage's very slot layout without its frozen ``__setattr__``: ``Usage.__init__`` fills a
    new record as one of these (plain slot stores rather than the slots' own setters;
    kept for speed: docs/benchmarks.md) and makes it a Usage again."""

    __slots__ = Usage.__slots__


#: ``object.__class__``'s setter: a new Usage made an _Unfrozen (its own __setattr__ refuses)
_AS_UNFROZEN = object.__dict__["__class__"].__set__
