"""Metric instruments, histogram buckets, views and attribute names of the telemetry contract.

Names come from the OpenTelemetry semantic-conventions package where it has them; the rest
(``otel_tokens.*`` and ``gen_ai.usage.cache_write.input_tokens``, which the package does not
carry yet) are defined here, once. ``docs/telemetry-contract.md`` is the public contract.
"""

from __future__ import annotations

from dataclasses import dataclass
from time import time_ns
from typing import Any, Callable, Iterable

from opentelemetry.metrics import Histogram, Meter, ObservableGauge, Observation
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as _gen_ai
from opentelemetry.semconv._incubating.attributes import user_attributes as _user
from opentelemetry.semconv.attributes import error_attributes as _error
from opentelemetry.semconv.attributes import server_attributes as _server

from ..usage import USAGE_SOURCES
from .sums import CounterSums

# -- attribute names ------------------------------------------------------------------------
OPERATION = _gen_ai.GEN_AI_OPERATION_NAME
PROVIDER = _gen_ai.GEN_AI_PROVIDER_NAME
REQUEST_MODEL = _gen_ai.GEN_AI_REQUEST_MODEL
REQUEST_STREAM = _gen_ai.GEN_AI_REQUEST_STREAM
RESPONSE_MODEL = _gen_ai.GEN_AI_RESPONSE_MODEL
RESPONSE_ID = _gen_ai.GEN_AI_RESPONSE_ID
FINISH_REASONS = _gen_ai.GEN_AI_RESPONSE_FINISH_REASONS
TIME_TO_FIRST_CHUNK = _gen_ai.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK
CONVERSATION_ID = _gen_ai.GEN_AI_CONVERSATION_ID
AGENT_NAME = _gen_ai.GEN_AI_AGENT_NAME
TOKEN_TYPE = _gen_ai.GEN_AI_TOKEN_TYPE
USAGE_INPUT = _gen_ai.GEN_AI_USAGE_INPUT_TOKENS
USAGE_OUTPUT = _gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS
USAGE_CACHE_READ = _gen_ai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS
USAGE_CACHE_WRITE = "gen_ai.usage.cache_write.input_tokens"  # newer than the package's name
USAGE_REASONING = _gen_ai.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS
SERVER_ADDRESS = _server.SERVER_ADDRESS
SERVER_PORT = _server.SERVER_PORT
ERROR_TYPE = _error.ERROR_TYPE
USER_ID = _user.USER_ID  # who the call is for
TENANT_ID = "tenant.id"  # no semantic-conventions name yet

ESTIMATE_INPUT = "otel_tokens.estimate.input_tokens"
ESTIMATE_SOURCE = "otel_tokens.estimate.source"
ESTIMATE_ERROR = "otel_tokens.estimate.error"
ESTIMATE_CALIBRATION = "otel_tokens.estimate.calibration"  # actual/estimate ratio applied
ESTIMATE_COMPLETE = (
    "otel_tokens.estimate.complete"  # false: part of the request counted by a per-item figure
)
ESTIMATE_INPUT_MAX = "otel_tokens.estimate.input_tokens_max"  # an incomplete estimate's bound
USAGE_SOURCE = "otel_tokens.usage.source"
COST_USD = "otel_tokens.cost.usd"
COST_SOURCE = "otel_tokens.cost.source"
COST_COMPONENTS = "otel_tokens.cost.components"  # span: what the cost covers beyond tokens
COST_UNPRICED = "otel_tokens.cost.unpriced"  # span, unpriced_requests: billed, no price known
COST_MATCH = (
    "otel_tokens.cost.price_match"  # span: endpoint | model_name | price_file | self_hosted
)
PREMIUM_REQUESTS = "otel_tokens.premium_requests"
STATE_TURN_COUNT = "otel_tokens.state.turn_count"
STATE_TOTAL_OUTPUT = "otel_tokens.state.total_output_tokens"
STATE_MAX_OBSERVED_INPUT = "otel_tokens.state.max_observed_input_tokens"
STATE_CONTEXT_UTILIZATION = "otel_tokens.state.context_utilization"
ANOMALY_EVENT = "otel_tokens.anomaly"
ANOMALY_KIND = "otel_tokens.anomaly.kind"
ANOMALY_OBSERVED = "otel_tokens.anomaly.observed"
ANOMALY_THRESHOLD = "otel_tokens.anomaly.threshold"
#: a tenant's or a user's budget the anomaly is of: ``tenant:acme``, ``user:ann``
ANOMALY_BUDGET = "otel_tokens.anomaly.budget"
#: anomalies count: whose budget (``tenant``, ``user``); its name is the point's tenant.id/user.id
ANOMALY_SCOPE = "otel_tokens.anomaly.scope"
ERROR_KIND = "otel_tokens.error.kind"

