"""Per-call overhead of an instrumented ``openai`` call vs the same client uninstrumented.

A mock transport answers (no network); the SDK is set up as an application would have it (a
batch span processor exporting nowhere, a periodic metric reader). Non-streamed calls, and
streamed calls of 1 and 201 chunks, whose difference gives the cost per chunk. Variants run
interleaved (instrumented and not, round after round) and medians are reported, so machine
noise moves both alike.

Targets (issue: SDK instrumentors): <= 40 us added per non-streamed call, <= 1 us per
streamed chunk. For scale on this kind of machine: the official OpenTelemetry OpenAI
instrumentation about 230 us per call and 5 us per chunk, OpenLLMetry about 900 us,
OpenLIT about 1.8 ms. When ``opentelemetry-instrumentation-openai-v2`` is installed, the
official instrumentation runs as one more interleaved variant, so that scale is measured on
the same machine in the same run. Run by hand:  python benchmarks/overhead.py [--calls N]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import openai  # noqa: E402
import wrapt  # noqa: E402
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
from otel_tokens import AnomalyGuard, Handler, Pricer  # noqa: E402
from otel_tokens.capture.sdk import openai as openai_sdk  # noqa: E402
from otel_tokens.emit.instruments import views  # noqa: E402
from otel_tokens.handler import set_handler  # noqa: E402
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
    """Exports nowhere; keeps the last span (the SDK-floor variant copies its attributes)."""

    last = None

    def export(self, spans):  # type: ignore[no-untyped-def]
        if spans:
            NullExporter.last = spans[-1]
        return SpanExportResult.SUCCESS


METERS: list[MeterProvider] = []  # the one set up, for the official instrumentation's variant


def setup_sdk() -> TracerProvider:
    tp = TracerProvider()
    tp.add_span_processor(BatchSpanProcessor(NullExporter()))
    reader = PeriodicExportingMetricReader(ConsoleMetricExporter(out=open("/dev/null", "w")),
                                           export_interval_millis=3_600_000)  # fmt: skip
    mp = MeterProvider(metric_readers=[reader], views=views())
    METERS.append(mp)
    set_handler(Handler(tp, mp, pricer=Pricer(), guard=AnomalyGuard()))
    return tp


def sdk_floor(tp: TracerProvider, client: openai.OpenAI) -> wrapt.FunctionWrapper:
    """A wrapper making the OpenTelemetry SDK do only what the telemetry contract requires of
    it per call, nothing of otel_tokens: one CLIENT span with the very attributes an
    instrumented call sets (copied from one), made current around the call, and the
    contract's four histogram points (duration, input and output tokens, estimate error).
    Counters cost no SDK work per call (asynchronous instruments over in-process sums).
    What otel_tokens adds beyond this floor is its own work: capture, estimation,
    accounting, pricing, anomaly checks."""
    from opentelemetry import context, trace

    from otel_tokens.emit import instruments as names
    from otel_tokens.handler import get_handler

    openai_sdk.install()
    client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    openai_sdk.uninstall()
    tp.force_flush()
    span = NullExporter.last
    attributes = dict(span.attributes)
    start = {k: attributes.pop(k) for k in list(attributes)[:8]}  # given at start, the rest at end
    common = {k: v for k, v in {**start, **attributes}.items() if k in (
        names.OPERATION, names.PROVIDER, names.AGENT_NAME, names.REQUEST_MODEL,
        names.RESPONSE_MODEL, names.SERVER_ADDRESS)}  # fmt: skip
    inst = get_handler().recorder.instruments
    tracer = get_handler().recorder.tracer
    by_type = {kind: {**common, names.TOKEN_TYPE: kind} for kind in ("input", "output")}
    error_attrs = {**common, names.ESTIMATE_SOURCE: "full"}

    def wrapper(wrapped, instance, args, kwargs):  # type: ignore[no-untyped-def]
        began = time.perf_counter()
        s = tracer.start_span(span.name, kind=trace.SpanKind.CLIENT, attributes=start)
        token = context.attach(trace.set_span_in_context(s))
        try:
            result = wrapped(*args, **kwargs)
        finally:
            context.detach(token)
        s.set_attributes(attributes)
        inst.duration.record(time.perf_counter() - began, common)
        inst.token_usage.record(result.usage.prompt_tokens, by_type["input"])
        inst.token_usage.record(result.usage.completion_tokens, by_type["output"])
        inst.estimate_error.record(0.1, error_attrs)
        s.end()
        return result

    return wrapt.FunctionWrapper(openai.resources.chat.completions.Completions.create, wrapper)


def official(tp: TracerProvider) -> tuple[str, Any, Any] | None:
    """The official OpenTelemetry OpenAI instrumentation as a fourth variant, when installed
    (``pip install opentelemetry-instrumentation-openai-v2``; it needs ``httpx``): its version,
    install and uninstall, on the same providers."""
    try:
        from importlib.metadata import version

        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    except ImportError:
        return None
    instrumentor = OpenAIInstrumentor()
    return (version("opentelemetry-instrumentation-openai-v2"),
            lambda: instrumentor.instrument(tracer_provider=tp, meter_provider=METERS[-1]),
            instrumentor.uninstrument)  # fmt: skip


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
    tp = setup_sdk()
    client = openai.OpenAI(api_key="bench", max_retries=0,
                           http_client=http.Client(transport=http.MockTransport(handler)))  # fmt: skip
    kinds = {"call": args.calls, "stream1": args.calls // 2, "stream201": max(20, args.calls // 40)}
    completions = openai.resources.chat.completions.Completions
    original = completions.create
    results: dict[tuple[str, str], list[float]] = {}
    with otel_tokens.agent("bench", max_input_tokens=128_000):
        floor = sdk_floor(tp, client)

        def restore() -> None:
            openai_sdk.uninstall()
            completions.create = original

        variants = {  # name -> (set-up, tear-down, the kinds it runs)
            "plain": (openai_sdk.uninstall, restore, kinds),
            "floor": (lambda: setattr(completions, "create", floor), restore,
                      {"call": kinds["call"]}),  # fmt: skip
            "instrumented": (openai_sdk.install, restore, kinds),
        }
        other = official(tp)
        if other is not None:
            variants["official"] = (other[1], other[2], kinds)
        for name, (enable, disable, runs) in variants.items():  # warm-up: caches, prices
            enable()
            for kind in runs:
                timed(client, kind, 20)
            disable()
        for _ in range(args.rounds):
            for name, (enable, disable, runs) in variants.items():
                enable()
                for kind, n in runs.items():
                    results.setdefault((kind, name), []).append(timed(client, kind, n))
                    tp.force_flush()  # export between blocks, untimed: no block finds a full queue
                disable()
    med = {key: statistics.median(values) for key, values in results.items()}
    print(f"openai {openai.__version__}, median of {args.rounds} interleaved rounds (microseconds)")
    print(f"  {'':<28} {'plain':>9} {'instrumented':>13} {'added':>9} {'ratio':>6}")
    for kind, label in (("call", "non-streamed call"), ("stream1", "streamed call, 1 chunk"),
                        ("stream201", "streamed call, 201 chunks")):  # fmt: skip
        plain, inst = med[(kind, "plain")], med[(kind, "instrumented")]
        print(f"  {label:<28} {plain:9.1f} {inst:13.1f} {inst - plain:9.1f} {inst / plain:6.2f}")
    per_chunk = ((med[("stream201", "instrumented")] - med[("stream201", "plain")])
                 - (med[("stream1", "instrumented")] - med[("stream1", "plain")])) / 200  # fmt: skip
    added = med[("call", "instrumented")] - med[("call", "plain")]
    floor_added = med[("call", "floor")] - med[("call", "plain")]
    print(f"  added per streamed chunk: {per_chunk:.2f} us (target <= 1 us)")
    print(f"  added per non-streamed call: {added:.1f} us (target <= 40 us)")
    print(f"    of which the SDK floor (span + 4 histogram points, nothing of ours): "
          f"{floor_added:.1f} us")  # fmt: skip
    print(f"    of which otel_tokens's own work beyond that floor: {added - floor_added:.1f} us")
    if other is not None:
        def added_by(kind: str) -> float:
            return med[(kind, "official")] - med[(kind, "plain")]

        print(f"  official opentelemetry-instrumentation-openai-v2 {other[0]}, same run: "
              f"{added_by('call'):.1f} us per call (ratio "
              f"{med[('call', 'official')] / med[('call', 'plain')]:.2f}), "
              f"{(added_by('stream201') - added_by('stream1')) / 200:.2f} us per chunk")


if __name__ == "__main__":
    main()
