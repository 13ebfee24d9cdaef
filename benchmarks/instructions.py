"""Instructions each instrumentation adds per call, counted by callgrind (noise-free).

One ``openai`` chat call through the real client against a mock transport, with the same
OpenTelemetry SDK set-up for every variant: global tracer and meter providers, a batch span
processor (exporting nowhere) and a periodic metric reader. Per call = (I(n2) - I(n1)) /
(n2 - n1) for each variant, minus the same for the bare client; start-up and warm-up cancel
out. Variants:

* ``bare``: the client, no instrumentation;
* ``otel_tokens``: ``otel_tokens.instrument()`` (spans, metrics, cost, TokenState, ledger,
  pre-call estimate, anomaly checks);
* ``floor``: a bare wrapper making the SDK do only what our telemetry contract asks of it per
  call (our span with our attributes, made current around the call, and our histogram
  points, those of duration and tokens in the span's context, which the SDK samples as
  exemplars), nothing of
  otel_tokens: ``otel_tokens - floor`` is otel_tokens' own Python; ``--floor-parts`` also
  runs the floor without one of its parts (the points' exemplars, the fourth point, 12 of the
  span's 16 end attributes) to say what each costs in the SDK;
* ``official``: ``opentelemetry-instrumentation-openai-v2`` (with ``opentelemetry-util-genai``),
  when importable by ``--official-python`` (default: this interpreter). It needs a venv of its
  own next to otel_tokens: ``pip install -e . opentelemetry-instrumentation-openai-v2
  'opentelemetry-util-genai==1.1b0' httpx`` (2.4b0 imports with util-genai <= 1.1b0);
* ``openllmetry``: OpenLLMetry's ``opentelemetry-instrumentation-openai``, when importable by
  ``--openllmetry-python`` (the same venv serves: ``.ci/run``'s ``.venv-coexist``);
* ``openlit``: ``openlit.init()`` on the same providers (its defaults: message content
  recorded; its log events off), prices from a local file (it fetches them otherwise), when
  importable by ``--openlit-python``. A venv of its own: ``pip install openlit==1.45.0
  opentelemetry-sdk==1.45.1 httpx``, then this venv's openai (3.57.0) and OpenTelemetry
  (SDK 1.45.2, ``opentelemetry-instrumentation`` and semantic conventions 0.66b2) over it:
  1.45.0 asks for openai < 3, and nine of the instrumentations it pulls in have no 0.66b2
  release. pip warns; its openai instrumentation records the call (span, tokens, cost);
* ``--http``: ``no_http`` (``instrument()`` without the HTTP layer) and ``http_layer`` (the
  HTTP layer alone: the call recorded from the bytes by its wire format, as a client no SDK
  capture covers is), each reported per call and per chunk, beside the official's per chunk.

Every worker runs with the cyclic garbage collector off from its start (collected once, on
the thread making the calls, after the warm-up): a collection falls where allocations pass its
threshold, and with otel_tokens' background warm-up (price data, tokenizer) allocating beside
the calling thread, where and on which thread that is moved from run to run. Off only for the
counted calls, the same worker varied by ~9 M instructions between runs on the calling thread
alone (nearly all of it `gc_collect_main` and its traversals during the warm-up), up to ~100 k
per call between two runs of 20 and 120 calls; off from the start, ~1 M (~5-20 k per call). Each
figure is the mean over ``--seeds`` hash seeds (``PYTHONHASHSEED``: dict and set layouts
move a few thousand instructions). Streams: a 1-chunk and a 201-chunk stream give the cost per
stream and per chunk. ``--calling-thread`` counts the thread making the calls alone: per
chunk, the SDK's exporter and reader threads move the process-wide count between runs of the
same code by more than the figure itself (a stream ends one span, so their work per chunk is
none). Run by hand (needs valgrind; ~15 min):
    python benchmarks/instructions.py [--official-python PY] [--openllmetry-python PY]
                                      [--openlit-python PY] [--kinds call,stream1,stream201]
                                      [--calling-thread] [--seeds 1,2] [--calls 20,120]
                                      [--http] [--variants http_layer,official]
"""

from __future__ import annotations

