"""Per-call cost of the handler alone (start + stop: account and emit), with the SDK set up as an
application would: a batch span processor exporting nowhere and a periodic metric reader.

This is the provider-independent share of every instrumented call (issue 5's budget is
<= 40 us per non-streamed call in all). Variants run interleaved; medians are reported.
Run by hand:  python benchmarks/handler.py [--calls N]
"""

from __future__ import annotations

import argparse
import statistics
import time

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import otel_tokens
from otel_tokens import AnomalyGuard, Estimate, Handler, Pricer, Usage
from otel_tokens.emit.instruments import views


class NullExporter(SpanExporter):
    def export(self, spans):
        return SpanExportResult.SUCCESS


def build() -> Handler:
    tp = TracerProvider()
    tp.add_span_processor(BatchSpanProcessor(NullExporter()))
    mp = MeterProvider(metric_readers=[InMemoryMetricReader()], views=views())
    return Handler(tp, mp, pricer=Pricer(), guard=AnomalyGuard())


USAGE = Usage(input_tokens=1200, output_tokens=300, cache_read_tokens=800, reasoning_tokens=40)


def one_call(p: Handler, stream: bool) -> None:
    c = p.start(operation="chat", provider="openai", request_model="gpt-4o", stream=stream,
                     server_address="api.openai.com", server_port=443,
                     estimate=Estimate(1150, "full"))  # fmt: skip
    if stream:
        c.first_chunk()
    c.stop(USAGE, response_model="gpt-4o-2024-08-06", response_id="chatcmpl-x",
           finish_reasons=("stop",))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    p = build()
    results: dict[str, list[float]] = {"non-streamed call": [], "streamed call": []}
    with otel_tokens.agent("bench", max_input_tokens=128_000):
        for _ in range(200):
            one_call(p, False)  # warm caches (price resolution)
        for _ in range(args.rounds):
            for name, stream in (("non-streamed call", False), ("streamed call", True)):
                start = time.perf_counter()
                for _ in range(args.calls):
                    one_call(p, stream)
                results[name].append((time.perf_counter() - start) / args.calls * 1e6)
    print(f"handler cost per call (median of {args.rounds} interleaved rounds)")
    for name, values in results.items():
        print(f"  {name:<20} {statistics.median(values):6.1f} us")
    print(f"  faults: {p.faults.counts or 'none'}")


if __name__ == "__main__":
    main()