#: Usage field -> (span attribute, ``gen_ai.token.type`` value on ``otel_tokens.tokens``).
TOKEN_ATTRIBUTES: tuple[tuple[str, str, str], ...] = (
    ("input_tokens", USAGE_INPUT, "input"),
    ("output_tokens", USAGE_OUTPUT, "output"),
    ("cache_read_tokens", USAGE_CACHE_READ, "cache_read"),
    ("cache_write_tokens", USAGE_CACHE_WRITE, "cache_write"),
    ("reasoning_tokens", USAGE_REASONING, "reasoning"),
)

# -- metric names and buckets ---------------------------------------------------------------
TOKEN_USAGE = "gen_ai.client.token.usage"
OPERATION_DURATION = "gen_ai.client.operation.duration"
OPERATION_TTFC = "gen_ai.client.operation.time_to_first_chunk"
TOKENS = "otel_tokens.tokens"
COST = "otel_tokens.cost"
PREMIUM = "otel_tokens.premium_requests"
ESTIMATE_ERROR_METRIC = "otel_tokens.estimate.error"
CONTEXT_UTILIZATION = "otel_tokens.context.utilization"
ANOMALIES = "otel_tokens.anomalies"
UNPRICED = "otel_tokens.unpriced_requests"
USAGE_MISSING = "otel_tokens.usage.missing"
INSTRUMENTATION_ERRORS = "otel_tokens.instrumentation.errors"

TOKEN_BUCKETS: tuple[float, ...] = tuple(float(4**i) for i in range(14))  # 1 .. 67108864
DURATION_BUCKETS: tuple[float, ...] = tuple(0.01 * 2**i for i in range(14))  # 0.01 .. 81.92
ESTIMATE_ERROR_BUCKETS: tuple[float, ...] = (
    -1,
    -0.5,
    -0.25,
    -0.1,
    -0.05,
    -0.02,
    0,
    0.02,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2,
)

HISTOGRAM_BUCKETS: dict[str, tuple[float, ...]] = {
    TOKEN_USAGE: TOKEN_BUCKETS,
    OPERATION_DURATION: DURATION_BUCKETS,
    OPERATION_TTFC: DURATION_BUCKETS,
    ESTIMATE_ERROR_METRIC: ESTIMATE_ERROR_BUCKETS,
}


SCOPE = "otel_tokens"  #: the meter (instrumentation scope) of every instrument here
SDK_CARDINALITY_LIMIT = (
    2000  # the OpenTelemetry SDK's default limit of attribute sets per instrument
)
#: the most attribute sets one label set becomes on one instrument: ``otel_tokens.tokens``,
#: 5 token types x 3 usage sources (cost sources, estimate sources, anomaly kinds: 3 each)
FANOUT = len(TOKEN_ATTRIBUTES) * len(USAGE_SOURCES)


def sdk_cardinality_limit(max_label_sets: int) -> int:
    """The SDK cardinality limit our instruments need so that ``max_label_sets`` label sets
    (``cardinality.py``) never reach it: the SDK's default when that suffices, more otherwise."""
    return max(SDK_CARDINALITY_LIMIT, max_label_sets * FANOUT + 1)


def views(max_label_sets: int | None = None, max_attribute_values: int | None = None) -> list[Any]:
    """SDK Views of otel_tokens' own instruments (used by ``configure()``): the contract's
    histogram buckets, and a cardinality limit no bounded label set reaches (the SDK's
    default unless ``OTEL_TOKENS_MAX_LABEL_SETS`` asks for more; see ``cardinality.py``).

    They match otel_tokens' own meter only: another GenAI instrumentation's instruments of
    the same names keep their own aggregation (no conflicting metric identities)."""
    from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View

    from .. import settings as _settings

    current = _settings.current()
    sets = max_label_sets if max_label_sets is not None else current.max_label_sets
    values = (
        max_attribute_values if max_attribute_values is not None else current.max_attribute_values
    )
    limit = {"aggregation_cardinality_limit": max(sdk_cardinality_limit(sets), values + 2)}
    try:
        View(instrument_name=TOKENS, meter_name=SCOPE, **limit)
    except TypeError:  # an SDK before cardinality limits: nothing to raise
        limit = {}
    histograms = [
        View(
            instrument_name=name,
            meter_name=SCOPE,
            aggregation=ExplicitBucketHistogramAggregation(boundaries=list(buckets)),
            **limit,
        )
        for name, buckets in HISTOGRAM_BUCKETS.items()
    ]
    if not limit:
        return histograms
    others = (
        TOKENS,
        COST,
        PREMIUM,
        CONTEXT_UTILIZATION,
        ANOMALIES,
        UNPRICED,
        USAGE_MISSING,
        INSTRUMENTATION_ERRORS,
    )
    return histograms + [View(instrument_name=name, meter_name=SCOPE, **limit) for name in others]


