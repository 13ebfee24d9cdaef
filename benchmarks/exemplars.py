"""Per-call cost of exemplars: the handler (account + emit) recording its histogram points in
the call's span context (exemplars on: the SDK's trace-based filter keeps a trace id per
histogram bucket) against the same handler without it (OTEL_TOKENS_EXEMPLARS=false).

Same set-up as benchmarks/handler.py (batch span processor exporting nowhere, an in-memory
metric reader); the two variants run interleaved and medians are reported, with the exemplars
the reader collected, so the "on" case is shown to make them.
Run by hand:  python benchmarks/exemplars.py [--calls N] [--rounds R]
"""

from __future__ import annotations

import argparse
import statistics
import time

from handler import NullExporter, one_call
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import otel_tokens
from otel_tokens import AnomalyGuard, Handler, Pricer
from otel_tokens.emit.instruments import views


def exemplars(reader: InMemoryMetricReader) -> int:
    data = reader.get_metrics_data()
    return sum(len(getattr(p, "exemplars", ()) or ()) for rm in data.resource_metrics
               for sm in rm.scope_metrics for m in sm.metrics for p in m.data.data_points)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    tp = TracerProvider()
    tp.add_span_processor(BatchSpanProcessor(NullExporter()))
    reader = InMemoryMetricReader()
    handler = Handler(tp, MeterProvider(metric_readers=[reader], views=views()), pricer=Pricer(),
                      guard=AnomalyGuard())  # fmt: skip
    results: dict[bool, list[float]] = {False: [], True: []}
    found: dict[bool, int] = {}
    with otel_tokens.agent("bench", max_input_tokens=128_000):
        for _ in range(500):
            one_call(handler, False)  # warm caches (price resolution)
        for _ in range(args.rounds):
            for on in (False, True):
                handler.recorder.exemplars = on
                reader.get_metrics_data()  # start each variant with empty reservoirs
                start = time.perf_counter()
                for _ in range(args.calls):
                    one_call(handler, False)
                results[on].append((time.perf_counter() - start) / args.calls * 1e6)
                found[on] = exemplars(reader)
    off, on = statistics.median(results[False]), statistics.median(results[True])
    print(f"handler per non-streamed call, median of {args.rounds} interleaved rounds of "
          f"{args.calls}: exemplars off {off:.1f} us, on {on:.1f} us (+{on - off:.1f} us, "
          f"{(on - off) / off * 100:+.1f}%); exemplars collected: off {found[False]}, on {found[True]}")


if __name__ == "__main__":
    main()
