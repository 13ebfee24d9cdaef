"""Per-call overhead of an instrumented ``openai`` call vs the same client uninstrumented.

A mock transport answers (no network); the SDK is set up as an application would have it (a
batch span processor exporting nowhere, a periodic metric reader). Non-streamed calls, and
streamed calls of 1 and 201 chunks, whose difference gives the cost per chunk. Variants run
interleaved (instrumented and not, round after round) and medians are reported, so machine
noise moves both alike.

Targets (issue: SDK instrumentors): <= 40 us added per non-streamed call, <= 1 us per
streamed chunk. For scale on this kind of machine: the official OpenTelemetry OpenAI
instrumentation about 230 us per call and 5 us per chunk, OpenLLMetry about 900 us,
OpenLIT about 1.8 ms. Run by hand:  python benchmarks/overhead.py [--calls N]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import openai  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import (  # noqa: E402
    ConsoleMetricExporter,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import (  # noqa: E402
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

import otel_tokens  # noqa: E402
from otel_tokens import AnomalyGuard, Pipeline, Pricer  # noqa: E402
from otel_tokens.instrumentors import openai_sdk  # noqa: E402
from otel_tokens.telemetry.instruments import views  # noqa: E402
from otel_tokens.telemetry.pipeline import set_pipeline  # noqa: E402
from tests.sdk.replay import http_module  # noqa: E402

http = http_module("openai")

COMPLETION = json.dumps({
    "id": "chatcmpl-bench", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini-2024-07-18",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "This is a test."},
                 "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17,
              "prompt_tokens_details": {"cached_tokens": 0},
              "completion_tokens_details": {"reasoning_tokens": 0}},
}).encode()  # fmt: skip


def sse(chunks: int) -> bytes:
    lines = []
    for i in range(chunks):
        chunk = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1,
                 "model": "gpt-4o-mini", "choices": [{"index": 0, "delta": {"content": f"w{i} "},
                                                      "finish_reason": None}]}  # fmt: skip
        lines.append(f"data: {json.dumps(chunk)}\n\n")
    usage = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1,
             "model": "gpt-4o-mini", "choices": [],
             "usage": {"prompt_tokens": 12, "completion_tokens": chunks, "total_tokens": 12 + chunks}}  # fmt: skip
    lines.append(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n")
    return "".join(lines).encode()


BODIES = {1: sse(1), 201: sse(201)}
MESSAGES = [{"role": "user", "content": "Say this is a test"}]


def handler(request):  # type: ignore[no-untyped-def]
    payload = json.loads(request.content)
    if payload.get("stream"):
        n = 201 if payload["messages"][0]["content"] == "long" else 1
        return http.Response(200, headers={"content-type": "text/event-stream"}, content=BODIES[n])
    return http.Response(200, headers={"content-type": "application/json"}, content=COMPLETION)


class NullExporter(SpanExporter):
    def export(self, spans):  # type: ignore[no-untyped-def]
        return SpanExportResult.SUCCESS


def setup_sdk() -> None:
    tp = TracerProvider()
    tp.add_span_processor(BatchSpanProcessor(NullExporter()))
    reader = PeriodicExportingMetricReader(ConsoleMetricExporter(out=open("/dev/null", "w")),
                                           export_interval_millis=3_600_000)  # fmt: skip
    mp = MeterProvider(metric_readers=[reader], views=views())
    set_pipeline(Pipeline(tp, mp, pricer=Pricer(), guard=AnomalyGuard()))


def timed(client: openai.OpenAI, kind: str, n: int) -> float:
    """Median-free mean of ``n`` calls, in microseconds per call."""
    start = time.perf_counter()
    for _ in range(n):
        if kind == "call":
            client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
        else:
            content = "long" if kind == "stream201" else "short"
            for _chunk in client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": content}], stream=True,
                stream_options={"include_usage": True},
            ):
                pass
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    setup_sdk()
    client = openai.OpenAI(api_key="bench", max_retries=0,
                           http_client=http.Client(transport=http.MockTransport(handler)))  # fmt: skip
    kinds = {"call": args.calls, "stream1": args.calls // 2, "stream201": max(20, args.calls // 40)}
    results: dict[tuple[str, bool], list[float]] = {}
    with otel_tokens.agent("bench", max_input_tokens=128_000):
        for instrumented in (True, False):  # warm-up: caches, price resolution
            (openai_sdk.install if instrumented else openai_sdk.uninstall)()
            for kind in kinds:
                timed(client, kind, 20)
        for _ in range(args.rounds):
            for instrumented in (False, True):
                (openai_sdk.install if instrumented else openai_sdk.uninstall)()
                for kind, n in kinds.items():
                    results.setdefault((kind, instrumented), []).append(timed(client, kind, n))
        openai_sdk.uninstall()
    med = {key: statistics.median(values) for key, values in results.items()}
    print(f"openai {openai.__version__}, median of {args.rounds} interleaved rounds (microseconds)")
    print(f"  {'':<28} {'plain':>9} {'instrumented':>13} {'added':>9} {'ratio':>6}")
    for kind, label in (("call", "non-streamed call"), ("stream1", "streamed call, 1 chunk"),
                        ("stream201", "streamed call, 201 chunks")):  # fmt: skip
        plain, inst = med[(kind, False)], med[(kind, True)]
        print(f"  {label:<28} {plain:9.1f} {inst:13.1f} {inst - plain:9.1f} {inst / plain:6.2f}")
    per_chunk = ((med[("stream201", True)] - med[("stream201", False)])
                 - (med[("stream1", True)] - med[("stream1", False)])) / 200  # fmt: skip
    print(f"  added per streamed chunk: {per_chunk:.2f} us (target <= 1 us)")
    print(f"  added per non-streamed call: {med[('call', True)] - med[('call', False)]:.1f} us "
          "(target <= 40 us)")  # fmt: skip


if __name__ == "__main__":
    main()
