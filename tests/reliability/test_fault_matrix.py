"""Fault matrix: every instrumentor x every internal fault.

For each cell the same host program runs uninstrumented, then instrumented with the fault
injected (a plain call, a streamed call and a call that raises; see ``hosts.py``). The host
must observe exactly the same thing (value, exception type and message, every stream item),
the extra time must stay bounded (generously: shared, noisy machines), every call must still
end exactly once (one span each, the agent left idle), and the fault must be counted on
``otel_tokens.instrumentation.errors`` — or the cell says why it cannot be (the SDK swallows
it, or the faulty component is not on that instrumentor's path).

The matrix (ok/count/extra ms per cell) is printed at the end of the run (conftest.py).
"""

from __future__ import annotations

import importlib
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    InMemoryMetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_tokens
from otel_tokens import AnomalyGuard, Handler, Pricer
from otel_tokens.capture.wire import anthropic as anthropic_wire
from otel_tokens.capture.wire import openai as openai_wire
from otel_tokens.account.anomalies import Budget
from otel_tokens.emit.exporters import GuardedMetricExporter, GuardedSpanExporter
from otel_tokens.emit.instruments import views
from otel_tokens.handler import set_handler

from .. import cassettes
from ..telemetry.conftest import CREATED, Telemetry
from . import hosts

#: (instrumentor, fault) -> (ok, faults counted, extra ms, note); printed by conftest.py
MATRIX: dict[tuple[str, str], tuple[str, str, str, str]] = {}

BLOCK_SECONDS = 3.0
EXTRA_BOUND = 1.0  # seconds added to the 3 host calls of a cell, whatever the fault
AGENT = "reliability"


class Boom(RuntimeError):
    pass


@dataclass
class Cell:
    """What a fault needs: SDK parts to build, hooks around the host calls, clean-up."""

    instrumentor: str
    monkeypatch: pytest.MonkeyPatch
    tmp_path: Any
    span_processors: list[Any] = field(default_factory=list)
    readers: list[Any] = field(default_factory=list)
    pricer: Pricer | None = None
    guard: AnomalyGuard | None = None
    built: list[Callable[[Telemetry], None]] = field(default_factory=list)  # after the handler
    with_agent: list[Callable[[Any], None]] = field(default_factory=list)  # agent entry made
    before_timed: list[Callable[[], None]] = field(default_factory=list)
    after: list[Callable[[], None]] = field(default_factory=list)  # before counting
    cleanup: list[Callable[[], None]] = field(default_factory=list)
    telemetry: Telemetry | None = None

    def faults(self) -> Any:
        assert self.telemetry is not None
        return self.telemetry.handler.faults


def build(cell: Cell) -> Telemetry:
    """The in-memory SDK of tests/telemetry, plus the fault's processors and readers."""
    spans = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(spans))
    for processor in cell.span_processors:
        tp.add_span_processor(processor)
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader, *cell.readers], views=views())
    handler = Handler(tp, mp, pricer=cell.pricer or Pricer(), guard=cell.guard or AnomalyGuard())
    telemetry = Telemetry(handler, spans, reader, tp, mp)
    CREATED.append(telemetry)
    cell.telemetry = telemetry
    return telemetry


# -- the faults -------------------------------------------------------------------------------
class RaisingSpanExporter(SpanExporter):
    def export(self, spans: Any) -> SpanExportResult:
        raise Boom("collector unreachable")

    def shutdown(self) -> None:
        pass


