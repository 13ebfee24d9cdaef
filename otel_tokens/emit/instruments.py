"""Metric instruments, histogram buckets, views and attribute names of the telemetry contract.

Names come from the OpenTelemetry semantic-conventions package where it has them; the rest
(``otel_tokens.*`` and ``gen_ai.usage.cache_write.input_tokens``, which the package does not
carry yet) are defined here, once. ``docs/telemetry-contract.md`` is the public contract.
"""

from __future__ import annotations

import logging
import threading
import weakref
from time import time_ns
from dataclasses import dataclass
from functools import reduce
from operator import add
from typing import Any, Callable, Iterable

from opentelemetry.metrics import Histogram, Meter, ObservableGauge, Observation
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as _gen_ai
from opentelemetry.semconv._incubating.attributes import user_attributes as _user
from opentelemetry.semconv.attributes import error_attributes as _error
from opentelemetry.semconv.attributes import server_attributes as _server

from .. import faults
from ..usage import USAGE_SOURCES

_log = logging.getLogger(__name__)

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
ESTIMATE_COMPLETE = "otel_tokens.estimate.complete"  # false: part of the request counted by a per-item figure
USAGE_SOURCE = "otel_tokens.usage.source"
COST_USD = "otel_tokens.cost.usd"
COST_SOURCE = "otel_tokens.cost.source"
COST_COMPONENTS = "otel_tokens.cost.components"  # span: what the cost covers beyond tokens
COST_UNPRICED = "otel_tokens.cost.unpriced"  # span, unpriced_requests: billed, no price known
COST_MATCH = "otel_tokens.cost.price_match"  # span: endpoint | model_name | price_file | self_hosted
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
    -1, -0.5, -0.25, -0.1, -0.05, -0.02, 0, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2,
)  # fmt: skip

HISTOGRAM_BUCKETS: dict[str, tuple[float, ...]] = {
    TOKEN_USAGE: TOKEN_BUCKETS,
    OPERATION_DURATION: DURATION_BUCKETS,
    OPERATION_TTFC: DURATION_BUCKETS,
    ESTIMATE_ERROR_METRIC: ESTIMATE_ERROR_BUCKETS,
}


SCOPE = "otel_tokens"  #: the meter (instrumentation scope) of every instrument here
SDK_CARDINALITY_LIMIT = 2000  # the OpenTelemetry SDK's default limit of attribute sets per instrument
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
    values = max_attribute_values if max_attribute_values is not None else current.max_attribute_values
    limit = {"aggregation_cardinality_limit": max(sdk_cardinality_limit(sets), values + 2)}
    try:
        View(instrument_name=TOKENS, meter_name=SCOPE, **limit)
    except TypeError:  # an SDK before cardinality limits: nothing to raise
        limit = {}
    histograms = [
        View(instrument_name=name, meter_name=SCOPE,
             aggregation=ExplicitBucketHistogramAggregation(boundaries=list(buckets)), **limit)
        for name, buckets in HISTOGRAM_BUCKETS.items()
    ]  # fmt: skip
    if not limit:
        return histograms
    others = (TOKENS, COST, PREMIUM, CONTEXT_UTILIZATION, ANOMALIES, UNPRICED, USAGE_MISSING,
              INSTRUMENTATION_ERRORS)  # fmt: skip
    return histograms + [View(instrument_name=name, meter_name=SCOPE, **limit) for name in others]


AttributeKey = tuple  # ((name, value), ...): a hashable attribute set
_INT64_MAX = 2**63 - 1


