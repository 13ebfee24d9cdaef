"""Faults inside the handler never reach the host; each is counted and logged once."""

from __future__ import annotations

import logging
import math

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter

import otel_tokens
from otel_tokens import AnomalyGuard, Pricer, SpikeRule, Usage
from otel_tokens.emit.exporters import GuardedMetricExporter, GuardedSpanExporter

from .conftest import make_telemetry


class Boom(RuntimeError):
    pass


def host_call(t, usage=Usage(input_tokens=10, output_tokens=2), result="the answer"):
    """What an instrumentor does around a backend call; returns the host's result."""
    call = t.handler.start(operation="chat", provider="openai", request_model="gpt-4o")
    with call.activate():
        value = result
    call.stop(usage)
    return value


class RaisingExporter(SpanExporter):
    def export(self, spans):
        raise Boom("exporter down")

    def shutdown(self):
        pass


def test_span_exporter_that_raises_is_counted():
    t = make_telemetry()
    guarded = GuardedSpanExporter(RaisingExporter(), faults=lambda: t.handler.faults)
    t.tracer_provider.add_span_processor(SimpleSpanProcessor(guarded))
    with otel_tokens.agent("a"):
        assert host_call(t) == "the answer"
    assert t.errors() == {"exporter": 1}
    assert len(t.finished()) == 1  # the other processor still got the span


def test_span_processor_that_raises_is_counted():
    class RaisingProcessor(SimpleSpanProcessor):
        def on_end(self, span):
            raise Boom("processor")

    t = make_telemetry(span_processor=RaisingProcessor(RaisingExporter()))
    with otel_tokens.agent("a") as entry:
        assert host_call(t) == "the answer"
    assert t.errors() == {"span": 1}
    assert entry.state.turn_count == 1  # accounting happened before the span ended


def test_metric_exporter_that_raises_is_counted():
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        ConsoleMetricExporter,
        MetricExportResult,
        PeriodicExportingMetricReader,
    )

    class RaisingMetricExporter(ConsoleMetricExporter):
        def export(self, metrics_data, timeout_millis=10_000, **kwargs):
            raise Boom("collector unreachable")

    t = make_telemetry()
    guarded = GuardedMetricExporter(RaisingMetricExporter(), faults=lambda: t.handler.faults)
    assert guarded.export(None) is MetricExportResult.FAILURE
    reader = PeriodicExportingMetricReader(guarded, export_interval_millis=10**9)
    mp = MeterProvider(metric_readers=[reader])
    mp.get_meter("x").create_counter("c").add(1)
    mp.force_flush()
    mp.shutdown()
    assert t.errors()["exporter"] >= 2


@pytest.mark.parametrize("values", [{"input_tokens": -5}, {"output_tokens": math.nan},
                                     {"cache_read_tokens": 1.5}, {"input_tokens": True}])  # fmt: skip
def test_bad_usage_values_from_a_backend_are_counted(telemetry, values):
    """What an instrumentor does with a malformed usage block: count, then carry on."""
    with otel_tokens.agent("a") as entry:
        call = telemetry.handler.start(operation="chat", provider="openai",
                                             request_model="gpt-4o")  # fmt: skip
        try:
            usage = Usage(**values)
        except ValueError as exc:
            telemetry.handler.faults.report("usage_invalid", exc)
            usage = None
        call.stop(usage)
    assert telemetry.errors()["usage_invalid"] == 1
    assert entry.state.turn_count == 1
    assert len(telemetry.finished()) == 1


def test_not_a_usage_is_counted(telemetry):
    call = telemetry.handler.start(operation="chat", provider="openai", request_model="m")
    call.stop({"input_tokens": 3})  # type: ignore[arg-type]
    assert telemetry.errors() == {"usage_invalid": 1}


def test_pricing_that_raises_is_counted():
    class BrokenPricer(Pricer):
        def price(self, usage, provider, model):
            raise Boom("price data corrupt")

    t = make_telemetry(pricer=BrokenPricer())
    with otel_tokens.agent("a") as entry:
        assert host_call(t) == "the answer"
    assert t.errors() == {"pricing": 1}
    assert entry.ledger.cumulative.input_tokens == 10
    span = t.span()
    assert "otel_tokens.cost.usd" not in span.attributes
    assert span.attributes["gen_ai.usage.input_tokens"] == 10


def test_callback_that_raises_is_counted():
    guard = AnomalyGuard(spike=SpikeRule(factor=2, warmup=3, window=10))
    seen = []
    guard.add_callback(lambda a: (_ for _ in ()).throw(Boom("callback bug")))
    guard.add_callback(seen.append)
    t = make_telemetry(guard=guard)
    with otel_tokens.agent("a"):
        for _ in range(3):
            host_call(t, Usage(input_tokens=10, output_tokens=10))
        assert host_call(t, Usage(input_tokens=1000, output_tokens=10)) == "the answer"
    # the request spiked in tokens and in cost: two anomalies, each reached both callbacks
    assert t.errors() == {"callback": 2}
    assert [a.kind for a in seen] == ["token_spike", "cost_spike"]


def test_ledger_persistence_failure_is_counted(tmp_path, monkeypatch):
    import sqlite3

    db = tmp_path / "ledger.sqlite3"
    monkeypatch.setenv("OTEL_TOKENS_LEDGER_PATH", str(db))
    otel_tokens.settings.reload()
    t = make_telemetry()
    with otel_tokens.agent("persisted") as entry:
        entry.ledger._store._conn.execute("PRAGMA busy_timeout=10")
        blocker = sqlite3.connect(db, isolation_level=None)
        blocker.execute("BEGIN EXCLUSIVE")
        try:
            assert host_call(t) == "the answer"
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert entry.ledger.pending_writes == 1
        host_call(t)
        assert entry.ledger.pending_writes == 0
    assert t.errors() == {"ledger_persistence": 1}


def test_host_exceptions_pass_through_unchanged(telemetry):
    original = KeyError("host bug")
    call = telemetry.handler.start(operation="chat", provider="openai", request_model="m")
    with pytest.raises(KeyError) as info:
        with call.activate():
            raise original
    assert info.value is original
    call.fail(info.value)
    assert telemetry.span().attributes["error.type"] == "KeyError"


def test_each_fault_kind_is_logged_once(telemetry, caplog):
    caplog.set_level(logging.WARNING, logger="otel_tokens")
    for _ in range(5):
        telemetry.handler.start(operation="chat", provider="openai",
                                      request_model="m").stop(None)  # fmt: skip
    messages = [r.getMessage() for r in caplog.records if "usage_missing" in r.getMessage()]
    assert len(messages) == 1
    assert telemetry.errors() == {"usage_missing": 5}


def test_errors_counter_failing_does_not_escape(telemetry):
    class BrokenCounter:
        def add(self, *a, **k):
            raise Boom("meter broken")

    telemetry.handler.faults.bind(BrokenCounter())
    telemetry.handler.faults.report("internal", Boom("x"))
    assert telemetry.handler.faults.counts == {"internal": 1}
