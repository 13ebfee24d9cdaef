"""In-memory OpenTelemetry SDK around a fresh handler, and helpers to read what it got."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_tokens import AnomalyGuard, Handler, Pricer
from otel_tokens.emit.instruments import views
from otel_tokens.handler import set_handler


@dataclass
class Point:
    name: str
    unit: str
    attributes: dict[str, Any]
    value: Any = None  # counters and gauges
    sum: float | None = None  # histograms
    count: int | None = None
    bounds: tuple[float, ...] = ()
    bucket_counts: tuple[int, ...] = ()


@dataclass
class Telemetry:
    handler: Handler
    spans: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    def finished(self) -> list:
        return list(self.spans.get_finished_spans())

    def span(self):
        (span,) = self.finished()
        return span

    def points(self, name: str | None = None) -> list[Point]:
        out = []
        data = self.reader.get_metrics_data()
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if name is not None and m.name != name:
                        continue
                    for dp in m.data.data_points:
                        p = Point(m.name, m.unit, dict(dp.attributes))
                        if hasattr(dp, "bucket_counts"):
                            p.sum, p.count = dp.sum, dp.count
                            p.bounds, p.bucket_counts = tuple(dp.explicit_bounds), tuple(dp.bucket_counts)
                        else:
                            p.value = dp.value
                        out.append(p)
        return out

    def point(self, name: str, **attrs: Any) -> Point:
        found = [p for p in self.points(name)
                 if all(p.attributes.get(k.replace("__", ".")) == v for k, v in attrs.items())]
        assert len(found) == 1, f"{name} {attrs}: {found}"
        return found[0]

    def errors(self) -> dict[str, float]:
        return {p.attributes["otel_tokens.error.kind"]: p.value
                for p in self.points("otel_tokens.instrumentation.errors")}


#: every Telemetry made during the current test (scanned for secrets afterwards: tests/conftest.py)
CREATED: list[Telemetry] = []


def make_telemetry(pricer: Pricer | None = None, guard: AnomalyGuard | None = None,
                   span_processor: Any = None, handler_class: type[Handler] = Handler) -> Telemetry:
    spans = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(spans))
    if span_processor is not None:
        tp.add_span_processor(span_processor)
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader], views=views())
    handler = handler_class(tp, mp, pricer=pricer or Pricer(), guard=guard or AnomalyGuard())
    telemetry = Telemetry(handler, spans, reader, tp, mp)
    CREATED.append(telemetry)
    return telemetry


@contextmanager
def handling(*patches: Any, handler_class: type[Handler] = Handler) -> Iterator[Telemetry]:
    """A fresh in-memory telemetry (its handler of ``handler_class``) as the process's handler,
    with these capture modules' patches installed (in order) for the duration; all undone after."""
    t = make_telemetry(handler_class=handler_class)
    previous = set_handler(t.handler)
    for module in patches:
        module.install()
    try:
        yield t
    finally:
        for module in reversed(patches):
            module.uninstall()
        set_handler(previous)


@pytest.fixture
def telemetry():
    with handling() as t:
        yield t