import argparse
import gc
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KINDS = {"call": "non-streamed call", "stream1": "1-chunk stream", "stream201": "201-chunk stream"}

COMPLETION = {
    "id": "chatcmpl-bench", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini-2024-07-18",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "This is a test."},
                 "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17,
              "prompt_tokens_details": {"cached_tokens": 0},
              "completion_tokens_details": {"reasoning_tokens": 0}},
}  # fmt: skip


def _sse(chunks: int) -> bytes:
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


# -- the worker: runs under callgrind ----------------------------------------------------------
def _sdk() -> tuple:
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Null(SpanExporter):
        last = None

        def export(self, spans):  # type: ignore[no-untyped-def]
            Null.last = spans[-1] if spans else Null.last
            return SpanExportResult.SUCCESS

    tp = TracerProvider()
    tp.add_span_processor(BatchSpanProcessor(Null(), schedule_delay_millis=3_600_000))
    reader = PeriodicExportingMetricReader(ConsoleMetricExporter(out=open(os.devnull, "w")),
                                           export_interval_millis=3_600_000)  # fmt: skip
    views = []
    try:
        from otel_tokens.emit.instruments import views as our_views

        views = our_views()
    except ImportError:
        pass
    mp = MeterProvider(metric_readers=[reader], views=views)
    trace.set_tracer_provider(tp)
    metrics.set_meter_provider(mp)
    return tp, mp, Null


def _client():  # type: ignore[no-untyped-def]
    import importlib

    import openai

    base = importlib.import_module("openai._base_client")
    http = importlib.import_module("httpx2" if hasattr(base, "httpx2") else "httpx")
    bodies = {1: _sse(1), 201: _sse(201)}
    completion = json.dumps(COMPLETION).encode()

    def answer(request):  # type: ignore[no-untyped-def]
        payload = json.loads(request.content)
        if payload.get("stream"):
            n = 201 if payload["messages"][0]["content"] == "long" else 1
            return http.Response(200, headers={"content-type": "text/event-stream"}, content=bodies[n])
        return http.Response(200, headers={"content-type": "application/json"}, content=completion)

    return openai.OpenAI(api_key="bench", max_retries=0,
                         http_client=http.Client(transport=http.MockTransport(answer)))  # fmt: skip


def _run(client, kind: str, n: int) -> None:  # type: ignore[no-untyped-def]
    for _ in range(n):
        if kind == "call":
            client.chat.completions.create(model="gpt-4o-mini",
                                           messages=[{"role": "user", "content": "Say this is a test"}])
        else:
            for _chunk in client.chat.completions.create(
                model="gpt-4o-mini", stream=True, stream_options={"include_usage": True},
                messages=[{"role": "user", "content": "long" if kind == "stream201" else "short"}],
            ):  # fmt: skip
                pass


#: the floor without one of its parts (``--floor-parts``): variant -> the part left out
FLOOR_PARTS = {"floor-exemplars": "the points' exemplars (recorded outside the span's context)",
               "floor-4th-point": "the fourth histogram point (the estimate's error)",
               "floor-attributes": "12 of the span's 16 attributes set at its end"}  # fmt: skip