class CounterSums:
    """Running sums behind one counter of the contract, per attribute set.

    Counters are asynchronous instruments over these sums: a call adds to a running sum
    (well under a microsecond) and the SDK turns the sums into points once per collection,
    instead of validating and hashing attributes on every call (~8 us per measurement).
    Exported names, units, attributes and values are those of a synchronous counter.

    Each sum is a cell of its own, a list: empty until the first addition (no point yet),
    then holding the sum. The recorder adds through the :class:`SumGroup` objects it keeps
    per label set, so a call neither hashes an attribute set again nor takes a lock.
    """

    __slots__ = ("__weakref__", "_cells", "_groups", "_held", "_lock")

    def __init__(self) -> None:
        self._cells: dict[AttributeKey, list[float]] = {}
        self._groups: dict[tuple[AttributeKey, ...], SumGroup] = {}
        self._lock = threading.Lock()
        self._held: set[AttributeKey] = set()  # sums held at the int64 limit (counted once each)
        _every_sum.add(self)

    def reset(self) -> None:
        """Start from zero (a forked child: its counts are its own, never the parent's), under
        a new lock (the parent's may have been held by a thread the child does not have). The
        cells and groups stay (the recorder holds them), emptied: no point until added to."""
        self._lock = threading.Lock()
        for group in self._groups.values():
            group.clear()
        for cell in self._cells.values():
            cell.clear()
        self._held = set()

    def group(self, keys: tuple[AttributeKey, ...], integers: bool = False) -> SumGroup:
        """The sums of attribute sets ``keys``, added to together (made at the first ask);
        ``integers``: only ints are ever added to them."""
        group = self._groups.get(keys)
        if group is None:
            with self._lock:  # not while a collection reads the cells
                group = self._groups.get(keys)
                if group is None:
                    cells = tuple(self._cells.setdefault(key, []) for key in keys)
                    group = self._groups[keys] = SumGroup(self, cells, integers)
        return group

    def add(self, amount: float, key: AttributeKey) -> None:
        """Add ``amount`` (>= 0) to the sum of attribute set ``key``."""
        with self._lock:
            cell = self._cells.get(key)
            if cell is None:
                self._cells[key] = [0 + amount]
            elif cell:
                cell[0] += amount
            else:
                cell.append(0 + amount)

    def observe(self, options: Any = None) -> list[Observation]:
        """The SDK callback: one cumulative point per attribute set. A sum never leaves what
        OTLP and Prometheus can carry (int64): one past it would fail every later export of
        the process, so it is held at the limit and counted (the plausibility bound per call
        makes this a guard that never fires in practice)."""
        with self._lock:
            for group in self._groups.values():
                if group:
                    group.fold_locked()
            items = [(key, cell[0]) for key, cell in self._cells.items() if cell]
        points = []
        for key, value in items:
            if value > _INT64_MAX:
                if key not in self._held:
                    self._held.add(key)
                    faults.report("metrics", detail="a cumulative sum reached the int64 limit: held there")
                value = _INT64_MAX
            points.append(Observation(value, dict(key)))
        return points


FOLD_AT = 128  #: amounts a group keeps before adding them up (and at each collection)


class SumGroup(list):  # type: ignore[type-arg]
    """Sums of one counter that a call adds to together (a label set's token classes of one
    usage source, or one sum alone). The group is the list of amounts not added up yet: a
    call extends it with its amounts (a tuple in the cells' order; None adds nothing), one
    list operation (atomic: no lock, no frame), and calls :meth:`fold` once it holds
    :data:`FOLD_AT`; each collection folds first. The sums are those of adding one amount
    at a time (integers in any order: exact)."""

    __slots__ = ("cells", "integers", "sums")

    def __init__(self, sums: CounterSums, cells: tuple[list[float], ...], integers: bool) -> None:
        super().__init__()
        self.sums = sums
        self.cells = cells
        self.integers = integers

    def fold(self) -> None:
        """Add the amounts appended so far to the cells."""
        with self.sums._lock:
            self.fold_locked()

    def fold_locked(self) -> None:
        """:meth:`fold`, the sums' lock held. Amounts other threads add meanwhile stay: only
        what was there is taken out."""
        taken = len(self)
        if not taken:  # another thread folded first
            return
        batch = self[:taken]
        del self[:taken]
        width = len(self.cells)
        total = sum if self.integers else _in_order
        for i, cell in enumerate(self.cells):
            column = batch[i::width]
            if column[0] is None and column.count(None) == len(column):
                continue  # a class no record reported: nothing added, no point made
            try:
                added = total(column, cell[0] if cell else 0)
            except TypeError:  # None: a record that did not report this class
                column = [amount for amount in column if amount is not None]
                added = total(column, cell[0] if cell else 0)
            if cell:
                cell[0] = added
            else:
                cell.append(added)


