"""Memory retained per distinct model name (a gateway forwarding client-chosen names).

Two processes make the same instrumented chat calls through the real ``openai`` client
(mock transport, ``configure()`` + ``instrument()``): one with a new model name on every call,
one with a single name. Retained memory (``tracemalloc`` after a collection) is read at
checkpoints; per distinct name = (distinct - single) / names between two checkpoints past the
first few thousand names, so what every call keeps anyway (ledger history) cancels out. The
target: at most 400 bytes per further name. Run by hand (~2 min):
    python benchmarks/names_memory.py [--names 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHECKPOINTS = (2_000, 5_000, 10_000, 15_000, 20_000)


def worker(distinct: bool, names: int) -> None:
    import gc
    import importlib
    import tracemalloc

    os.environ.setdefault("OTEL_TRACES_EXPORTER", "none")
    os.environ.setdefault("OTEL_METRICS_EXPORTER", "none")
    import openai

    import otel_tokens

    base = importlib.import_module("openai._base_client")
    http = importlib.import_module("httpx2" if hasattr(base, "httpx2") else "httpx")

    def answer(request):  # type: ignore[no-untyped-def]
        model = json.loads(request.content)["model"]
        return http.Response(200, json={
            "id": "c", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}})  # fmt: skip

    otel_tokens.configure()
    otel_tokens.instrument()
    client = openai.OpenAI(api_key="k", max_retries=0, http_client=http.Client(transport=http.MockTransport(answer)))
    messages = [{"role": "user", "content": "hello"}]
    marks = {}
    tracemalloc.start()
    for i in range(names):
        model = f"client-chosen-model-{i:06d}" if distinct else "client-chosen-model"
        client.chat.completions.create(model=model, messages=messages)
        if i + 1 in CHECKPOINTS:
            gc.collect()
            marks[i + 1] = tracemalloc.get_traced_memory()[0]
    print(json.dumps(marks))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", choices=("distinct", "single"), help=argparse.SUPPRESS)
    parser.add_argument("--names", type=int, default=20_000)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker == "distinct", args.names)
        return
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_TOKENS_PROMETHEUS_PORT"] = "0"
    runs = {}
    for kind in ("distinct", "single"):
        out = subprocess.run([sys.executable, __file__, "--worker", kind, "--names", str(args.names)],
                             capture_output=True, text=True, env=env, check=True)  # fmt: skip
        runs[kind] = {int(k): v for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items()}
    points = [n for n in CHECKPOINTS if n <= args.names]
    print(f"retained memory per distinct model name ({args.names:,} names; tracemalloc, "
          "distinct-name run minus single-name run)")
    for a, b in zip(points, points[1:]):
        extra = (runs["distinct"][b] - runs["single"][b]) - (runs["distinct"][a] - runs["single"][a])
        print(f"  names {a:>6,} -> {b:>6,}: {extra / (b - a):7.0f} B per name")


if __name__ == "__main__":
    main()
