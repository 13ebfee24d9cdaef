"""Per-call and per-chunk overhead in CPU instructions (valgrind callgrind), which machine noise
cannot move: the companion of ``overhead.py`` on a shared, noisy machine.

Each figure is the difference of two runs that differ only in their number of calls, so
start-up and warm-up cancel out: instructions per call = (I(n2) - I(n1)) / (n2 - n1). The
variants are those of ``overhead.py``: the client uninstrumented (``plain``), the SDK floor
(``floor``: the span and the histogram points the contract requires, nothing of
otel_tokens) and instrumented. Instructions convert to microseconds at the rate the plain
call runs at on this machine (its wall time over its instructions, measured here too), an
approximation: every figure is also given in instructions.

Run by hand (needs valgrind; a few minutes):  python benchmarks/overhead_instructions.py
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))


def worker(variant: str, kind: str, n: int) -> None:
    """Run ``n`` calls of ``kind`` (after a warm-up) in this process, under callgrind."""
    sys.argv = [sys.argv[0]]
    sys.path.insert(0, HERE)
    import openai
    import overhead as bench

    import otel_tokens
    from otel_tokens.capture.sdk import openai as openai_sdk

    tp = bench.setup_sdk()
    client = openai.OpenAI(api_key="bench", max_retries=0, http_client=bench.http.Client(
        transport=bench.http.MockTransport(bench.handler)))  # fmt: skip
    with otel_tokens.agent("bench", max_input_tokens=128_000):
        if variant == "floor":
            openai.resources.chat.completions.Completions.create = bench.sdk_floor(tp, client)
        elif variant == "instrumented":
            openai_sdk.install()
        bench.timed(client, kind, 30)
        bench.timed(client, kind, n)


def instructions(variant: str, kind: str, n: int) -> int:
    """Instructions callgrind counts for a whole worker run."""
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
         __file__, "--worker", variant, kind, str(n)],
        capture_output=True, text=True, check=True,
    ).stderr  # fmt: skip
    return int(re.search(r"Collected : (\d+)", out).group(1))  # type: ignore[union-attr]


def per_call(variant: str, kind: str, n1: int, n2: int) -> float:
    """Instructions per call: the difference of two runs, run side by side."""
    with ThreadPoolExecutor(2) as pool:
        a, b = pool.map(lambda n: instructions(variant, kind, n), (n1, n2))
    return (b - a) / (n2 - n1)


def plain_rate() -> float:
    """Instructions per microsecond of the plain call on this machine (wall time, best of 5)."""
    sys.path.insert(0, HERE)
    import openai
    import overhead as bench

    client = openai.OpenAI(api_key="bench", max_retries=0, http_client=bench.http.Client(
        transport=bench.http.MockTransport(bench.handler)))  # fmt: skip
    bench.timed(client, "call", 50)
    best = min(bench.timed(client, "call", 300) for _ in range(5))
    return per_call("plain", "call", 100, 300) / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", nargs=3, metavar=("VARIANT", "KIND", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        variant, kind, n = args.worker
        worker(variant, kind, int(n))
        return
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    start = time.monotonic()
    calls = {v: per_call(v, "call", 100, 300) for v in ("plain", "floor", "instrumented")}
    streams = {(v, k): per_call(v, k, *((10, 30) if k == "stream201" else (100, 300)))
               for v in ("plain", "instrumented") for k in ("stream1", "stream201")}  # fmt: skip
    rate = plain_rate()
    added = calls["instrumented"] - calls["plain"]
    floor = calls["floor"] - calls["plain"]
    chunk = ((streams[("instrumented", "stream201")] - streams[("plain", "stream201")])
             - (streams[("instrumented", "stream1")] - streams[("plain", "stream1")])) / 200  # fmt: skip
    print(f"instructions (callgrind), {rate:,.0f} instructions/us at the plain call's speed here")
    print(f"  plain non-streamed call            {calls['plain']:>12,.0f}")
    print(f"  added per non-streamed call        {added:>12,.0f}  ~{added / rate:6.1f} us  (target <= 40 us)")
    print(f"    the SDK floor                    {floor:>12,.0f}  ~{floor / rate:6.1f} us")
    print(f"    otel_tokens beyond the floor     {added - floor:>12,.0f}  ~{(added - floor) / rate:6.1f} us")
    print(f"  added per streamed chunk           {chunk:>12,.0f}  ~{chunk / rate:6.2f} us  (target <= 1 us)")
    print(f"  ({time.monotonic() - start:.0f} s)")


if __name__ == "__main__":
    main()
