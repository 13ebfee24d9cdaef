"""The one completion pipeline: a backend call's span, accounting and metrics.

Every instrumentor (SDKs, agent CLIs, user backends) opens a :class:`CallContext` when a call
starts and ends it exactly once with :meth:`CallContext.complete` or :meth:`CallContext.fail`.
The pipeline then updates the bound agent's TokenState and ledger, prices the call, checks for
anomalies, sets every span attribute and records every metric of the telemetry contract.

Nothing here raises into the host program: each step is guarded, and a fault is logged once
per kind and counted on ``otel_tokens.instrumentation.errors``. The single deliberate
exception is :class:`BudgetExceeded`, raised by :meth:`Pipeline.start_call` only when the user
opted in to budget enforcement.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable, Iterator, Sequence

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from ..agents import AgentEntry, agents, current_agent
from ..errors import LedgerPersistenceError
from ..estimate import Estimator, Request, RequestEstimate  # the renderer loads on first use
from ..pricing import PriceResult, Pricer
from ..state import Estimate, StreamHandle
from ..usage import Usage
from . import instruments as names
from .anomalies import Anomaly, AnomalyGuard, BudgetExceeded
from .cardinality import CardinalityGuard, limit_from_env
from .faults import Faults
from .instruments import Instruments, record_signed

__all__ = [
    "CallContext", "Pipeline", "get_guard", "get_pipeline", "on_anomaly", "set_budget",
    "set_pipeline",
]  # fmt: skip

_SCHEMA_URL = "https://opentelemetry.io/schemas/1.37.0"
_CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_NO_PRICE = PriceResult(None, None)


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


class Pipeline:
    """Tracer, instruments, pricing and anomaly guard shared by every instrumentor."""

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        *,
        pricer: Pricer | None = None,
        guard: AnomalyGuard | None = None,
    ) -> None:
        from .. import __version__

        self.tracer = trace.get_tracer("otel_tokens", __version__, tracer_provider, _SCHEMA_URL)
        meter = metrics.get_meter("otel_tokens", __version__, meter_provider, _SCHEMA_URL)
        self.faults = Faults()
        self.instruments = Instruments.create(meter, self._observe_utilization)
        self.faults.bind(self.instruments.errors)
        self.pricer = pricer if pricer is not None else Pricer.from_env()
        self.guard = guard if guard is not None else get_guard()
        self.capture_content = _truthy(_CAPTURE_ENV)
        self.estimator = Estimator()
        self.cardinality = CardinalityGuard(
            limit_from_env(), lambda key: self.faults.report("cardinality", detail=f"{key}: too many values")
        )
        self._attribute_sets: dict[tuple[Any, ...], _AttributeSet] = {}

    # -- calls ----------------------------------------------------------------------------
    def start_call(
        self,
        *,
        operation: str,
        provider: str,
        request_model: str | None,
        stream: bool = False,
        server_address: str | None = None,
        server_port: int | None = None,
        estimate: Estimate | None = None,
        request: Request | None = None,
        conversation_id: str | None = None,
        span_name: str | None = None,
        attributes: dict[str, Any] | None = None,
        agent: AgentEntry | None = None,
    ) -> CallContext:
        """Open a call: its span (started, not yet current) and the agent's streaming state.

        ``request`` (what the request contains) is estimated here, before the call, unless an
        ``estimate`` is given. Raises only :class:`BudgetExceeded`, and only when budget
        enforcement is on.
        """
        try:
            entry = agent if agent is not None else current_agent()
        except Exception as exc:
            self.faults.report("internal", exc)
            entry = None
        estimated: RequestEstimate | None = None
        if estimate is None and request is not None:
            try:
                estimated = self.estimator.estimate(
                    request, provider=provider, agent=entry.name if entry is not None else "default"
                )
                estimate = estimated.estimate
            except Exception as exc:
                self.faults.report("estimate", exc)
        if entry is not None:
            try:
                self.guard.check_before(
                    entry.name, estimate.input_tokens if estimate is not None else None
                )
            except BudgetExceeded as exc:
                self._announce(None, exc.anomaly, self.cardinality.attributes({names.AGENT_NAME: entry.name}))
                raise
            except Exception as exc:
                self.faults.report("internal", exc)
        if estimated is not None and estimated.calibration is not None:
            attributes = {**(attributes or {}), names.ESTIMATE_CALIBRATION: estimated.calibration}
        return CallContext(
            self, entry, operation, provider, request_model, stream, server_address,
            server_port, estimate, conversation_id, span_name, attributes, estimated,
        )  # fmt: skip

    def _attribute_set(self, attrs: dict[str, Any], response_model: str | None) -> _AttributeSet:
        """The bounded metric attribute set of a call's common attributes and response model.

        Cached only when the cardinality guard passed every value as is: its decisions for
        admitted values never change, while a value it turns into ``_OTHER`` must be counted
        again on every call.
        """
        cache_key = (*attrs.items(), response_model)
        found = self._attribute_sets.get(cache_key)
        if found is not None:
            return found
        full = {**attrs, names.RESPONSE_MODEL: response_model} if response_model else attrs
        bounded = self.cardinality.attributes(full)
        found = _AttributeSet(bounded)
        if bounded is full:
            if len(self._attribute_sets) >= _ATTRIBUTE_SETS_MAX:
                self._attribute_sets.clear()
            self._attribute_sets[cache_key] = found
        return found

    def _observe_utilization(self, options: Any) -> Iterator[metrics.Observation]:
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
            self.faults.report("metrics", exc)
            return iter(())

    def _announce(self, span: Any, anomaly: Anomaly, attrs: dict[str, Any]) -> None:
        """An anomaly: span event, counter, callbacks (each guarded)."""
        try:
            if span is not None:
                span.add_event(names.ANOMALY_EVENT, {
                    names.ANOMALY_KIND: anomaly.kind,
                    names.ANOMALY_OBSERVED: anomaly.observed,
                    names.ANOMALY_THRESHOLD: anomaly.threshold,
                })  # fmt: skip
            key = (*attrs.items(), (names.ANOMALY_KIND, anomaly.kind))
            self.instruments.anomalies.add(1, key)
        except Exception as exc:
            self.faults.report("metrics", exc)
        for callback in self.guard.callbacks:
            try:
                callback(anomaly)
            except Exception as exc:
                self.faults.report("callback", exc)


class _AttributeSet:
    """One bounded metric attribute set and the derived sets its instruments record with.

    A call's metric points all share its common attributes; these objects are built once per
    distinct set (see :meth:`Pipeline._attribute_set`) and reused, so a call does not rebuild,
    re-guard and re-hash the same dictionaries and tuples for every point.
    """

    __slots__ = ("attrs", "key", "by_type", "counter_keys", "cost_keys", "estimate_attrs")

    def __init__(self, attrs: dict[str, Any]) -> None:
        self.attrs = attrs = dict(attrs)  # its own: the caller's dict may be a call's
        self.key: tuple[tuple[str, Any], ...] = tuple(attrs.items())
        #: token histogram attributes, by token type
        self.by_type = {kind: {**attrs, names.TOKEN_TYPE: kind} for kind in ("input", "output")}
        self.counter_keys: dict[tuple[str, str], tuple[tuple[str, Any], ...]] = {}
        self.cost_keys: dict[str, tuple[tuple[str, Any], ...]] = {}
        self.estimate_attrs: dict[str, dict[str, Any]] = {}

    def token_key(self, token_type: str, source: str) -> tuple[tuple[str, Any], ...]:
        """``otel_tokens.tokens`` attribute key for one token type and usage source."""
        key = self.counter_keys.get((token_type, source))
        if key is None:
            key = self.counter_keys[(token_type, source)] = (
                *self.key, (names.TOKEN_TYPE, token_type), (names.USAGE_SOURCE, source)
            )
        return key

    def cost_key(self, source: str) -> tuple[tuple[str, Any], ...]:
        """``otel_tokens.cost`` attribute key for one cost source."""
        key = self.cost_keys.get(source)
        if key is None:
            key = self.cost_keys[source] = (*self.key, (names.COST_SOURCE, source))
        return key

    def estimate(self, source: str) -> dict[str, Any]:
        """``otel_tokens.estimate.error`` attributes for one estimate source."""
        attrs = self.estimate_attrs.get(source)
        if attrs is None:
            attrs = self.estimate_attrs[source] = {**self.attrs, names.ESTIMATE_SOURCE: source}
        return attrs


_END_LOCK = threading.Lock()  # makes ending a call a single check-and-set
_ATTRIBUTE_SETS_MAX = 4096  # distinct sets kept; past this the cache starts over


class CallContext:
    """One backend call from start to its single end (complete or fail)."""

    __slots__ = (
        "_pipeline", "_agent", "_span", "_start", "_first_chunk", "_estimate", "_handle",
        "_attrs", "_stream", "_stream_key", "_ended", "_request_estimate", "operation",
        "provider", "request_model",
    )  # fmt: skip

    def __init__(
        self,
        pipeline: Pipeline,
        agent: AgentEntry | None,
        operation: str,
        provider: str,
        request_model: str | None,
        stream: bool,
        server_address: str | None,
        server_port: int | None,
        estimate: Estimate | None,
        conversation_id: str | None,
        span_name: str | None,
        attributes: dict[str, Any] | None,
        request_estimate: RequestEstimate | None = None,
    ) -> None:
        self._pipeline = pipeline
        self._agent = agent
        self._request_estimate = request_estimate
        self._start = time.perf_counter()
        self._first_chunk: float | None = None
        self._estimate = estimate
        self._handle: StreamHandle | None = None
        self._stream = stream
        self._stream_key: object | None = None
        self._ended = False
        self.operation = operation
        self.provider = provider
        self.request_model = request_model
        agent_name = agent.name if agent is not None else "default"
        attrs: dict[str, Any] = {
            names.OPERATION: operation,
            names.PROVIDER: provider,
            names.AGENT_NAME: agent_name,
        }
        if request_model:
            attrs[names.REQUEST_MODEL] = request_model
        if server_address:
            attrs[names.SERVER_ADDRESS] = server_address
        self._attrs = attrs  # the common metric attributes (bounded when recorded)
        self._span: Any = None
        try:
            span_attrs = dict(attrs)  # spans keep the real values
            span_attrs[names.REQUEST_STREAM] = bool(stream)
            if server_port:
                span_attrs[names.SERVER_PORT] = server_port
            if conversation_id:
                span_attrs[names.CONVERSATION_ID] = conversation_id
            if estimate is not None:
                span_attrs[names.ESTIMATE_INPUT] = estimate.input_tokens
                span_attrs[names.ESTIMATE_SOURCE] = estimate.source
            if attributes:
                span_attrs.update(attributes)
            name = span_name or (f"{operation} {request_model}" if request_model else operation)
            self._span = pipeline.tracer.start_span(
                name, kind=SpanKind.CLIENT, attributes=span_attrs
            )
        except Exception as exc:
            pipeline.faults.report("span", exc)
        if stream and agent is not None:
            try:
                self._handle = agent.state.start_streaming(estimate)
            except Exception as exc:
                pipeline.faults.report("state", exc)

    # -- during the call ------------------------------------------------------------------
    @property
    def span(self) -> Any:
        """The call's span (a non-recording one if the span could not be started)."""
        return self._span if self._span is not None else trace.INVALID_SPAN

    @property
    def ended(self) -> bool:
        """True once complete() or fail() ran."""
        return self._ended

    @property
    def estimate(self) -> Estimate | None:
        """The pre-call (or latest) input estimate."""
        return self._estimate

    def activate(self) -> _Active:
        """Make the call's span current while the backend runs (HTTP client spans nest under it)."""
        return _Active(self)

    def first_chunk(self) -> None:
        """Note the first streamed chunk (time to first chunk); later calls are ignored."""
        if self._first_chunk is None:
            self._first_chunk = time.perf_counter()

    def update_estimate(self, estimate: Estimate) -> None:
        """Replace the input estimate (e.g. once more of a streamed request is known)."""
        try:
            self._estimate = estimate
            if self._handle is not None and self._agent is not None and not self._ended:
                self._agent.state.set_estimate(self._handle, estimate)
        except Exception as exc:
            self._pipeline.faults.report("state", exc)

    def stream_usage(self, usage: Usage) -> None:
        """A running usage total seen mid-stream (replaces the previous one in the ledger)."""
        try:
            if self._agent is not None and not self._ended:
                if self._stream_key is None:
                    self._stream_key = object()
                self._agent.ledger.stream_update(self._stream_key, usage)
        except Exception as exc:
            self._pipeline.faults.report("ledger", exc)

    # -- the end --------------------------------------------------------------------------
    def complete(
        self,
        usage: Usage | None,
        *,
        response_model: str | None = None,
        response_id: str | None = None,
        finish_reasons: Sequence[str] | None = None,
        attributes: dict[str, Any] | None = None,
        parts: Sequence[Usage] | None = None,
    ) -> None:
        """End the call successfully with its usage (None: the backend reported none).

        ``parts`` splits a call that used several models (an agent-CLI run) into per-model
        usages: each is priced with its own model and gets its own ledger record and metric
        points, while the call counts one turn and one span with the total (``usage``, or
        the sum of the parts when ``usage`` is None).
        """
        self._end(usage, None, response_model, response_id, finish_reasons, attributes, parts)

    def fail(
        self,
        error: BaseException | str,
        usage: Usage | None = None,
        *,
        response_model: str | None = None,
        response_id: str | None = None,
        attributes: dict[str, Any] | None = None,
        parts: Sequence[Usage] | None = None,
    ) -> None:
        """End the call as failed: ``error.type``, ERROR status, no turn counted. Usage that
        arrived before the failure (billed tokens) is still recorded."""
        self._end(usage, error, response_model, response_id, None, attributes, parts)

    def _end(
        self,
        usage: Usage | None,
        error: BaseException | str | None,
        response_model: str | None,
        response_id: str | None,
        finish_reasons: Sequence[str] | None,
        attributes: dict[str, Any] | None,
        parts: Sequence[Usage] | None = None,
    ) -> None:
        with _END_LOCK:  # one lock for all calls: held for a flag flip, never contended long
            if self._ended:
                return
            self._ended = True
        duration = time.perf_counter() - self._start
        try:
            self._account(usage, error, response_model, response_id, finish_reasons,
                          attributes, duration, parts)  # fmt: skip
        except Exception as exc:
            self._pipeline.faults.report("internal", exc)
        finally:
            if self._span is not None:
                try:
                    self._span.end()
                except Exception as exc:
                    self._pipeline.faults.report("span", exc)

    def _account(
        self,
        usage: Usage | None,
        error: BaseException | str | None,
        response_model: str | None,
        response_id: str | None,
        finish_reasons: Sequence[str] | None,
        attributes: dict[str, Any] | None,
        duration: float,
        parts: Sequence[Usage] | None = None,
    ) -> None:
        p = self._pipeline
        faults = p.faults
        inst = p.instruments
        span = self._span
        agent = self._agent
        failed = error is not None

        if parts:
            valid = [part for part in parts if type(part) is Usage]
            if len(valid) != len(parts):
                faults.report("usage_invalid", detail="a usage part is not a Usage")
            parts = valid
            if usage is None and parts:
                usage = sum(parts, Usage())
        if usage is None:
            if not failed:
                faults.report("usage_missing", detail=f"{self.provider} returned no usage")
            usage = Usage()
        elif type(usage) is not Usage:
            faults.report("usage_invalid", detail=f"not a Usage: {type(usage).__name__}")
            usage = Usage()
        response_model = response_model or usage.model
        has_tokens = usage.input_tokens is not None or usage.output_tokens is not None
        default_model = response_model or self.request_model
        if not parts:
            parts = (usage,)

        # one price per part; the call's cost is the backend's own total when it gave one
        prices: list[PriceResult] = []
        for part in parts:
            try:
                prices.append(p.pricer.price(part, self.provider, part.model or default_model))
            except Exception as exc:
                faults.report("pricing", exc)
                prices.append(_NO_PRICE)
        if len(parts) == 1:
            price = prices[0]
        elif usage.cost_usd is not None:
            price = PriceResult(usage.cost_usd, "provider")
            prices = _share(usage.cost_usd, parts, prices)
        else:
            known = [x for x in prices if x.cost_usd is not None]
            price = _NO_PRICE
            if known:
                source = "provider" if all(x.source == "provider" for x in known) else "computed"
                price = PriceResult(sum(x.cost_usd for x in known), source)  # type: ignore[misc]

        trace_id = span_id = None
        if span is not None:
            try:
                ctx = span.get_span_context()
                if ctx.is_valid:
                    trace_id, span_id = ctx.trace_id, ctx.span_id
            except Exception as exc:
                faults.report("span", exc)

        if agent is not None:
            try:
                if failed:
                    agent.state.fail(self._handle)
                else:
                    agent.state.complete(usage, self._handle)
            except Exception as exc:
                faults.report("state", exc)
            try:
                ledger = agent.ledger
                if failed and not has_tokens:
                    if self._stream_key is not None:
                        ledger.stream_discard(self._stream_key)
                elif len(parts) == 1:
                    if self._stream_key is not None:
                        ledger.stream_finalize(self._stream_key, usage, cost_usd=price.cost_usd,
                                               request_id=response_id, trace_id=trace_id,
                                               span_id=span_id)  # fmt: skip
                    else:
                        ledger.append(usage, cost_usd=price.cost_usd, request_id=response_id,
                                      trace_id=trace_id, span_id=span_id)  # fmt: skip
                else:
                    if self._stream_key is not None:
                        ledger.stream_discard(self._stream_key)
                    for part, part_price in zip(parts, prices):
                        ledger.append(
                            part if part.model else part.replace(model=default_model),
                            cost_usd=part_price.cost_usd,
                            request_id=f"{response_id}/{part.model}" if response_id else None,
                            trace_id=trace_id, span_id=span_id,
                        )  # fmt: skip
            except LedgerPersistenceError as exc:
                faults.report("ledger_persistence", exc)
            except Exception as exc:
                faults.report("ledger", exc)

        attribute_set = p._attribute_set(self._attrs, response_model)
        attrs = attribute_set.attrs

        anomalies: list[Anomaly] = []
        if agent is not None and (has_tokens or price.cost_usd is not None):
            try:
                anomalies = p.guard.observe(
                    agent.name, usage.total_tokens, price.cost_usd, response_model
                )
            except Exception as exc:
                faults.report("internal", exc)

        estimate = self._estimate
        estimate_error = None
        if estimate is not None and usage.input_tokens and usage.source != "estimated":
            estimate_error = (estimate.input_tokens - usage.input_tokens) / usage.input_tokens
            if self._request_estimate is not None and not failed:
                try:  # calibration and the agent's cursor for later delta estimates
                    p.estimator.observe(self._request_estimate, usage.input_tokens)
                except Exception as exc:
                    faults.report("estimate", exc)

        ttfc = None
        if self._first_chunk is not None:
            ttfc = self._first_chunk - self._start

        if span is not None:
            try:
                self._set_span_attributes(
                    span, usage, error, response_model, response_id, finish_reasons,
                    price, estimate_error, ttfc, attributes,
                )  # fmt: skip
            except Exception as exc:
                faults.report("span", exc)
        for anomaly in anomalies:
            p._announce(span, anomaly, attrs)

        try:
            if failed:
                duration_attrs = {**attrs, names.ERROR_TYPE: _error_type(error)}
            else:
                duration_attrs = attrs
            inst.duration.record(duration, duration_attrs)
            if ttfc is not None and self._stream:
                inst.time_to_first_chunk.record(ttfc, duration_attrs)
            several = len(parts) > 1
            counted: list[tuple[tuple[tuple[str, Any], ...], float]] = []
            for part, part_price in zip(parts, prices):
                part_set = attribute_set
                if several and (part.model or default_model):
                    part_set = p._attribute_set(self._attrs, part.model or default_model)
                source = part.source
                for field, _span_attr, token_type in names.TOKEN_ATTRIBUTES:
                    value = getattr(part, field)
                    if value is None:
                        continue
                    if token_type == "input" or token_type == "output":
                        inst.token_usage.record(value, part_set.by_type[token_type])
                    counted.append((part_set.token_key(token_type, source), value))
                if not several or usage.cost_usd is None:
                    if part_price.cost_usd is not None:
                        inst.cost.add(part_price.cost_usd, part_set.cost_key(part_price.source))
                    elif part_price.unpriced and (
                        part.input_tokens is not None or part.output_tokens is not None
                    ):
                        inst.unpriced.add(1, part_set.key)
                if part.premium_requests is not None and several:
                    inst.premium_requests.add(part.premium_requests, part_set.key)
            inst.tokens.add_many(counted)
            if several and usage.cost_usd is not None:
                inst.cost.add(usage.cost_usd, attribute_set.cost_key("provider"))
            if usage.premium_requests is not None and (
                not several or all(x.premium_requests is None for x in parts)
            ):
                inst.premium_requests.add(usage.premium_requests, attribute_set.key)
            if estimate_error is not None and estimate is not None:
                record_signed(inst.estimate_error, estimate_error,
                              attribute_set.estimate(estimate.source))  # fmt: skip
        except Exception as exc:
            faults.report("metrics", exc)

    def _set_span_attributes(
        self,
        span: Any,
        usage: Usage,
        error: BaseException | str | None,
        response_model: str | None,
        response_id: str | None,
        finish_reasons: Sequence[str] | None,
        price: PriceResult,
        estimate_error: float | None,
        ttfc: float | None,
        extra: dict[str, Any] | None,
    ) -> None:
        if not span.is_recording():
            return
        values: dict[str, Any] = {names.USAGE_SOURCE: usage.source}
        for field, span_attr, _token_type in names.TOKEN_ATTRIBUTES:
            value = getattr(usage, field)
            if value is not None:  # a class the backend did not report is absent, never 0
                values[span_attr] = value
        if response_model:
            values[names.RESPONSE_MODEL] = response_model
        response_id = response_id or usage.response_id
        if response_id:
            values[names.RESPONSE_ID] = response_id
        if finish_reasons:
            values[names.FINISH_REASONS] = tuple(str(r) for r in finish_reasons)
        if price.cost_usd is not None:
            values[names.COST_USD] = price.cost_usd
            values[names.COST_SOURCE] = price.source
        if usage.premium_requests is not None:
            values[names.PREMIUM_REQUESTS] = usage.premium_requests
        if estimate_error is not None:
            values[names.ESTIMATE_ERROR] = estimate_error
        if ttfc is not None:
            values[names.TIME_TO_FIRST_CHUNK] = ttfc
        agent = self._agent
        if agent is not None:
            figures = agent.state.figures()
            values[names.STATE_TURN_COUNT] = figures.turn_count
            values[names.STATE_TOTAL_OUTPUT] = figures.total_output_tokens
            if figures.max_observed_input_tokens is not None:
                values[names.STATE_MAX_OBSERVED_INPUT] = figures.max_observed_input_tokens
            if figures.context_utilization is not None:
                values[names.STATE_CONTEXT_UTILIZATION] = figures.context_utilization
        if extra:
            values.update(extra)
        if error is not None:
            error_type = _error_type(error)
            values[names.ERROR_TYPE] = error_type
            message = str(error) if isinstance(error, BaseException) else error
            span.set_status(Status(StatusCode.ERROR, message[:1000] or error_type))
        span.set_attributes(values)


