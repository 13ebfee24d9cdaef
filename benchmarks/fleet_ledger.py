"""The fleet ledger and budgets on PostgreSQL: throughput, call latency, reservation round trip.

Starts a throwaway PostgreSQL cluster (Debian's ``postgresql`` package; see
tests/fleet/cluster.py), then measures:

* rows per second sustained from 8 processes into one database (each queues ``--rows`` rows on
  the fleet writer as fast as it can; time until every row is committed);
* what queuing one row costs the calling thread (``FleetWriter.put``: the row journaled, one
  line written to the spool folder, then queued), median and p99, rows paced as calls are
  (20 then a 1 ms pause), the writing thread committing meanwhile;
* the latency of one instrumented call (``configure()`` + ``instrument()``, the real ``openai``
  client on a mock transport, under ``agent()``) with no fleet ledger, with the database up,
  slow (a trigger sleeps 100 ms in every INSERT statement) and down (nothing listens);
  medians over ``--calls`` calls in fresh processes;
* a budget reservation's round trip (reserve before the call + settle after it) on the local
  database, median.

Run by hand (~1 min): ``python benchmarks/fleet_ledger.py [--rows 20000] [--calls 400]``
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

WRITER = """
import sys, time
from otel_tokens.account.ledger.postgres import FleetWriter
from otel_tokens.account.ledger.spool import Spool
from otel_tokens.usage import Usage
url, rows, spool = sys.argv[1], int(sys.argv[2]), sys.argv[3]
writer = FleetWriter(url, Spool(spool, 10**9), queue_max=10**6, exit_timeout=120)
usage = Usage(input_tokens=100, output_tokens=10, model="gpt-4o-mini", provider="openai")
for i in range(rows):
    writer.put("bench", None, time.time(), usage, 0.0001, 0, 0, ("u", "t", None))
writer.flush(120)
print(writer.written)
"""

PUTTER = """
import json, statistics, sys, time
from otel_tokens.account.ledger.postgres import FleetWriter
from otel_tokens.account.ledger.spool import Spool
from otel_tokens.usage import Usage
url, rows, spool = sys.argv[1], int(sys.argv[2]), sys.argv[3]
writer = FleetWriter(url, Spool(spool, 10**9), queue_max=10**6, exit_timeout=120)
usage = Usage(input_tokens=100, output_tokens=10, model="gpt-4o-mini", provider="openai")
times = []
for i in range(rows):
    start = time.perf_counter()
    writer.put("bench", None, time.time(), usage, 0.0001, 1, 1, ("u", "t", "c"))
    times.append(time.perf_counter() - start)
    if i % 20 == 19:
        time.sleep(0.001)
writer.flush(120)
times = sorted(times[1000:])
print(json.dumps({"median": statistics.median(times), "p99": times[int(len(times) * 0.99)]}))
"""

CALLER = """
import importlib, json, statistics, sys, time
import openai, otel_tokens
base = importlib.import_module("openai._base_client")
http = importlib.import_module("httpx2" if hasattr(base, "httpx2") else "httpx")
def answer(request):
    return http.Response(200, json={"id": "c", "object": "chat.completion", "created": 0,
        "model": "gpt-4o-mini", "choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": "hi"}}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}})
otel_tokens.configure(); otel_tokens.instrument()
client = openai.OpenAI(api_key="k", max_retries=0,
                       http_client=http.Client(transport=http.MockTransport(answer)))
