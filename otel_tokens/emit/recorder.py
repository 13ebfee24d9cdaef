"""The recorder: the one owner of the span and every instrument of the telemetry contract.

:meth:`Recorder.start` opens a call's span from the record's request facts;
:meth:`Recorder.stop` sets the span's attributes, anomaly events and status from the account
step's :class:`~otel_tokens.account.outcome.Outcome`, records every metric point and ends
the span. It computes nothing: what to record is the outcome's. Metric attribute values that
come from outside are bounded by the cardinality guard; spans keep the real values. Nothing
here raises into the host: each step's fault goes to the fault sink.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any, Iterator

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from .. import faults
from ..account.agents import agents
from ..version import __version__
from . import instruments as names
from .cardinality import DEFAULT_MAX_LABEL_SETS, CardinalityGuard
from .instruments import SCOPE, Instruments, record_signed

if TYPE_CHECKING:
    from opentelemetry.metrics import Histogram

    from ..account.anomalies import Anomaly
    from ..account.outcome import Line, Outcome
    from ..call import Call
    from .sums import Sum
    from ..tracking import Tracking

__all__ = ["Recorder"]

_SCHEMA_URL = "https://opentelemetry.io/schemas/1.37.0"
_ATTRIBUTE_SETS_MAX = 4096  # distinct metric attribute sets kept; past this the cache starts over
#: request shapes whose labels are kept (a gateway's or a many-agent host's shapes come and
#: go: past this the table starts over, so what it holds stays under ~0.5 MB)
_LABELS_MAX = 512
#: the attribute naming a tenant's or a user's budget on an anomaly's count
_WHO_ATTRIBUTE = {"tenant": names.TENANT_ID, "user": names.USER_ID}


class _Emission:
    """What the recorder keeps of one call between start and stop; also the context manager
    ``call.activate()`` returns, making the span current while the backend runs (re-entrant:
    activated again inside itself, it restores the outer activation on exit)."""

    __slots__ = ("span", "shape", "borrowed", "context", "_token", "_outer")

    def __init__(self, span: Any, shape: _Shape) -> None:
        self.span = span
        self.shape = shape  # the call's common metric labels (shared by a request shape)
        self.borrowed = False  # the span is another instrumentation's: it names and ends it
        self.context: Any = None  # a context with the span current (made once, when activated)
        self._token: Any = None
        self._outer: list[Any] | None = None  # tokens of enclosing activations (rare)

    def __enter__(self) -> None:
        span = self.span
        if span is None:
            return
        token = None
        try:
            context = trace.set_span_in_context(span)
            if self.context is None:
                self.context = context  # the exemplars' context, at the end
            token = otel_context.attach(context)
        except Exception as exc:
            faults.report("span", exc)
        if self._token is not None:  # activated again inside itself
            if self._outer is None:
                self._outer = []
            self._outer.append(self._token)
        self._token = token

    def __exit__(self, *exc: object) -> None:
        token = self._token
        self._token = self._outer.pop() if self._outer else None
        if token is not None:
            try:
                otel_context.detach(token)
            except Exception as exc:
                faults.report("span", exc)


class Recorder:
    """Tracer, instruments and metric attribute sets of otel_tokens' own scope."""

    def __init__(
        self,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        *,
        max_attribute_values: int = 200,
        exemplars: bool = True,
        reuse_genai_span: bool = False,
        metric_attributes: frozenset[str] = frozenset(),
        max_label_sets: int = DEFAULT_MAX_LABEL_SETS,
    ) -> None:
        self.tracer = trace.get_tracer(SCOPE, __version__, tracer_provider, _SCHEMA_URL)
        self.instruments = _instruments_of(meter_provider, self)
        self.cardinality = CardinalityGuard(
            max_attribute_values,
            lambda key: faults.report("cardinality", detail=f"{key}: too many values"),
            max_label_sets,
        )
        self._attribute_sets: dict[tuple[Any, ...], _AttributeSet] = {}
        #: request shapes (a call's common labels, shared: read only), by request facts
        self._labels: dict[tuple[Any, ...], _Shape] = {}
        # histogram points carry the call's trace id (a link to it); an API before the context
        # argument records without
        self.exemplars = exemplars and _takes_context(self.instruments.duration)
        self.reuse_genai_span = reuse_genai_span
        #: who the calls are for, also on metric points (opt-in; bounded like every label)
        self.who_labels = tuple(
            (key, attr)
            for key, attr in (
                ("user", names.USER_ID),
                ("tenant", names.TENANT_ID),
                ("conversation", names.CONVERSATION_ID),
            )
            if key in metric_attributes
        )
        faults.sink().bind(self.instruments.errors)

    # -- the start ------------------------------------------------------------------------------
    def start(self, call: Call, tracking: Tracking) -> None:
        """Open the call's span (started, not yet current) from the record's request facts
        and who the call is for; the span and its ids go on the call's tracking."""
        agent = tracking.agent
        facts = (
            call.operation,
            call.provider,
            agent.name if agent is not None else "default",
            call.request_model,
            call.server_address,
            call.stream,
            call.server_port,
        )
        shape = self._labels.get(facts)  # (none kept when labels carry who a call is for)
        if shape is None:
            shape = self._shape_of(tracking, facts)
        emission = tracking.emission = _Emission(None, shape)
        try:
            attrs = dict(shape.span_attributes)  # spans keep the real values
            if tracking.conversation_id:
                attrs[names.CONVERSATION_ID] = tracking.conversation_id
            if tracking.user:
                attrs[names.USER_ID] = tracking.user
            if tracking.tenant:
                attrs[names.TENANT_ID] = tracking.tenant
            estimate = tracking.estimate
            if estimate is not None:
                attrs[names.ESTIMATE_INPUT] = estimate.input_tokens
                attrs[names.ESTIMATE_SOURCE] = estimate.source
                request_estimate = tracking.request_estimate
                if request_estimate is not None:
                    if request_estimate.calibration is not None:
                        attrs[names.ESTIMATE_CALIBRATION] = request_estimate.calibration
                    if not request_estimate.complete:  # per-item figures or unknown server turns
                        attrs[names.ESTIMATE_COMPLETE] = False
                    if request_estimate.input_max is not None:  # an incomplete one's bound
                        attrs[names.ESTIMATE_INPUT_MAX] = request_estimate.input_max
            if call.attributes:
                attrs.update(call.attributes)
            span = self._borrowed(emission) if self.reuse_genai_span else None
            if span is not None:
                span.set_attributes(attrs)
            else:
                span = emission.span = self.tracer.start_span(
                    call.span_name or shape.name, kind=_CLIENT, attributes=attrs
                )
            ids = span.get_span_context()
            if ids.is_valid:
                tracking.trace_id, tracking.span_id = ids.trace_id, ids.span_id
        except Exception as exc:
            faults.report("span", exc)

    def _shape_of(self, tracking: Tracking, facts: tuple[Any, ...]) -> _Shape:
        """A call's request shape (its common metric labels, its span's attributes known at
        the start and its default span name), kept by request facts (bounded) unless its
        labels carry who the call is for (opt-in)."""
        operation, provider, agent, model, address, stream, port = facts
        labels: dict[str, Any] = {
            names.OPERATION: operation,
            names.PROVIDER: provider,
            names.AGENT_NAME: agent,
        }
        if model:
            labels[names.REQUEST_MODEL] = model
        if address:
            labels[names.SERVER_ADDRESS] = address
        for who, attr in self.who_labels:
            value = (
                tracking.user
                if who == "user"
                else tracking.tenant
                if who == "tenant"
                else tracking.conversation_id
            )
            if value:
                labels[attr] = value
        span_attributes = {**labels, names.REQUEST_STREAM: bool(stream)}
        if port:
            span_attributes[names.SERVER_PORT] = port
        found = _Shape(labels, span_attributes, f"{operation} {model}" if model else operation)
        if not self.who_labels:
            if len(self._labels) >= _LABELS_MAX:
                self._labels.clear()
            self._labels[facts] = found
        return found

    @staticmethod
    def _borrowed(emission: _Emission) -> Any:
        """The GenAI span another instrumentation opened for this call (the current span,
        recording, with a model call's ``gen_ai.operation.name``, of another scope), or None:
        an agent's or a tool's span around the call is never taken for the call's own."""
        span = trace.get_current_span()
        if not span.is_recording():
            return None
        scope = getattr(getattr(span, "instrumentation_scope", None), "name", None)
        attributes = getattr(span, "attributes", None) or {}
        operation = attributes.get(names.OPERATION)
        if scope == SCOPE or operation is None or operation in _NOT_MODEL_CALLS:
            return None
        emission.span, emission.borrowed = span, True
        return span

    @staticmethod
    def activate(tracking: Tracking) -> Any:
        """A context manager making the call's span current while the backend runs (HTTP
        client spans nest under it): the call's emission, once started."""
        emission = tracking.emission
        return emission if emission is not None else _INACTIVE

    @staticmethod
    def span_of(tracking: Tracking) -> Any:
        emission = tracking.emission
        span = emission.span if emission is not None else None
        return span if span is not None else trace.INVALID_SPAN

    # -- the end --------------------------------------------------------------------------------
    def stop(self, tracking: Tracking, outcome: Outcome | None) -> None:
        """Span attributes, events and status, every metric point, then the span's end."""
        emission = tracking.emission
        span = emission.span if emission is not None else None
        try:
            if outcome is not None and emission is not None:
                # the attribute set, from the shape's own when it is there
                main = emission.shape.sets.get(outcome.response_model) or self._attribute_set(
                    emission.shape, outcome.response_model
                )
                if span is not None:
                    self._span(span, outcome)
                for anomaly in outcome.anomalies:
                    self.anomaly(span, anomaly, main.attrs)
                # histogram points in the call's span's context: the SDK's exemplar filter
                # attaches its trace id (None: exemplars off, the current context)
                context = None
                if self.exemplars and span is not None:
                    context = emission.context
                    if context is None:  # never activated
                        context = trace.set_span_in_context(span)
                self._metrics(emission, main, outcome, context)
        except Exception as exc:
            faults.report("internal", exc)
        finally:
            if span is not None and not emission.borrowed:  # type: ignore[union-attr]
                try:
                    span.end()
                except Exception as exc:
                    faults.report("span", exc)

    def _span(self, span: Any, outcome: Outcome) -> None:
        """The span's end attributes and status (only what is known: an unreported class is
        absent, not 0)."""
        try:
            if not span.is_recording():
                return
            values = _usage_attributes(outcome.usage)
            _put(values, names.RESPONSE_MODEL, outcome.response_model)
            _put(values, names.RESPONSE_ID, outcome.response_id)
            if outcome.finish_reasons:  # an empty tuple is none
                values[names.FINISH_REASONS] = outcome.finish_reasons
            values.update(_price_attributes(outcome.price))
            _put(values, names.PREMIUM_REQUESTS, outcome.usage.premium_requests)
            _put(values, names.ESTIMATE_ERROR, outcome.estimate_error)
            _put(values, names.TIME_TO_FIRST_CHUNK, outcome.time_to_first_chunk)
            if outcome.state is not None:
                values.update(_state_attributes(outcome.state))
            if outcome.attributes:
                values.update(outcome.attributes)
            if outcome.failed:
                values[names.ERROR_TYPE] = outcome.error_type
                span.set_status(Status(StatusCode.ERROR, outcome.error_message))
            span.set_attributes(values)
        except Exception as exc:
            faults.report("span", exc)

    def _metrics(
        self, emission: _Emission, main: _AttributeSet, outcome: Outcome, context: Any = None
    ) -> None:
        """Every metric point of the call: duration, time to first chunk, each line's
        points, the missing-usage count and the estimate's error."""
        inst = self.instruments
        try:
            attrs = main.attrs
            if outcome.failed:
                attrs = self.cardinality.label_set({**attrs, names.ERROR_TYPE: outcome.error_type})
            inst.duration.record(outcome.duration, attrs, context)
            if outcome.time_to_first_chunk is not None and outcome.stream:
                inst.time_to_first_chunk.record(outcome.time_to_first_chunk, attrs, context)
            for line in outcome.lines:
                self._line(emission.shape, main, outcome.response_model, line, context)
            if outcome.usage_missing:
                inst.usage_missing.add(1, main.key)
            estimate = outcome.estimate
            if outcome.estimate_error is not None and estimate is not None:
                record_signed(
                    inst.estimate_error, outcome.estimate_error, main.estimate(estimate.source)
                )
        except Exception as exc:
            faults.report("metrics", exc)

    def _line(
        self,
        shape: _Shape,
        main: _AttributeSet,
        response_model: str | None,
        line: Line,
        context: Any = None,
    ) -> None:
        """One line's metric points, under ``main`` when its model is the call's."""
        inst = self.instruments
        points = main if line.model == response_model else self._attribute_set(shape, line.model)
        if line.usage is not None:
            self._tokens(points, line.usage, context)
        if line.cost_usd is not None:
            points.cost(line.cost_source or "computed").add(line.cost_usd)
        elif line.unpriced:
            self._unpriced(points, line)
        for component in line.unpriced_components:
            attrs = self.cardinality.label_set({**points.attrs, names.COST_UNPRICED: component})
            inst.unpriced.add(1, tuple(attrs.items()))
        if line.premium_requests is not None:
            points.premium().add(line.premium_requests)

    def _unpriced(self, points: _AttributeSet, line: Line) -> None:
        """An unpriced line's count; a self-hosted server's (unpriced by design) carries
        ``otel_tokens.cost.price_match=self_hosted``, which the alert and the stat leave out."""
        if line.price_match is None:
            self.instruments.unpriced.add(1, points.key)
            return
        attrs = self.cardinality.label_set({**points.attrs, names.COST_MATCH: line.price_match})
        self.instruments.unpriced.add(1, tuple(attrs.items()))

    def _tokens(self, points: _AttributeSet, usage: Any, context: Any = None) -> None:
        """A line's token points: input and output on the token histogram, every reported
        class (0 included; an unreported one adds nothing) on ``otel_tokens.tokens``."""
        inst = self.instruments
        if usage.input_tokens is not None:
            inst.token_usage.record(usage.input_tokens, points.input_attrs, context)
        if usage.output_tokens is not None:
            inst.token_usage.record(usage.output_tokens, points.output_attrs, context)
        for (field, _, _), total in zip(names.TOKEN_ATTRIBUTES, points.tokens(usage.source)):
            amount = getattr(usage, field)
            if amount is not None:
                total.add(amount)

    # -- anomalies ----------------------------------------------------------------------------
    def anomaly(self, span: Any, anomaly: Anomaly, attrs: dict[str, Any]) -> None:
        """An anomaly: a span event (when there is a span) and a count; a tenant's or a
        user's budget is named on both (``tenant:acme``; on the count
        ``otel_tokens.anomaly.scope`` and ``tenant.id``/``user.id``, bounded like every
        outside value)."""
        try:
            scope = getattr(anomaly, "scope", None)
            if span is not None:
                event = {
                    names.ANOMALY_KIND: anomaly.kind,
                    names.ANOMALY_OBSERVED: anomaly.observed,
                    names.ANOMALY_THRESHOLD: anomaly.threshold,
                }
                if scope is not None:
                    event[names.ANOMALY_BUDGET] = anomaly.agent
                span.add_event(names.ANOMALY_EVENT, event)
            if scope in _WHO_ATTRIBUTE:
                named = {
                    **attrs,
                    names.ANOMALY_SCOPE: scope,
                    _WHO_ATTRIBUTE[scope]: anomaly.agent.partition(":")[2],
                }
                attrs = self.cardinality.label_set(named)
            key = (*attrs.items(), (names.ANOMALY_KIND, anomaly.kind))
            self.instruments.anomalies.add(1, key)
        except Exception as exc:
            faults.report("metrics", exc)

    def refused(self, agent: str, anomaly: Anomaly) -> None:
        """A call refused before it started (an enforced budget): counted, no span."""
        self.anomaly(None, anomaly, self.cardinality.label_set({names.AGENT_NAME: agent}))

    # -- attribute sets -------------------------------------------------------------------------
    def _attribute_set(self, shape: _Shape, response_model: str | None) -> _AttributeSet:
        """The bounded metric label set of a request shape's labels and a response model.

        Cached (by the labels' items and the model, and on the shape by the model) only when
        the cardinality guard admitted it as is: its decisions for admitted sets never change,
        while a set it folds must be counted again on every call. A shape only holds sets of
        the cache since it last started over (it starts the shapes' table over with it).
        """
        cache_key = (shape.key, response_model)
        found = self._attribute_sets.get(cache_key)
        if found is None:
            labels = shape.labels
            full = {**labels, names.RESPONSE_MODEL: response_model} if response_model else labels
            bounded = self.cardinality.label_set(full)
            found = _AttributeSet(bounded, self.instruments)
            if bounded is not full:
                return found
            if len(self._attribute_sets) >= _ATTRIBUTE_SETS_MAX:
                self._attribute_sets.clear()
                self._labels.clear()
            self._attribute_sets[cache_key] = found
        shape.sets[response_model] = found
        return found

    def _utilization(self, options: Any) -> Iterator[metrics.Observation]:
        """``otel_tokens.context.utilization``: each agent's displayed share of its context."""
        try:
            points = []
            for entry in agents():
                ratio = entry.state.display().ratio
                if ratio is not None:
                    agent = self.cardinality.value(names.AGENT_NAME, entry.name)
                    points.append(metrics.Observation(ratio, {names.AGENT_NAME: agent}))
            return iter(points)
        except Exception as exc:
            faults.report("metrics", exc)
            return iter(())