def _share(total: float, parts: Sequence[Usage], prices: list[PriceResult]) -> list[PriceResult]:
    """Split a run's provider-reported total over its parts, in proportion to the parts' own
    costs (or tokens when they have none), so the ledger's records add up to the total."""
    weights = [x.cost_usd for x in prices]
    if any(w is None for w in weights) or not sum(weights):  # type: ignore[arg-type]
        weights = [float(part.total_tokens or 0) for part in parts]
    whole = sum(weights)  # type: ignore[arg-type]
    if not whole:
        weights, whole = [1.0] * len(parts), float(len(parts))
    return [PriceResult(total * w / whole, "provider") for w in weights]  # type: ignore[operator]


class _Active:
    """Context manager attaching a call's span as the current span (a class: this runs on
    every call, and a generator-based one costs several times more)."""

    __slots__ = ("_call", "_token")

    def __init__(self, call: CallContext) -> None:
        self._call = call
        self._token: Any = None

    def __enter__(self) -> None:
        span = self._call._span
        if span is not None:
            try:
                self._token = otel_context.attach(trace.set_span_in_context(span))
            except Exception as exc:
                self._call._pipeline.faults.report("span", exc)

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            try:
                otel_context.detach(self._token)
            except Exception as exc:
                self._call._pipeline.faults.report("span", exc)


