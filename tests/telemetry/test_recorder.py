"""The recorder alone: it emits what an outcome says (nothing computed), and its views and
instruments belong to otel_tokens' own meter only."""

from __future__ import annotations

import logging

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.trace import StatusCode

from otel_tokens import Estimate, Usage
from otel_tokens.account.anomalies import Anomaly
from otel_tokens.account.outcome import Line, Outcome
from otel_tokens.account.pricing import PriceResult
from otel_tokens.account.state import StateFigures
from otel_tokens.call import Call
from otel_tokens.emit.instruments import views
from otel_tokens.tracking import Tracking

from .conftest import make_telemetry

USAGE = Usage(input_tokens=900, output_tokens=70, cache_read_tokens=300, reasoning_tokens=20)


def outcome(**changes) -> Outcome:
    """An outcome written by hand: figures no real call would produce together, so that the
    recorder can only have taken them from here."""
    base = Outcome(
        failed=False, error_type=None, error_message=None, usage=USAGE,
        price=PriceResult(1.25, "provider"),
        lines=(Line("model-a", USAGE, 1.0, "provider", False, None),
               Line("model-b", None, None, None, True, 2.5)),
        response_model="model-a", response_id="resp-9", finish_reasons=("length",),
        estimate=Estimate(1000, "delta"), estimate_error=0.5, duration=3.0,
        time_to_first_chunk=0.75, stream=True,
        state=StateFigures(turn_count=42, total_output_tokens=4242, max_observed_input_tokens=9000,
                           context_utilization=0.33),
        anomalies=(Anomaly("bot", "token_spike", 970.0, 100.0, "model-a"),),
        attributes={"otel_tokens.stream.end": "exhausted"},
    )  # fmt: skip
    return base._replace(**changes)


def emitted(result: Outcome):
    t = make_telemetry()
    recorder = t.handler.recorder
    tracking = Tracking()
    call = Call(tracking, "chat", "openai", "model-req", True, started=0.0)
    recorder.start(call, tracking)
    recorder.stop(tracking, result)
    return t


def test_every_span_attribute_and_metric_point_is_the_outcomes():
    t = emitted(outcome())
    span = t.span()
    attrs = dict(span.attributes)
    assert {k: attrs[k] for k in (
        "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "otel_tokens.usage.source",
        "gen_ai.response.model", "gen_ai.response.id", "gen_ai.response.finish_reasons",
        "otel_tokens.cost.usd", "otel_tokens.cost.source", "otel_tokens.estimate.error",
        "gen_ai.response.time_to_first_chunk", "otel_tokens.state.turn_count",
        "otel_tokens.state.total_output_tokens", "otel_tokens.state.max_observed_input_tokens",
        "otel_tokens.state.context_utilization", "otel_tokens.stream.end")} == {
        "gen_ai.usage.input_tokens": 900, "gen_ai.usage.output_tokens": 70,
        "otel_tokens.usage.source": "reported", "gen_ai.response.model": "model-a",
        "gen_ai.response.id": "resp-9", "gen_ai.response.finish_reasons": ("length",),
        "otel_tokens.cost.usd": 1.25, "otel_tokens.cost.source": "provider",
        "otel_tokens.estimate.error": 0.5, "gen_ai.response.time_to_first_chunk": 0.75,
        "otel_tokens.state.turn_count": 42, "otel_tokens.state.total_output_tokens": 4242,
        "otel_tokens.state.max_observed_input_tokens": 9000,
        "otel_tokens.state.context_utilization": 0.33, "otel_tokens.stream.end": "exhausted",
    }  # fmt: skip
    (event,) = span.events
    assert event.name == "otel_tokens.anomaly" and event.attributes["otel_tokens.anomaly.kind"] == "token_spike"
    assert t.point("gen_ai.client.operation.duration").sum == 3.0
    assert t.point("gen_ai.client.operation.time_to_first_chunk").sum == 0.75
    assert t.point("otel_tokens.estimate.error").sum == 0.5
    # line one: its tokens and its cost under model-a; line two: unpriced and premium under model-b
    assert t.point("otel_tokens.tokens", gen_ai__token__type="reasoning").value == 20
    assert t.point("otel_tokens.cost").value == 1.0
    assert t.point("otel_tokens.cost").attributes["gen_ai.response.model"] == "model-a"
    assert t.point("otel_tokens.unpriced_requests").attributes["gen_ai.response.model"] == "model-b"
    assert t.point("otel_tokens.premium_requests").value == 2.5
    assert t.point("otel_tokens.anomalies").attributes["otel_tokens.anomaly.kind"] == "token_spike"