def _floor(tp, mp, null, client, without=None):  # type: ignore[no-untyped-def]
    """Install the SDK-floor wrapper: our span and histogram points, nothing of ours
    (``without``: a :data:`FLOOR_PARTS` variant, the floor without that part)."""
    import openai
    import wrapt
    from opentelemetry import context, trace

    import otel_tokens
    from otel_tokens.emit import instruments as names

    otel_tokens.instrument()
    _run(client, "call", 1)
    otel_tokens.uninstrument()
    tp.force_flush()
    span = null.last
    attributes = dict(span.attributes)
    start = {k: attributes.pop(k) for k in list(attributes)[:9]}  # given at start, the rest at end
    common = {k: v for k, v in {**start, **attributes}.items() if k in (
        names.OPERATION, names.PROVIDER, names.AGENT_NAME, names.REQUEST_MODEL,
        names.RESPONSE_MODEL, names.SERVER_ADDRESS)}  # fmt: skip
    meter = mp.get_meter("floor")
    duration = meter.create_histogram(names.OPERATION_DURATION)
    tokens = meter.create_histogram(names.TOKEN_USAGE)
    error = meter.create_histogram(names.ESTIMATE_ERROR_METRIC)
    tracer = tp.get_tracer("floor")
    by_type = {kind: {**common, names.TOKEN_TYPE: kind} for kind in ("input", "output")}
    error_attrs = {**common, names.ESTIMATE_SOURCE: "exact"}
    if without == "floor-attributes":
        attributes = dict(list(attributes.items())[:4])
    in_span = without != "floor-exemplars"
    fourth = without != "floor-4th-point"

    def wrapper(wrapped, instance, args, kwargs):  # type: ignore[no-untyped-def]
        began = time.perf_counter()
        s = tracer.start_span(span.name, kind=trace.SpanKind.CLIENT, attributes=start)
        current = trace.set_span_in_context(s)
        token = context.attach(current)
        try:
            result = wrapped(*args, **kwargs)
        finally:
            context.detach(token)
        s.set_attributes(attributes)
        # in the span's context, as otel_tokens records them: the SDK samples the call's
        # trace id onto the duration and token points (exemplars, on by default)
        at = current if in_span else None
        duration.record(time.perf_counter() - began, common, context=at)
        tokens.record(result.usage.prompt_tokens, by_type["input"], context=at)
        tokens.record(result.usage.completion_tokens, by_type["output"], context=at)
        if fourth:  # outside the span's context, as otel_tokens records it (no exemplar)
            error.record(0.1, error_attrs)
        s.end()
        return result

    wrapt.wrap_function_wrapper(openai.resources.chat.completions.Completions, "create", wrapper)


def settle() -> None:
    """Wait until otel_tokens' background warm-up (price data, tiktoken encodings) is over,
    then collect once on the calling thread (the workers run with the collector off).

    A fixed pause is not enough under callgrind, which runs ~50x slower: loading an encoding
    then ran on into the counted calls of one run or another, a lump of up to ~1 M
    instructions per call in the figures."""
    import threading

    time.sleep(1.0)
    for thread in threading.enumerate():
        if thread.name.startswith("otel_tokens-") and thread is not threading.current_thread():
            thread.join()
    gc.collect()


#: ``--http``: ``instrument()`` without the HTTP layer (what it adds beneath an SDK call is
#: otel_tokens - no_http), and the HTTP layer alone (the call recorded by its wire format)
HTTP_VARIANTS = ("no_http", "http_layer")


def _http_variant(variant: str) -> None:
    import otel_tokens
    from otel_tokens import registry

    if variant == "no_http":
        otel_tokens.instrument()
        registry.disable("http")
    else:
        registry.enable("http")


def worker(variant: str, kind: str, n: int) -> None:
    """``n`` calls of ``kind`` after a warm-up, in this process (run under callgrind)."""
    gc.disable()  # from the start, not only for the counted calls: see the module docstring
    sys.path.insert(0, ROOT)
    os.environ.setdefault("OTEL_TOKENS_PROMETHEUS_PORT", "0")
    tp, mp, null = _sdk()
    client = _client()
    if variant == "otel_tokens":
        import otel_tokens

        otel_tokens.instrument()
    elif variant in HTTP_VARIANTS:
        _http_variant(variant)
    elif variant == "official":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        OpenAIInstrumentor().instrument()
    elif variant == "openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor as OpenLLMetry

        OpenLLMetry().instrument()
    elif variant == "openlit":
        _openlit()
    elif variant == "floor" or variant in FLOOR_PARTS:
        _floor(tp, mp, null, client, variant if variant in FLOOR_PARTS else None)
    _run(client, kind, 30)
    settle()  # the background warm-up (price data, tokenizer) is over before counting
    _run(client, kind, n)


def _openlit() -> None:
    """``openlit.init()`` on the global providers (1.45 finds them itself), its prices from a
    local file, its log events off (with no logger provider set it would print them)."""
    import tempfile

    import openlit

    prices = {"chat": {"gpt-4o-mini": {"promptPrice": 0.00015, "completionPrice": 0.0006},
                       "gpt-4o-mini-2024-07-18": {"promptPrice": 0.00015, "completionPrice": 0.0006}},
              "embeddings": {}, "images": {}, "audio": {}}  # fmt: skip
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
        json.dump(prices, file)
    openlit.init(pricing_json=file.name, disable_events=True)