@dataclass(frozen=True, slots=True)
class Instruments:
    """Every metric instrument of the contract, created once per meter."""

    token_usage: Histogram
    duration: Histogram
    time_to_first_chunk: Histogram
    estimate_error: Histogram
    context_utilization: ObservableGauge
    tokens: CounterSums
    cost: CounterSums
    premium_requests: CounterSums
    anomalies: CounterSums
    unpriced: CounterSums
    usage_missing: CounterSums
    errors: CounterSums

    @classmethod
    def create(
        cls, meter: Meter, utilization: Callable[[Any], Iterable[Observation]]
    ) -> Instruments:
        """Create the instruments; bucket advice applies even under a provider we did not set."""
        return cls(
            token_usage=_histogram(
                meter, TOKEN_USAGE, "{token}", "Input and output tokens per call."
            ),
            duration=_histogram(
                meter, OPERATION_DURATION, "s", "Duration of a GenAI client operation."
            ),
            time_to_first_chunk=_histogram(
                meter,
                OPERATION_TTFC,
                "s",
                "Time from request to the first chunk of a streamed response.",
            ),
            estimate_error=_histogram(
                meter, ESTIMATE_ERROR_METRIC, "1", "(estimate - actual) / actual of input tokens."
            ),
            context_utilization=meter.create_observable_gauge(
                CONTEXT_UTILIZATION,
                callbacks=[utilization],
                unit="1",
                description="Share of the context window in use, per agent (the displayed value).",
            ),
            tokens=_counter(
                meter,
                TOKENS,
                "{token}",
                "Tokens by type (input, output, cache read, "
                "cache write, reasoning) and usage source.",
            ),
            cost=_counter(meter, COST, "USD", "Cost of calls in USD."),
            premium_requests=_counter(
                meter, PREMIUM, "{request}", "Premium requests (e.g. GitHub Copilot)."
            ),
            anomalies=_counter(meter, ANOMALIES, "{event}", "Budget and spike anomalies detected."),
            unpriced=_counter(
                meter,
                UNPRICED,
                "{request}",
                "Calls whose model, or a billed component "
                "of whose response (otel_tokens.cost.unpriced), has no known price.",
            ),
            usage_missing=_counter(
                meter,
                USAGE_MISSING,
                "{request}",
                "Successful calls whose backend "
                "reported no usage (recorded as an estimate, when possible).",
            ),
            errors=_counter(
                meter,
                INSTRUMENTATION_ERRORS,
                "{error}",
                "Faults inside otel_tokens (caught; the host call was unaffected).",
            ),
        )


def _histogram(meter: Meter, name: str, unit: str, description: str) -> Histogram:
    """A histogram with the project's buckets for ``name`` as advice (see HISTOGRAM_BUCKETS)."""
    return meter.create_histogram(
        name,
        unit=unit,
        description=description,
        explicit_bucket_boundaries_advisory=list(HISTOGRAM_BUCKETS[name]),
    )


def _counter(meter: Meter, name: str, unit: str, description: str) -> CounterSums:
    """An observable counter over the sums the recorder adds to (see CounterSums)."""
    sums = CounterSums()
    meter.create_observable_counter(
        name, callbacks=[sums.observe], unit=unit, description=description
    )
    return sums


def record_signed(histogram: Histogram, value: float, attributes: dict[str, Any]) -> None:
    """Record a possibly negative value (the estimate-error ratio) on a histogram.

    The contract's ``otel_tokens.estimate.error`` buckets start at -1, but the Python SDK drops
    negative histogram values (the API leaves such checks to SDKs). A negative value is
    therefore handed to the SDK histogram's measurement consumer, the step that follows that
    check; under any other SDK it is recorded normally.
    """
    consumer = getattr(histogram, "_measurement_consumer", None)
    if value >= 0 or consumer is None:
        histogram.record(value, attributes)
        return
    from opentelemetry.context import get_current
    from opentelemetry.sdk.metrics._internal.measurement import Measurement

    if getattr(histogram, "_is_enabled", lambda: True)():
        consumer.consume_measurement(
            Measurement(
                value=value,
                time_unix_nano=time_ns(),
                instrument=histogram,
                context=get_current(),
                attributes=attributes,
            )
        )