class _Shared:
    """One meter provider's instruments, shared by every recorder on it.

    The SDK registers an instrument name once per meter: registering it again returns the
    first instrument and drops the new callbacks. A recorder with instruments of its own on a
    provider already used (``instrument()`` again with the same providers) would record spans
    and lose every counter; sharing records each point once, whichever handler made it."""

    __slots__ = ("instruments", "recorder", "__weakref__")

    def __init__(self, meter: Any, recorder: Recorder) -> None:
        self.recorder = recorder  # the newest on this provider: its guard bounds the gauge
        self.instruments = Instruments.create(meter, self._utilization)

    def _utilization(self, options: Any) -> Iterator[metrics.Observation]:
        return self.recorder._utilization(options)


_shared: weakref.WeakKeyDictionary[Any, _Shared] = weakref.WeakKeyDictionary()
_shared_lock = threading.Lock()


def _instruments_of(meter_provider: Any, recorder: Recorder) -> Instruments:
    """The instruments of ``meter_provider`` (None: the global one), created on its meter the
    first time; a global proxy counts as the provider it was later set to."""
    provider = meter_provider if meter_provider is not None else metrics.get_meter_provider()
    provider = getattr(provider, "_real_meter_provider", None) or provider
    with _shared_lock:
        try:
            shared = _shared.get(provider) or next(
                (
                    entry
                    for proxy, entry in _shared.items()
                    if getattr(proxy, "_real_meter_provider", None) is provider
                ),
                None,
            )
        except TypeError:  # a provider that cannot be a weak key: instruments of its own
            shared = _Shared(metrics.get_meter(SCOPE, __version__, provider, _SCHEMA_URL), recorder)
            return shared.instruments
        if shared is None:
            meter = metrics.get_meter(SCOPE, __version__, provider, _SCHEMA_URL)
            shared = _Shared(meter, recorder)
        shared.recorder = recorder
        _shared[provider] = shared
        return shared.instruments