times = []
for i in range(int(sys.argv[1]) + 20):
    start = time.perf_counter()
    with otel_tokens.agent("bot", tenant="acme"):
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    times.append(time.perf_counter() - start)
times = times[20:]
print(json.dumps({"median": statistics.median(times), "p99": sorted(times)[int(len(times) * 0.99)]}))
"""

SLOW = """
CREATE OR REPLACE FUNCTION otel_tokens_bench_slow() RETURNS trigger AS $$
BEGIN PERFORM pg_sleep(0.1); RETURN NULL; END $$ LANGUAGE plpgsql;
CREATE TRIGGER otel_tokens_bench_slow BEFORE INSERT ON otel_tokens_requests
FOR EACH STATEMENT EXECUTE FUNCTION otel_tokens_bench_slow();
"""


def throughput(url: str, rows: int, spool: str) -> float:
    import psycopg

    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, url, str(rows), spool],
                              stdout=subprocess.PIPE, text=True) for _ in range(8)]  # fmt: skip
    for proc in procs:
        proc.communicate(timeout=600)
    elapsed = time.perf_counter() - start
    with psycopg.connect(url) as conn:
        stored = conn.execute("SELECT COUNT(*) FROM otel_tokens_requests").fetchone()[0]
    assert stored == 8 * rows, (stored, 8 * rows)
    return stored / elapsed


def put_cost(url: str, rows: int, spool: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", PUTTER, url, str(rows), spool], check=True,
                         capture_output=True, text=True, timeout=600).stdout  # fmt: skip
    return json.loads(out.strip().splitlines()[-1])


def latency(url: str | None, calls: int, spool: str) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(OTEL_TRACES_EXPORTER="none", OTEL_METRICS_EXPORTER="none",
               OTEL_TOKENS_LEDGER_SPOOL=spool, OTEL_TOKENS_EXIT_TIMEOUT="0.5")  # fmt: skip
    if url:
        env["OTEL_TOKENS_LEDGER_URL"] = url
    out = subprocess.run([sys.executable, "-c", CALLER, str(calls)], env=env, check=True,
                         capture_output=True, text=True, timeout=600).stdout  # fmt: skip
    return json.loads(out.strip().splitlines()[-1])


def reservation(url: str, rounds: int = 500) -> float:
    from otel_tokens.account.anomalies import Budget
    from otel_tokens.account.fleet_budget import FleetBudgets

    fleet = FleetBudgets(url, {"bot": Budget(usd=1e9, enforce=True)}, None, {}, {})
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        held = fleet.reserve("bot", None, None, 0.001, 100)
        fleet.settle(held, 0.0005, 50)
        times.append(time.perf_counter() - start)
    assert fleet.faults == 0
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000, help="rows per process (8 of them)")
    parser.add_argument("--calls", type=int, default=400, help="calls per latency run")
    args = parser.parse_args()
    import tempfile

    import psycopg

    from tests.fleet.cluster import Cluster, binaries
    from tests.fleet.conftest import new_database

    cluster = Cluster(binaries())
    try:
        spool = tempfile.mkdtemp(prefix="otel-tokens-bench-spool-")
        rate = throughput(new_database(cluster.url), args.rows, spool)
        print(f"8 processes x {args.rows} rows: {rate:,.0f} rows/s sustained")
        put = put_cost(new_database(cluster.url), args.rows, spool)
        print(f"one row queued (put, journaled): median {put['median'] * 1e6:,.1f} us, "
              f"p99 {put['p99'] * 1e6:,.1f} us")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            closed = s.getsockname()[1]
        slow = new_database(cluster.url)
        latency(slow, 1, spool)  # the schema
        with psycopg.connect(slow, autocommit=True) as conn:
            conn.execute(SLOW)
        cases = {"no fleet ledger": None, "database up": new_database(cluster.url),
                 "database slow (100 ms per statement)": slow,
                 "database down": f"postgresql://postgres@127.0.0.1:{closed}/x"}  # fmt: skip
        for name, url in cases.items():
            figures = latency(url, args.calls, spool)
            print(f"call latency, {name}: median {figures['median'] * 1e6:,.0f} us, "
                  f"p99 {figures['p99'] * 1e6:,.0f} us")
        print(f"budget reservation round trip (reserve + settle): "
              f"{reservation(new_database(cluster.url)) * 1e3:.2f} ms median")
    finally:
        cluster.remove()


if __name__ == "__main__":
    main()