def _in_order(amounts: list[float], start: float) -> float:
    """``start`` plus each amount in turn (floats: the rounding of one addition at a time)."""
    return reduce(add, amounts, start)


_every_sum: weakref.WeakSet[CounterSums] = weakref.WeakSet()


def reset_counter_sums() -> None:
    """Every counter's sums back to zero (see :meth:`CounterSums.reset`)."""
    for sums in list(_every_sum):
        sums.reset()


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

        def histogram(name: str, unit: str, description: str) -> Histogram:
            return meter.create_histogram(
                name, unit=unit, description=description,
                explicit_bucket_boundaries_advisory=list(HISTOGRAM_BUCKETS[name]),
            )  # fmt: skip

        def counter(name: str, unit: str, description: str) -> CounterSums:
            sums = CounterSums()
            meter.create_observable_counter(
                name, callbacks=[sums.observe], unit=unit, description=description
            )
            return sums

        return cls(
            token_usage=histogram(TOKEN_USAGE, "{token}", "Input and output tokens per call."),
            duration=histogram(OPERATION_DURATION, "s", "Duration of a GenAI client operation."),
            time_to_first_chunk=histogram(
                OPERATION_TTFC, "s", "Time from request to the first chunk of a streamed response."
            ),
            estimate_error=histogram(
                ESTIMATE_ERROR_METRIC, "1", "(estimate - actual) / actual of input tokens."
            ),
            context_utilization=meter.create_observable_gauge(
                CONTEXT_UTILIZATION, callbacks=[utilization], unit="1",
                description="Share of the context window in use, per agent (the displayed value).",
            ),  # fmt: skip
            tokens=counter(TOKENS, "{token}", "Tokens by type (input, output, cache read, "
                           "cache write, reasoning) and usage source."),  # fmt: skip
            cost=counter(COST, "USD", "Cost of calls in USD."),
            premium_requests=counter(PREMIUM, "{request}", "Premium requests (e.g. GitHub Copilot)."),
            anomalies=counter(ANOMALIES, "{event}", "Budget and spike anomalies detected."),
            unpriced=counter(UNPRICED, "{request}", "Calls whose model, or a billed component "
                             "of whose response (otel_tokens.cost.unpriced), has no known price."),
            usage_missing=counter(USAGE_MISSING, "{request}", "Successful calls whose backend "
                                  "reported no usage (recorded as an estimate, when possible)."),
            errors=counter(INSTRUMENTATION_ERRORS, "{error}",
                           "Faults inside otel_tokens (caught; the host call was unaffected)."),  # fmt: skip
        )


def record_signed(histogram: Histogram, value: float, attributes: dict[str, Any]) -> None:
    """Record a possibly negative value (the estimate-error ratio) on a histogram.

    The contract's ``otel_tokens.estimate.error`` buckets start at -1, but the Python SDK drops
    negative histogram values (the API leaves such checks to SDKs). A negative value is
    therefore handed to the SDK histogram's measurement consumer, the step that follows that
    check; under any other SDK it is recorded normally.
    """
    if value >= 0:
        histogram.record(value, attributes)
        return
    consumer = getattr(histogram, "_measurement_consumer", None)
    if consumer is None:
        histogram.record(value, attributes)
        return
    Measurement, get_current = _measurement or _load_measurement()  # noqa: N806 (a class)
    if getattr(histogram, "_is_enabled", lambda: True)():
        consumer.consume_measurement(
            Measurement(
                value=value, time_unix_nano=time_ns(), instrument=histogram,
                context=get_current(), attributes=attributes,
            )  # fmt: skip
        )


_measurement: tuple[Any, Callable[[], Any]] | None = None  # (the SDK's Measurement, get_current)


def _load_measurement() -> tuple[Any, Callable[[], Any]]:
    """The SDK parts a negative value is recorded with, imported at the first one (not per
    value: an import statement costs a few thousand instructions even when loaded)."""
    global _measurement
    from opentelemetry.context import get_current
    from opentelemetry.sdk.metrics._internal.measurement import Measurement

    _measurement = (Measurement, get_current)
    return _measurement