#: GenAI operations that are not a model call (an agent's run, a tool's execution)
_NOT_MODEL_CALLS = frozenset({"invoke_agent", "create_agent", "execute_tool", "invoke_workflow"})
_CLIENT = SpanKind.CLIENT


def _takes_context(histogram: Histogram) -> bool:
    import inspect

    try:
        return "context" in inspect.signature(histogram.record).parameters
    except (TypeError, ValueError):
        return False


class _Shape:
    """A request shape: a call's common metric labels (real values, bounded when recorded;
    shared by its calls: read only), their items (the attribute sets' key), its span's
    attributes known at the start, its default span name and its admitted attribute sets by
    response model (found without hashing labels)."""

    __slots__ = ("labels", "key", "span_attributes", "name", "sets")

    def __init__(self, labels: dict[str, Any], span_attributes: dict[str, Any], name: str) -> None:
        self.labels = labels
        self.span_attributes = span_attributes  # the labels, the stream flag and server port
        self.key: tuple[tuple[str, Any], ...] = tuple(labels.items())
        self.name = name
        self.sets: dict[str | None, _AttributeSet] = {}


class _AttributeSet:
    """One bounded metric attribute set and the attributes of its points.

    A call's metric points all share its common attributes; these objects are built once per
    distinct set (see :meth:`Recorder._attribute_set`) and reused, so a call does not rebuild
    and re-guard the same dictionaries for every point, nor look up its counters' sums.
    """

    __slots__ = (
        "attrs",
        "cost_sums",
        "estimate_attrs",
        "input_attrs",
        "instruments",
        "key",
        "output_attrs",
        "premium_sum",
        "token_sums",
    )

    def __init__(self, attrs: dict[str, Any], instruments: Instruments) -> None:
        self.attrs = attrs = dict(attrs)  # its own: the caller's dict may be a call's
        self.key: tuple[tuple[str, Any], ...] = tuple(attrs.items())  # the counters' sums' key
        self.instruments = instruments
        #: token histogram attributes, by token type
        self.input_attrs = {**attrs, names.TOKEN_TYPE: "input"}
        self.output_attrs = {**attrs, names.TOKEN_TYPE: "output"}
        self.token_sums: dict[str, tuple[Sum, ...]] = {}
        self.cost_sums: dict[str, Sum] = {}
        self.premium_sum: Sum | None = None
        self.estimate_attrs: dict[str, dict[str, Any]] = {}

    def tokens(self, source: str) -> tuple[Sum, ...]:
        """``otel_tokens.tokens`` sums of a usage source, per token class (in
        ``TOKEN_ATTRIBUTES``' order)."""
        found = self.token_sums.get(source)
        if found is None:
            counter = self.instruments.tokens
            found = self.token_sums[source] = tuple(
                counter.sum(
                    (*self.key, (names.TOKEN_TYPE, token_type), (names.USAGE_SOURCE, source))
                )
                for _field, _span_attr, token_type in names.TOKEN_ATTRIBUTES
            )
        return found

    def cost(self, source: str) -> Sum:
        """``otel_tokens.cost`` sum of a cost source."""
        found = self.cost_sums.get(source)
        if found is None:
            key = (*self.key, (names.COST_SOURCE, source))
            found = self.cost_sums[source] = self.instruments.cost.sum(key)
        return found

    def premium(self) -> Sum:
        """``otel_tokens.premium_requests`` sum."""
        found = self.premium_sum
        if found is None:
            found = self.premium_sum = self.instruments.premium_requests.sum(self.key)
        return found

    def estimate(self, source: str) -> dict[str, Any]:
        """``otel_tokens.estimate.error`` attributes for one estimate source."""
        found = self.estimate_attrs.get(source)
        if found is None:
            found = self.estimate_attrs[source] = {**self.attrs, names.ESTIMATE_SOURCE: source}
        return found