# -- the driver --------------------------------------------------------------------------------
def instructions(python: str, variant: str, kind: str, n: int, seed: int,
                 calling_thread: bool = False) -> int:
    """Instructions of one worker run; ``calling_thread``: of the thread making the calls alone
    (callgrind's ``--separate-threads``), without the SDK's exporter and reader threads."""
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    for name in list(env):
        if name.startswith("OTEL_"):
            del env[name]
    with tempfile.TemporaryDirectory() as folder:
        where = os.path.join(folder, "cg") if calling_thread else "/dev/null"
        out = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={where}",
             *(["--separate-threads=yes"] if calling_thread else []), python, __file__,
             "--worker", variant, kind, str(n)],
            capture_output=True, text=True, env=env, check=False,
        )  # fmt: skip
        if calling_thread:  # the main thread's file ends in -01
            main = glob.glob(os.path.join(folder, "cg*-01"))
            text = open(main[0]).read() if main else ""
            found = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
        else:
            found = re.search(r"Collected : (\d+)", out.stderr)
    if out.returncode != 0 or found is None:
        raise RuntimeError(f"{variant} {kind} {n}: {out.stderr[-2000:]}")
    return int(found.group(1))


def per_call(python: str, variant: str, kind: str, calls: tuple[int, int], seeds: list[int],
             calling_thread: bool = False) -> float:  # fmt: skip
    n1, n2 = calls
    values = [(instructions(python, variant, kind, n2, s, calling_thread)
               - instructions(python, variant, kind, n1, s, calling_thread))
              / (n2 - n1) for s in seeds]  # fmt: skip
    return statistics.mean(values)


#: the other instrumentations: variant -> the module its interpreter must import
OTHERS = {"official": "opentelemetry.instrumentation.openai_v2",
          "openllmetry": "opentelemetry.instrumentation.openai", "openlit": "openlit"}  # fmt: skip


def _available(python: str, module: str) -> bool:
    probe = subprocess.run([python, "-c", f"import {module}"], capture_output=True, check=False)
    return probe.returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", nargs=3, metavar=("VARIANT", "KIND", "N"), help=argparse.SUPPRESS)
    parser.add_argument("--official-python", default=sys.executable)
    parser.add_argument("--openllmetry-python", default=sys.executable)
    parser.add_argument("--openlit-python", default=sys.executable)
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--calls", default="20,120", help="n1,n2 non-streamed calls (streams: the same)")
    parser.add_argument("--no-streams", action="store_true")
    parser.add_argument("--floor-parts", action="store_true",
                        help="also the SDK floor without each of its parts (what each costs)")
    parser.add_argument("--kinds", default=",".join(KINDS), help="of " + ", ".join(KINDS))
    parser.add_argument("--http", action="store_true",
                        help="also instrument() without the HTTP layer, and the HTTP layer alone")
    parser.add_argument("--variants", default="",
                        help="only these variants (comma-separated; bare is always run)")
    parser.add_argument("--calling-thread", action="store_true",
                        help="count the thread making the calls alone (per chunk: the SDK's "
                             "threads' run-to-run noise is above the figure)")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], args.worker[1], int(args.worker[2]))
        return
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    seeds = [int(s) for s in args.seeds.split(",")]
    calls = tuple(int(c) for c in args.calls.split(","))
    pythons = {"bare": sys.executable, "otel_tokens": sys.executable, "floor": sys.executable,
               **({part: sys.executable for part in FLOOR_PARTS} if args.floor_parts else {})}
    if args.http:
        pythons.update({variant: sys.executable for variant in HTTP_VARIANTS})
    for variant, module in OTHERS.items():
        python = getattr(args, f"{variant}_python")
        if _available(python, module):
            pythons[variant] = python
    if args.variants:
        keep = {"bare", *args.variants.split(",")}
        pythons = {variant: python for variant, python in pythons.items() if variant in keep}
    kinds = ["call"] if args.no_streams else [k for k in args.kinds.split(",") if k in KINDS]
    started = time.monotonic()
    table: dict[tuple[str, str], float] = {}
    for kind in kinds:
        for variant, python in pythons.items():
            if (variant == "floor" or variant in FLOOR_PARTS) and kind != "call":
                continue
            table[(variant, kind)] = per_call(python, variant, kind, calls, seeds,  # type: ignore[arg-type]
                                              args.calling_thread)
    report(table, pythons, kinds, seeds, calls, time.monotonic() - started,  # type: ignore[arg-type]
           args.calling_thread)


