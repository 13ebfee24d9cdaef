"""Soak: a million instrumented calls in one process, memory flat, no thread or fd growth,
ledger totals exact.

Real ``openai`` and ``anthropic`` clients on a mock transport (no network), instrumented by
otel_tokens, on an SDK set up as an application would have it (a batch span processor
exporting to a counting no-op exporter, a metric reader). Calls rotate over four kinds
(OpenAI chat, OpenAI chat streamed with usage, Anthropic messages, Anthropic messages
streamed) and four agents; every response carries known usage, so each agent's ledger
totals and turn count must come out exact.

Reported: resident memory (MB) after warm-up, at 100k calls and at the end; threads and
open file descriptors at the start and the end; calls per second; faults counted.

Run by hand (not by CI; tests/reliability/test_soak_smoke.py runs a small one):

    python benchmarks/soak.py                 # 1,000,000 calls (tens of minutes)
    python benchmarks/soak.py --calls 20000   # a quick run
    python benchmarks/soak.py --json          # the summary as one JSON line at the end
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pathlib
import sys
import threading
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

AGENTS = ("planner", "coder", "reviewer", "tester")

OPENAI_CHAT = {
    "id": "chatcmpl-soak", "object": "chat.completion", "created": 1700000000,
    "model": "gpt-4o-2024-08-06",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18,
              "prompt_tokens_details": {"cached_tokens": 3}},
}  # fmt: skip


def _sse_openai() -> str:
    base = {"id": "chatcmpl-soak-s", "object": "chat.completion.chunk", "created": 1700000000,
            "model": "gpt-4o-2024-08-06"}  # fmt: skip
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop"}]},
        {**base, "choices": [], "usage": {"prompt_tokens": 13, "completion_tokens": 5, "total_tokens": 18}},
    ]
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"


ANTHROPIC_MESSAGE = {
    "id": "msg_soak", "type": "message", "role": "assistant", "model": "claude-3-5-sonnet-20241022",
    "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "stop_sequence": None,
    "usage": {"input_tokens": 17, "output_tokens": 9, "cache_read_input_tokens": 4,
              "cache_creation_input_tokens": 0},
}  # fmt: skip


def _sse_anthropic() -> str:
    events = [
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_soak_s", "type": "message", "role": "assistant",
            "model": "claude-3-5-sonnet-20241022", "content": [], "stop_reason": None,
            "stop_sequence": None, "usage": {"input_tokens": 19, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "Hi"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn",
                           "stop_sequence": None}, "usage": {"output_tokens": 3}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)


#: kind -> (input tokens, output tokens) each call of that kind must add to its agent's ledger
EXPECTED = {
    "openai": (11, 7),
    "openai_stream": (13, 5),
    "anthropic": (21, 9),  # 17 fresh + 4 cache reads: input is inclusive
    "anthropic_stream": (19, 3),
}
KINDS = tuple(EXPECTED)


def rss_mb() -> float:
    try:
        with open("/proc/self/statm") as handle:
            pages = int(handle.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 1e6
    except OSError:  # not Linux: peak RSS is the best available
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / (1e6 if sys.platform == "darwin" else 1e3)


def open_fds() -> int:
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(folder))
        except OSError:
            continue
    return -1


def os_threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


class CountingExporter:
    """A span exporter that only counts (the network is not what is soaked here)."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _transport(sdk: str, plain: bytes, stream: bytes) -> Any:
    from tests.sdk.replay import http_module

    http = http_module(sdk)
    json_headers = {"content-type": "application/json"}
    sse_headers = {"content-type": "text/event-stream"}

    def handler(request: Any) -> Any:
        if b'"stream":true' in request.content or b'"stream": true' in request.content:
            return http.Response(200, headers=sse_headers, content=stream)
        return http.Response(200, headers=json_headers, content=plain)

    return http.Client(transport=http.MockTransport(handler))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--warmup", type=int, default=None, help="calls before the baseline (default: 2%%, at most 20k)")
    parser.add_argument("--every", type=int, default=100_000, help="progress line every N calls")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON line")
    args = parser.parse_args(argv)
    calls = args.calls
    warmup = args.warmup if args.warmup is not None else min(20_000, max(len(KINDS) * len(AGENTS), calls // 50))

    import anthropic
    import openai
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    import otel_tokens
    from otel_tokens import AnomalyGuard, Handler, Pricer
    from otel_tokens.capture.sdk import anthropic as anthropic_sdk
    from otel_tokens.capture.sdk import openai as openai_sdk
    from otel_tokens.emit.instruments import views
    from otel_tokens.handler import set_handler

    exporter = CountingExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader], views=views())
    handler = Handler(tracer_provider, meter_provider, pricer=Pricer(), guard=AnomalyGuard())
    set_handler(handler)
    openai_sdk.install()
    anthropic_sdk.install()

    oa = openai.OpenAI(api_key="soak", max_retries=0, http_client=_transport(
        "openai", json.dumps(OPENAI_CHAT).encode(), _sse_openai().encode()))
    an = anthropic.Anthropic(api_key="soak", max_retries=0, http_client=_transport(
        "anthropic", json.dumps(ANTHROPIC_MESSAGE).encode(), _sse_anthropic().encode()))
    messages = [{"role": "user", "content": "Summarize the build log in one line."}]
    entries = {name: otel_tokens.agent(name) for name in AGENTS}
    counts = {name: dict.fromkeys(KINDS, 0) for name in AGENTS}

    def one(i: int) -> None:
        agent = AGENTS[i % len(AGENTS)]
        kind = KINDS[(i // len(AGENTS)) % len(KINDS)]
        with entries[agent]:
            if kind == "openai":
                oa.chat.completions.create(model="gpt-4o", messages=messages)
            elif kind == "openai_stream":
                for _ in oa.chat.completions.create(model="gpt-4o", messages=messages, stream=True,
                                                    stream_options={"include_usage": True}):  # fmt: skip
                    pass
            elif kind == "anthropic":
                an.messages.create(model="claude-3-5-sonnet-20241022", max_tokens=64, messages=messages)
            else:
                for _ in an.messages.create(model="claude-3-5-sonnet-20241022", max_tokens=64,
                                            messages=messages, stream=True):  # fmt: skip
                    pass
        counts[agent][kind] += 1

    def say(text: str) -> None:
        if not args.json:
            print(text, flush=True)

    for i in range(warmup):
        one(i)
    gc.collect()
    base = {"rss_mb": rss_mb(), "threads": threading.active_count(), "os_threads": os_threads(),
            "fds": open_fds()}  # fmt: skip
    say(f"after {warmup:,} warm-up calls: {base['rss_mb']:.1f} MB, {base['threads']} threads, "
        f"{base['fds']} fds")
    marks: dict[str, float] = {}
    start = time.perf_counter()
    for i in range(warmup, warmup + calls):
        one(i)
        done = i - warmup + 1
        if done % args.every == 0 or done == calls:
            gc.collect()
            rss = rss_mb()
            marks[str(done)] = round(rss, 1)
            rate = done / (time.perf_counter() - start)
            say(f"{done:>9,} calls: {rss:7.1f} MB  {threading.active_count()} threads  "
                f"{open_fds()} fds  {rate:,.0f} calls/s")
    elapsed = time.perf_counter() - start
    tracer_provider.force_flush()
    gc.collect()

    # exact totals: every agent's ledger and token state against what its calls reported
    totals: dict[str, Any] = {}
    exact = True
    for name in AGENTS:
        entry = next(e for e in otel_tokens.agents() if e.name == name)
        n = sum(counts[name].values())
        want_in = sum(counts[name][k] * EXPECTED[k][0] for k in KINDS)
        want_out = sum(counts[name][k] * EXPECTED[k][1] for k in KINDS)
        cum = entry.ledger.cumulative
        got = {"requests": cum.requests, "input_tokens": cum.input_tokens,
               "output_tokens": cum.output_tokens, "turns": entry.state.turn_count,
               "total_output_tokens": entry.state.total_output_tokens}  # fmt: skip
        want = {"requests": n, "input_tokens": want_in, "output_tokens": want_out, "turns": n,
                "total_output_tokens": want_out}  # fmt: skip
        totals[name] = {"got": got, "want": want}
        exact = exact and got == want
    end = {"rss_mb": rss_mb(), "threads": threading.active_count(), "os_threads": os_threads(),
           "fds": open_fds()}  # fmt: skip
    summary = {
        "calls": calls, "warmup": warmup, "seconds": round(elapsed, 1),
        "calls_per_second": round(calls / elapsed) if elapsed else None,
        "rss_mb": {"after_warmup": round(base["rss_mb"], 1), **marks},
        "rss_growth_mb": round(end["rss_mb"] - base["rss_mb"], 1),
        "threads": {"start": base["threads"], "end": end["threads"]},
        "os_threads": {"start": base["os_threads"], "end": end["os_threads"]},
        "fds": {"start": base["fds"], "end": end["fds"]},
        "spans_exported": exporter.spans,
        "faults": dict(handler.faults.counts),
        "totals_exact": exact, "totals": totals,
        "openai": openai.__version__, "anthropic": anthropic.__version__,
    }  # fmt: skip
    openai_sdk.uninstall()
    anthropic_sdk.uninstall()
    if args.json:
        print(json.dumps(summary))
    else:
        say(json.dumps(summary, indent=2))
    return summary


if __name__ == "__main__":
    result = main()
    sys.exit(0 if result["totals_exact"] else 1)