def _put(values: dict[str, Any], name: str, value: Any) -> None:
    """``values[name] = value`` unless the value is unknown (None)."""
    if value is not None:
        values[name] = value


def _usage_attributes(usage: Any) -> dict[str, Any]:
    """A usage's span attributes: each reported token class, and its source when it reports
    any figure (no figure, no source)."""
    values: dict[str, Any] = {}
    for field, attribute, _token_type in names.TOKEN_ATTRIBUTES:
        _put(values, attribute, getattr(usage, field))
    if values or usage.premium_requests is not None or usage.cost_usd is not None:
        values[names.USAGE_SOURCE] = usage.source
    return values


def _price_attributes(price: Any) -> dict[str, Any]:
    """A price's span attributes (``otel_tokens.cost.unpriced``: the billed components no
    price covers)."""
    values: dict[str, Any] = {}
    _put(values, names.COST_USD, price.cost_usd)
    _put(values, names.COST_SOURCE, price.source)
    if price.components:
        values[names.COST_COMPONENTS] = price.components
    if price.unpriced_components:
        values[names.COST_UNPRICED] = price.unpriced_components
    _put(values, names.COST_MATCH, price.match)
    return values


def _state_attributes(state: Any) -> dict[str, Any]:
    """The agent's state figures after the call, as span attributes."""
    values = {
        names.STATE_TURN_COUNT: state.turn_count,
        names.STATE_TOTAL_OUTPUT: state.total_output_tokens,
    }
    _put(values, names.STATE_MAX_OBSERVED_INPUT, state.max_observed_input_tokens)
    _put(values, names.STATE_CONTEXT_UTILIZATION, state.context_utilization)
    return values


class _Inactive:
    """The context manager of a call without an emission (its start failed): nothing to do."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_INACTIVE = _Inactive()