def test_a_failed_outcome_without_usage_has_its_error_and_no_usage_source():
    t = emitted(outcome(failed=True, error_type="TimeoutError", error_message="too slow",
                        usage=Usage(), lines=(Line(None, Usage(), None, None, False, None),),
                        price=PriceResult(None, None), anomalies=()))  # fmt: skip
    span = t.span()
    assert span.status.status_code is StatusCode.ERROR and span.status.description == "too slow"
    assert span.attributes["error.type"] == "TimeoutError"
    assert "otel_tokens.usage.source" not in span.attributes
    assert "gen_ai.usage.input_tokens" not in span.attributes
    assert t.point("gen_ai.client.operation.duration").attributes["error.type"] == "TimeoutError"
    assert t.points("otel_tokens.tokens") == []


def test_views_and_instruments_are_otel_tokens_own(caplog):
    """Another GenAI instrumentation's instruments of the same names keep their own buckets,
    and the SDK warns of no conflicting metric identity."""
    caplog.set_level(logging.WARNING)
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], views=views())
    ours = provider.get_meter("otel_tokens").create_histogram("gen_ai.client.token.usage")
    theirs = provider.get_meter("opentelemetry.instrumentation.openai_v2").create_histogram(
        "gen_ai.client.token.usage")
    ours.record(5)
    theirs.record(5)
    bounds = {sm.scope.name: tuple(m.data.data_points[0].explicit_bounds)
              for rm in reader.get_metrics_data().resource_metrics
              for sm in rm.scope_metrics for m in sm.metrics}  # fmt: skip
    assert bounds["otel_tokens"][:3] == (1.0, 4.0, 16.0)
    assert bounds["opentelemetry.instrumentation.openai_v2"][:3] == (0.0, 5.0, 10.0)  # SDK default
    assert not [r for r in caplog.records if "conflicting" in r.getMessage()]


@pytest.mark.parametrize("broken", ["tracer", "meter"])
def test_a_failing_sdk_never_reaches_the_caller(broken, monkeypatch):
    t = make_telemetry()
    recorder = t.handler.recorder
    if broken == "tracer":
        monkeypatch.setattr(recorder.tracer, "start_span", lambda *a, **k: 1 / 0)
    else:
        monkeypatch.setattr(recorder.instruments.duration, "record", lambda *a, **k: 1 / 0)
    tracking = Tracking()
    call = Call(tracking, "chat", "openai", "m", False, started=0.0)
    recorder.start(call, tracking)
    recorder.stop(tracking, outcome())
    assert t.errors() == ({"span": 1} if broken == "tracer" else {"metrics": 1})


def _exemplar_trace_ids(t) -> dict[str, set[int]]:
    data = t.reader.get_metrics_data()
    found: dict[str, set[int]] = {}
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                for dp in m.data.data_points:
                    for exemplar in getattr(dp, "exemplars", None) or ():
                        found.setdefault(m.name, set()).add(exemplar.trace_id)
    return found


@pytest.mark.parametrize("on", [True, False])
def test_histogram_points_link_to_the_call_s_trace_when_exemplars_are_on(on):
    """A slow or large call leads to its trace: the duration, time-to-first-chunk and token
    histograms carry exemplars with the call's trace id (OTEL_TOKENS_EXEMPLARS, default on)."""
    t = make_telemetry()
    recorder = t.handler.recorder
    recorder.exemplars = on
    tracking = Tracking()
    call = Call(tracking, "chat", "openai", "model-req", True, started=0.0)
    recorder.start(call, tracking)
    recorder.stop(tracking, outcome())
    trace_id = t.span().context.trace_id
    expected = {name: {trace_id} for name in ("gen_ai.client.operation.duration",
                "gen_ai.client.operation.time_to_first_chunk", "gen_ai.client.token.usage")}
    assert _exemplar_trace_ids(t) == (expected if on else {})


def test_the_call_carries_its_span_s_ids():
    """The span's ids go on the call's tracking (the ledger's link to the trace)."""
    t = make_telemetry()
    tracking = Tracking()
    call = Call(tracking, "chat", "openai", "model-req", False, started=0.0)
    t.handler.recorder.start(call, tracking)
    t.handler.recorder.stop(tracking, outcome())
    context = t.span().context
    assert (tracking.trace_id, tracking.span_id) == (context.trace_id, context.span_id)
    assert tracking.trace_id and tracking.span_id
