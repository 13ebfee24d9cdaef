"""Memory retained per distinct agent name, and file descriptors held, with and without a
ledger file (agent names made at run time: one per user, task or framework node).

Two processes make the same instrumented chat calls through the real ``openai`` client
(mock transport, ``configure()`` + ``instrument()``): one under a new ``agent(...)`` name on
every call, one under a single name. Retained memory (``tracemalloc`` after a collection) is
read at checkpoints; per distinct agent = (distinct - single) / agents between two
checkpoints, so what every call keeps anyway (ledger rows) cancels out. Open file
descriptors are counted at the end. The target: at most 1 kB per further agent past 5,000
agents, and a handful of descriptors whatever the number of agents. Run by hand (~2 min):
    python benchmarks/agents_memory.py [--agents 10000] [--ledger]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHECKPOINTS = (1_000, 2_000, 5_000, 7_500, 10_000, 15_000, 20_000)


def worker(distinct: bool, agents: int) -> None:
    import gc
    import importlib
    import tracemalloc

    import openai

    import otel_tokens

    base = importlib.import_module("openai._base_client")
    http = importlib.import_module("httpx2" if hasattr(base, "httpx2") else "httpx")

    def answer(request):  # type: ignore[no-untyped-def]
        return http.Response(200, json={
            "id": "c", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}})  # fmt: skip

    otel_tokens.configure()
    otel_tokens.instrument()
    client = openai.OpenAI(api_key="k", max_retries=0, http_client=http.Client(transport=http.MockTransport(answer)))
    messages = [{"role": "user", "content": "hello"}]
    marks = {}
    tracemalloc.start()
    for i in range(agents):
        with otel_tokens.agent(f"user-task-agent-{i:06d}" if distinct else "user-task-agent"):
            client.chat.completions.create(model="gpt-4o-mini", messages=messages)
        if i + 1 in CHECKPOINTS:
            gc.collect()
            marks[i + 1] = tracemalloc.get_traced_memory()[0]
    fds = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else -1
    print(json.dumps({"marks": marks, "fds": fds}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", choices=("distinct", "single"), help=argparse.SUPPRESS)
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--ledger", action="store_true", help="with OTEL_TOKENS_LEDGER_PATH set")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker == "distinct", args.agents)
        return
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(OTEL_TRACES_EXPORTER="none", OTEL_METRICS_EXPORTER="none")
    runs, fds = {}, {}
    with tempfile.TemporaryDirectory() as folder:
        for kind in ("distinct", "single"):
            if args.ledger:
                env["OTEL_TOKENS_LEDGER_PATH"] = os.path.join(folder, f"{kind}.db")
            out = subprocess.run([sys.executable, __file__, "--worker", kind, "--agents", str(args.agents)],
                                 capture_output=True, text=True, env=env, check=True)  # fmt: skip
            result = json.loads(out.stdout.strip().splitlines()[-1])
            runs[kind] = {int(k): v for k, v in result["marks"].items()}
            fds[kind] = result["fds"]
    points = [n for n in CHECKPOINTS if n <= args.agents]
    ledger = "a ledger file" if args.ledger else "no ledger file"
    print(f"retained memory per distinct agent ({args.agents:,} agents, {ledger}; tracemalloc, "
          "distinct-agent run minus single-agent run)")
    for a, b in zip(points, points[1:]):
        extra = (runs["distinct"][b] - runs["single"][b]) - (runs["distinct"][a] - runs["single"][a])
        print(f"  agents {a:>6,} -> {b:>6,}: {extra / (b - a):7.0f} B per agent")
    print(f"open file descriptors at the end: {fds['distinct']} with {args.agents:,} agents, "
          f"{fds['single']} with one")


if __name__ == "__main__":
    main()