class BlockingSpanExporter(SpanExporter):
    """Blocks every export for BLOCK_SECONDS (or until released)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def export(self, spans: Any) -> SpanExportResult:
        self.entered.set()
        self.release.wait(BLOCK_SECONDS)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.release.set()


class RaisingMetricExporter(ConsoleMetricExporter):
    def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> Any:
        raise Boom("metrics backend down")


class RaisingPricer(Pricer):
    def price(self, usage: Any, provider: Any, model: Any) -> Any:
        raise Boom("price table corrupt")


class RaisingEstimator:
    calls = 0

    def __getattr__(self, name: str) -> Any:
        def broken(*args: Any, **kwargs: Any) -> Any:
            RaisingEstimator.calls += 1
            raise Boom(f"estimator.{name} broken")

        return broken


def span_exporter_raising(cell: Cell) -> tuple[set[str], str]:
    guarded = GuardedSpanExporter(RaisingSpanExporter(), faults=cell.faults)
    cell.span_processors.append(SimpleSpanProcessor(guarded))
    return {"exporter"}, ""


def span_exporter_blocking(cell: Cell) -> tuple[set[str], str]:
    exporter = BlockingSpanExporter()
    processor = BatchSpanProcessor(GuardedSpanExporter(exporter, faults=cell.faults),
                                   schedule_delay_millis=1, max_export_batch_size=1)  # fmt: skip
    cell.span_processors.append(processor)

    def stuck() -> None:  # the exporter is blocked in export() while the timed calls run
        assert exporter.entered.wait(2.0), "the exporter was never called"

    cell.before_timed.append(stuck)

    def stop() -> None:
        exporter.release.set()
        processor.shutdown()

    cell.cleanup.append(stop)
    return set(), "not a failure: the SDK's BatchSpanProcessor exports on its own thread and queues meanwhile"


def metric_reader_raising(cell: Cell) -> tuple[set[str], str]:
    reader = PeriodicExportingMetricReader(
        GuardedMetricExporter(RaisingMetricExporter(), faults=cell.faults), export_interval_millis=50
    )
    cell.readers.append(reader)
    cell.after.append(reader.force_flush)  # at least one export, whatever the timing
    cell.cleanup.append(lambda: reader.shutdown())
    return {"exporter"}, ""


def pricing_raising(cell: Cell) -> tuple[set[str], str]:
    cell.pricer = RaisingPricer()
    return {"pricing"}, ""


def estimator_raising(cell: Cell) -> tuple[set[str], str]:
    def swap(t: Telemetry) -> None:
        t.handler.accountant.estimator = RaisingEstimator()  # type: ignore[assignment]

    cell.built.append(swap)
    if cell.instrumentor in ("cli", "backend"):
        return set(), "not on this path: agent-CLI runs report their own usage, nothing is estimated"
    return {"estimate"}, ""


def _ledger_file(cell: Cell) -> str:
    path = str(cell.tmp_path / "ledger.sqlite3")
    cell.monkeypatch.setenv("OTEL_TOKENS_LEDGER_PATH", path)
    otel_tokens.settings.reload()
    return path


def ledger_locked(cell: Cell) -> tuple[set[str], str]:
    path = _ledger_file(cell)

    def lock(entry: Any) -> None:
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN EXCLUSIVE")  # another process holding the write lock

        def unlock() -> None:
            blocker.execute("ROLLBACK")
            blocker.close()

        cell.cleanup.append(unlock)

    cell.with_agent.append(lock)
    return {"ledger_persistence"}, ""


def ledger_disk_full(cell: Cell) -> tuple[set[str], str]:
    _ledger_file(cell)

    def fill(entry: Any) -> None:
        conn = entry.ledger._store._conn  # the ledger's own connection: the file is full
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count={pages}")
        try:
            for i in range(100_000):
                conn.execute("INSERT INTO otel_tokens_meta VALUES (?, 'x')", (f"filler-{i}",))
                conn.execute("INSERT INTO otel_tokens_requests (ledger, request_id, ts, source) "
                             "VALUES ('filler', ?, 0, 'reported')", (str(i),))  # fmt: skip
        except sqlite3.OperationalError as exc:
            assert "full" in str(exc), exc  # SQLITE_FULL, as on a full disk
        # space again before the agent's ledger is closed (it writes what is pending then)
        cell.cleanup.append(lambda: conn.execute("PRAGMA max_page_count=1073741823"))

    cell.with_agent.append(fill)
    return {"ledger_persistence"}, ""


def anomaly_callback_raising(cell: Cell) -> tuple[set[str], str]:
    guard = AnomalyGuard()
    guard.set_budget(AGENT, Budget(tokens=1))  # every call with tokens is over budget

    def callback(anomaly: Any) -> None:
        raise Boom("pager down")

    guard.add_callback(callback)
    cell.guard = guard
    return {"callback"}, ""


def parser_raising(cell: Cell) -> tuple[set[str], str]:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise Boom("parser bug")

    mp = cell.monkeypatch
    if cell.instrumentor == "openai":
        mp.setattr(openai_wire, "_chat_usage", broken)  # the usage reader of responses
        mp.setattr(openai_wire.ChatAccumulator, "add", broken)  # and of stream chunks, one
        mp.setattr(openai_wire.ChatAccumulator, "_read_plain", broken)  # by one and in bulk
    elif cell.instrumentor == "anthropic":
        mp.setattr(anthropic_wire, "usage_fields", broken)  # responses and stream events alike
    else:
        mp.setattr(importlib.import_module("otel_tokens.capture.agent_cli.parsers.copilot"), "parse", broken)
    return {"parse", "internal"}, ""


FAULTS: dict[str, Callable[[Cell], tuple[set[str], str]]] = {
    "span exporter raises": span_exporter_raising,
    f"span exporter blocks {BLOCK_SECONDS:g}s": span_exporter_blocking,
    "metric reader raises": metric_reader_raising,
    "pricing raises": pricing_raising,
    "estimator raises": estimator_raising,
    "ledger file locked": ledger_locked,
    "ledger disk full": ledger_disk_full,
    "anomaly callback raises": anomaly_callback_raising,
    "parser raises": parser_raising,
}


# -- one cell ---------------------------------------------------------------------------------
def _timed(call: Callable[[str], hosts.Outcome]) -> tuple[dict[str, hosts.Outcome], float]:
    outcomes, start = {}, time.perf_counter()
    for scenario in hosts.SCENARIOS:
        outcomes[scenario] = call(scenario)
    return outcomes, time.perf_counter() - start


@pytest.fixture
def fake_cli(tmp_path, monkeypatch):
    cassettes.require()
    if not hosts.CLI_SAMPLE.is_file():
        pytest.skip(f"shared CLI samples not found at {hosts.CLI_SAMPLE}")
    folder = hosts.write_fake_copilot(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{folder.parent}:{__import__('os').environ['PATH']}")


@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("instrumentor", hosts.INSTRUMENTORS)
def test_fault_cell(instrumentor, fault, fake_cli, tmp_path, monkeypatch):
    cell = Cell(instrumentor, monkeypatch, tmp_path)
    expected, note = FAULTS[fault](cell)
    t = build(cell)
    for hook in cell.built:
        hook(t)
    previous = set_handler(t.handler)
    call = hosts.caller(instrumentor)
    result = ("FAIL", "-", "-", "")
    try:
        _timed(call)  # warm-up, uninstrumented
        baseline, base_time = _timed(call)
        hosts.install(instrumentor)
        try:
            with otel_tokens.agent(AGENT) as entry:
                for hook in cell.with_agent:
                    hook(entry)
                warm, _ = _timed(call)
                for hook in cell.before_timed:
                    hook()
                got, time_with = _timed(call)
        finally:
            hosts.uninstall(instrumentor)
        for hook in cell.after:
            hook()
        extra = time_with - base_time
        counts = {k: v for k, v in t.errors().items() if v}
        moved = sum(counts.get(kind, 0) for kind in expected)
        shown = ",".join(f"{k}={v:g}" for k, v in sorted(counts.items())) or "0"
        result = ("FAIL", shown, f"{extra * 1000:+.0f}", note)

        for scenario in hosts.SCENARIOS:  # the host sees exactly what it sees uninstrumented
            assert warm[scenario] == baseline[scenario], scenario
            assert got[scenario] == baseline[scenario], scenario
        assert extra < EXTRA_BOUND, f"{extra:.2f}s added to the host calls"
        # every call ended exactly once: one span each, the agent idle again
        assert len(t.finished()) == 2 * len(hosts.SCENARIOS)
        assert entry.state.status == "idle"
        if expected:
            assert moved > 0, f"{fault} not counted as {expected}: {counts}"
        result = ("ok", shown, result[2], note)
    finally:
        MATRIX[(instrumentor, fault)] = result
        for hook in reversed(cell.cleanup):
            try:
                hook()
            except Exception:
                pass
        set_handler(previous)
        t.tracer_provider.shutdown()
        t.meter_provider.shutdown()