def report(table: dict[tuple[str, str], float], pythons: dict[str, str], kinds: list[str],
           seeds: list[int], calls: tuple[int, int], seconds: float,
           calling_thread: bool = False) -> None:  # fmt: skip
    def added(variant: str, kind: str) -> float:
        return table[(variant, kind)] - table[("bare", kind)]

    print(f"instructions added (callgrind; per call = (I({calls[1]}) - I({calls[0]})) / "
          f"{calls[1] - calls[0]}, mean of seeds {seeds}; bare {KINDS[kinds[0]]} "
          f"{table[('bare', kinds[0])]:,.0f}{'; the calling thread alone' if calling_thread else ''})")
    for kind in kinds:
        if ("otel_tokens", kind) not in table:  # --variants without otel_tokens: the others alone
            others = [f"{v} {added(v, kind):>10,.0f}" for v in OTHERS if (v, kind) in table]
            if others:
                print(f"  {KINDS[kind]:<18} " + "   ".join(others))
            continue
        ours = added("otel_tokens", kind)
        line = f"  {KINDS[kind]:<18} otel_tokens {ours:>10,.0f}"
        if "official" in pythons:
            theirs = added("official", kind)
            line += f"   official {theirs:>10,.0f}   ratio {ours / theirs:5.2f}"
        for other in ("openllmetry", "openlit"):
            if (other, kind) in table:
                line += f"   {other} {added(other, kind):>10,.0f}"
        print(line)
    if "stream1" in kinds and ("otel_tokens", "stream201") in table:
        chunk = {v: (added(v, "stream201") - added(v, "stream1")) / 200
                 for v in pythons if (v, "stream201") in table}  # fmt: skip
        line = f"  {'per chunk':<18} otel_tokens {chunk['otel_tokens']:>10,.0f}"
        if "official" in chunk:
            line += f"   official {chunk['official']:>10,.0f}   ratio {chunk['otel_tokens'] / chunk['official']:5.2f}"
        for other in ("openllmetry", "openlit"):
            if other in chunk:
                line += f"   {other} {chunk[other]:>10,.0f}"
        print(line)
    _report_http(table, kinds, added)
    if ("floor", "call") in table:
        floor = added("floor", "call")
        print(f"  of otel_tokens' non-streamed call: the SDK floor {floor:,.0f}, "
              f"otel_tokens' own Python {added('otel_tokens', 'call') - floor:,.0f}")
        for part, what in FLOOR_PARTS.items():
            if (part, "call") in table:
                print(f"    of the floor: {floor - added(part, 'call'):>8,.0f} {what}")
    print(f"  ({seconds:.0f} s)")


def _report_http(table: dict[tuple[str, str], float], kinds: list[str], added: Any) -> None:
    """The HTTP variants' figures per call and per chunk, beside the official's."""
    for variant in HTTP_VARIANTS:
        if (variant, kinds[0]) not in table:
            continue
        figures = ", ".join(f"{KINDS[k]} {added(variant, k):,.0f}" for k in kinds)
        if "stream1" in kinds and "stream201" in kinds:
            chunk = (added(variant, "stream201") - added(variant, "stream1")) / 200
            figures += f", per chunk {chunk:,.0f}"
            if ("official", "stream201") in table:
                theirs = (added("official", "stream201") - added("official", "stream1")) / 200
                figures += f" (official {theirs:,.0f}, ratio {chunk / theirs:.2f})"
        print(f"  {variant}: {figures}")


if __name__ == "__main__":
    main()