def _error_type(error: BaseException | str | None) -> str:
    """``error.type``: the exception's qualified class name, or the given string."""
    if error is None:
        return ""
    if isinstance(error, BaseException):
        cls = type(error)
        module = cls.__module__
        return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"
    return str(error)


# -- the process-wide pipeline ----------------------------------------------------------------
_pipeline: Pipeline | None = None
_pipeline_lock = threading.Lock()


def get_pipeline() -> Pipeline:
    """The process-wide pipeline (built on the global providers on first use).

    On the hot path a configuration error (a malformed price file) cannot be raised: it is
    counted, and prices fall back to genai-prices alone. ``configure()``/``instrument()``
    raise it at start instead.
    """
    global _pipeline
    pipeline = _pipeline
    if pipeline is None:
        with _pipeline_lock:
            if _pipeline is None:
                try:
                    _pipeline = Pipeline()
                except Exception as exc:
                    _pipeline = Pipeline(pricer=Pricer(), guard=AnomalyGuard())
                    _pipeline.faults.report("config", exc)  # logged with the file's problem
            pipeline = _pipeline
    return pipeline


def pipeline_is_unset() -> bool:
    """True until the process-wide pipeline has been built or set."""
    return _pipeline is None


def set_pipeline(pipeline: Pipeline | None) -> Pipeline | None:
    """Replace the process-wide pipeline (``instrument(tracer_provider=...)``, tests)."""
    global _pipeline
    with _pipeline_lock:
        previous, _pipeline = _pipeline, pipeline
    return previous


