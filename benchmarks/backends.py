"""Per-call overhead of otel_tokens on the other backends, against the same call uninstrumented.

Each backend's real client answers in process, without a network: google-genai through an
httpx mock transport speaking the Gemini REST format, boto3's ``bedrock-runtime`` through
botocore's own ``Stubber`` (the call still runs ``_make_api_call``), litellm with its
``mock_response`` (its whole ``completion`` path, no HTTP). The OpenTelemetry SDK is set up as
an application would have it (batch span processor exporting nowhere, a metric reader).
Variants run interleaved, round after round (instrumented, then not), and the median per-call
times are compared, so machine noise moves both alike. Run by hand:
    python benchmarks/backends.py [--calls 300] [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import time
from typing import Any, Callable

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OTEL_TOKENS_PROMETHEUS_PORT", "0")

GEMINI = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hi."}]}, "finishReason": "STOP"}],
          "modelVersion": "gemini-2.5-flash", "responseId": "r1",
          "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 3, "totalTokenCount": 15}}  # fmt: skip


def _sdk() -> None:
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter(), schedule_delay_millis=3_600_000))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))


def gemini() -> Callable[[], Any]:
    import httpx
    from google import genai
    from google.genai import types

    http = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(200, json=GEMINI)))
    client = genai.Client(api_key="k", http_options=types.HttpOptions(httpx_client=http))
    return lambda: client.models.generate_content(model="gemini-2.5-flash", contents="Say hi.")


def bedrock() -> Callable[[], Any]:
    import boto3
    from botocore.stub import Stubber

    client = boto3.client("bedrock-runtime", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="k")
    stubber = Stubber(client)
    stubber.activate()
    answer = {"output": {"message": {"role": "assistant", "content": [{"text": "Hi."}]}}, "stopReason": "end_turn",
              "usage": {"inputTokens": 12, "outputTokens": 3, "totalTokens": 15}, "metrics": {"latencyMs": 1}}  # fmt: skip
    messages = [{"role": "user", "content": [{"text": "Say hi."}]}]

    def call() -> Any:
        stubber.add_response("converse", answer)
        return client.converse(modelId="anthropic.claude-3-haiku-20240307-v1:0", messages=messages)

    return call


def litellm() -> Callable[[], Any]:
    import litellm as lib

    messages = [{"role": "user", "content": "Say hi."}]
    return lambda: lib.completion(model="gpt-4o-mini", messages=messages, mock_response="Hi.")


BACKENDS = {"google-genai generate_content": gemini, "bedrock converse": bedrock, "litellm completion": litellm}


def _time(call: Callable[[], Any], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        call()
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    _sdk()
    import otel_tokens

    calls = {name: make() for name, make in BACKENDS.items()}
    for call in calls.values():  # warm both paths (imports, price data, the estimator)
        otel_tokens.instrument()
        _time(call, 30)
        otel_tokens.uninstrument()
        _time(call, 30)
    time.sleep(1.0)
    times: dict[str, dict[str, list[float]]] = {n: {"bare": [], "otel_tokens": []} for n in calls}
    for _ in range(args.rounds):
        for name, call in calls.items():
            otel_tokens.instrument()
            times[name]["otel_tokens"].append(_time(call, args.calls))
            otel_tokens.uninstrument()
            times[name]["bare"].append(_time(call, args.calls))
    result = {}
    print(f"per call, median of {args.rounds} interleaved rounds of {args.calls} calls")
    for name, t in times.items():
        bare, ours = statistics.median(t["bare"]), statistics.median(t["otel_tokens"])
        result[name] = {"bare_us": round(bare, 1), "otel_tokens_us": round(ours, 1), "added_us": round(ours - bare, 1)}
        print(f"  {name:32s} bare {bare:8.1f} us   instrumented {ours:8.1f} us   added {ours - bare:7.1f} us")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
