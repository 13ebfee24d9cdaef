"""Start-up cost: ``import otel_tokens`` plus ``instrument()``, provider SDKs already imported.

Target (issue: telemetry handler): within 50 ms. For scale: the official instrumentation
about 45 ms, OpenLLMetry 30-45 ms to import and 130-480 ms to enable, OpenLIT 100-160 ms and
370-500 ms. Each sample is a fresh interpreter; the variants run interleaved so machine noise
hits them alike. Run by hand:  python benchmarks/startup.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

PROBE = """
import json, time
import openai, anthropic  # the provider SDKs an agent has imported already
t0 = time.perf_counter()
import otel_tokens
t1 = time.perf_counter()
{enable}
t2 = time.perf_counter()
print(json.dumps({{"import_ms": (t1 - t0) * 1e3, "enable_ms": (t2 - t1) * 1e3}}))
"""

VARIANTS = {
    "import + instrument()": "otel_tokens.instrument()",
    "import + configure() + instrument()":
        "otel_tokens.configure(prometheus_port=0); otel_tokens.instrument()",
}


def sample(enable: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", PROBE.format(enable=enable)], check=True,
                         capture_output=True, text=True).stdout  # fmt: skip
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {name: [] for name in VARIANTS}
    for _ in range(args.runs):
        for name, enable in VARIANTS.items():
            results[name].append(sample(enable))
    print(f"median of {args.runs} fresh interpreters, target <= 50 ms for import + instrument()")
    for name, runs in results.items():
        imp = statistics.median(r["import_ms"] for r in runs)
        ena = statistics.median(r["enable_ms"] for r in runs)
        total = statistics.median(r["import_ms"] + r["enable_ms"] for r in runs)
        print(f"  {name:<38} import {imp:6.1f} ms  enable {ena:6.1f} ms  total {total:6.1f} ms")


if __name__ == "__main__":
    main()