_guard: AnomalyGuard | None = None
_guard_lock = threading.Lock()  # not _pipeline_lock: building a pipeline takes the guard


def get_guard() -> AnomalyGuard:
    """The process-wide anomaly guard (budgets, spike rule, callbacks), from the environment."""
    global _guard
    if _guard is None:
        with _guard_lock:
            if _guard is None:
                _guard = AnomalyGuard.from_env()
    return _guard


def on_anomaly(callback: Callable[[Anomaly], None]) -> Callable[[Anomaly], None]:
    """Call ``callback(anomaly)`` on every anomaly (usable as a decorator); its exceptions are
    caught and counted."""
    get_guard().add_callback(callback)
    return callback


def set_budget(
    agent: str,
    *,
    tokens: int | None = None,
    usd: float | None = None,
    window_seconds: float = 3600.0,
    enforce: bool = False,
) -> None:
    """Give ``agent`` a rolling-window budget; with ``enforce=True`` its next call raises
    :class:`BudgetExceeded` once the budget is spent (or would be, by the call's estimate).
    With neither ``tokens`` nor ``usd`` the agent's budget is removed."""
    from .anomalies import Budget

    budget = None
    if tokens is not None or usd is not None:
        budget = Budget(tokens=tokens, usd=usd, window_seconds=window_seconds, enforce=enforce)
    get_guard().set_budget(agent, budget)
