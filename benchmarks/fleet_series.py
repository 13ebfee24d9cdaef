"""Series in Prometheus for N short runs (default 100), per process and folded.

Each run is a real process (tests/ops/workload.py --rounds 1: two agents, OpenAI, Anthropic, an
agent-CLI run, failures, unpriced calls) serving otel_tokens' embedded /metrics on one port, as
a cron job or CI run would; a real Prometheus (the Debian binary, temporary data directory)
scrapes it once, then the run exits and the next starts. Counted afterwards:

* before: the distinct otel_tokens series Prometheus stored (every run has its own
  service_instance_id, so its own set);
* after: the distinct label sets (metric name included) once service.instance.id is dropped,
  which is what
  collector-config/otel-collector-fleet.yaml's fold (delta temporality + deltatocumulative)
  exports: one set for all the runs.

No collector binary runs here, so "after" is computed from the same stored series (Prometheus'
series API, the per-process label removed), not measured through a collector.
Run by hand:  python benchmarks/fleet_series.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[1]
WORKLOAD = [sys.executable, str(ROOT / "tests" / "ops" / "workload.py"), "--rounds", "1"]
SERIES = '{__name__=~"otel_tokens_.+|gen_ai_.+", otel_scope_name="otel_tokens"}'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def query(base: str, expr: str) -> float:
    url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
    with urllib.request.urlopen(url, timeout=10) as response:
        result = json.load(response)["data"]["result"]
    return float(result[0]["value"][1]) if result else 0.0


def series(base: str) -> list[dict]:
    """Every otel_tokens series Prometheus stored in the last hour (the series API: label sets
    with their metric name)."""
    params = urllib.parse.urlencode({"match[]": SERIES, "start": time.time() - 3600, "end": time.time()})
    with urllib.request.urlopen(f"{base}/api/v1/series?{params}", timeout=30) as response:
        return json.load(response)["data"]


def wait(check, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise SystemExit("timed out")


def one_run(base: str, port: int, seed: int) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(OTEL_TOKENS_PROMETHEUS_PORT=str(port), OTEL_SERVICE_NAME="nightly-review",
               OTEL_RESOURCE_ATTRIBUTES="deployment.environment.name=ci")  # fmt: skip
    proc = subprocess.Popen([*WORKLOAD, "--seed", str(seed)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    instance = json.loads(proc.stdout.readline())["instance"]
    wait(lambda: query(base, f'count(otel_tokens_tokens_total{{service_instance_id="{instance}"}})') > 0)
    proc.stdin.close()
    proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    args = parser.parse_args()
    port, target = free_port(), free_port()
    with tempfile.TemporaryDirectory() as tmp:
        config = pathlib.Path(tmp) / "prometheus.yml"
        config.write_text(json.dumps({"global": {"scrape_interval": "1s"}, "scrape_configs": [
            {"job_name": "runs", "static_configs": [{"targets": [f"127.0.0.1:{target}"]}]}]}))
        prometheus = subprocess.Popen(["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp}/data",
                                       f"--web.listen-address=127.0.0.1:{port}"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        try:
            wait(lambda: urllib.request.urlopen(f"{base}/-/ready", timeout=2).status == 200)
            started = time.monotonic()
            for seed in range(args.runs):
                one_run(base, target, seed)
            seconds = time.monotonic() - started
            stored = series(base)
            folded = {tuple(sorted((k, v) for k, v in s.items() if k not in ("service_instance_id", "instance")))
                      for s in stored}  # fmt: skip
            before, after = len(stored), len(folded)
            per_run = len({s.get("service_instance_id") for s in stored})
        finally:
            prometheus.terminate()
            prometheus.wait(timeout=30)
    print(f"{args.runs} short runs ({per_run:.0f} seen by Prometheus, {seconds:.0f} s): "
          f"{before:.0f} series per process ({before / max(per_run, 1):.0f} each), "
          f"{after:.0f} series folded (otel-collector-fleet.yaml), {before / max(after, 1):.0f}x fewer")


if __name__ == "__main__":
    main()
