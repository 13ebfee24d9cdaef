"""An agent's first call with a 1,000,000-row ledger file against an empty one.

Each run is a fresh process (``configure()`` + ``instrument()``, the real ``openai`` client on a
mock transport, ``OTEL_TOKENS_LEDGER_PATH`` set): the time of the first call made under
``agent("bot")``, whose ledger holds 1,000,000 rows of history in the big file and none in
the empty one, then the time of its first query (``ledger.cumulative``: totals by SQL
aggregate, the newest ``OTEL_TOKENS_LEDGER_MAX_HISTORY`` rows). Runs are interleaved; medians
printed. Run by hand (~1 min):
    python benchmarks/ledger_first_call.py [--rows 1000000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

WORKER = """
import importlib, json, time
import openai, otel_tokens
base = importlib.import_module("openai._base_client")
http = importlib.import_module("httpx2" if hasattr(base, "httpx2") else "httpx")
def answer(request):
    return http.Response(200, json={"id": "c", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}})
otel_tokens.configure(); otel_tokens.instrument()
client = openai.OpenAI(api_key="k", max_retries=0, http_client=http.Client(transport=http.MockTransport(answer)))
with otel_tokens.agent("warm"):
    client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
start = time.perf_counter()
with otel_tokens.agent("bot") as entry:
    client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
call = time.perf_counter() - start
start = time.perf_counter()
totals = entry.ledger.cumulative
query = time.perf_counter() - start
print(json.dumps({"call": call, "query": query, "requests": totals.requests}))
"""


def fill(path: str, rows: int) -> None:
    from otel_tokens import UsageLedger
    from otel_tokens.usage import Usage

    with UsageLedger("bot", path=path) as ledger:  # the schema, and one real row
        ledger.append(Usage(input_tokens=1, output_tokens=1, model="gpt-4o-mini"), cost_usd=0.0)
    conn = sqlite3.connect(path)
    now = time.time()
    conn.executemany(
        "INSERT INTO otel_tokens_requests (ledger, request_id, ts, model, provider, source, "
        "input_tokens, output_tokens, cost_usd, active) VALUES ('bot', ?, ?, 'gpt-4o-mini', "
        "'openai', 'reported', 100, 10, 0.0001, 1)",
        ((f"r{i}", now - rows + i) for i in range(rows - 1)))  # fmt: skip
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(OTEL_TRACES_EXPORTER="none", OTEL_METRICS_EXPORTER="none")
    results: dict[str, list[dict[str, float]]] = {"empty": [], "big": []}
    with tempfile.TemporaryDirectory() as folder:
        big = os.path.join(folder, "big.db")
        fill(big, args.rows)
        for _ in range(args.rounds):
            for kind in ("empty", "big"):
                path = big if kind == "big" else os.path.join(folder, f"empty-{time.monotonic_ns()}.db")
                out = subprocess.run([sys.executable, "-c", WORKER], env={**env, "OTEL_TOKENS_LEDGER_PATH": path},
                                     capture_output=True, text=True, check=True)  # fmt: skip
                results[kind].append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"agent('bot')'s first call and first query, medians of {args.rounds} interleaved runs")
    for kind, runs in results.items():
        call = statistics.median(r["call"] for r in runs) * 1000
        query = statistics.median(r["query"] for r in runs) * 1000
        rows = args.rows if kind == "big" else 0
        print(f"  {rows:>9,} rows: first call {call:7.2f} ms, first query {query:8.2f} ms")


if __name__ == "__main__":
    main()
