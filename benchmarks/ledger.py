"""Ledger costs: append time, memory per record, percentile query time.

Targets (issue: accounting core): append <= 3 us, <= 300 bytes per record, p95 over 100k
records <= 10 ms. Run by hand:  python benchmarks/ledger.py  (add --quick for a smoke run).

Times are medians of interleaved rounds, so a noisy shared machine moves every variant alike.
Memory is counted with tracemalloc (every byte Python allocates for the records), which noise
does not move.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
import tracemalloc

from otel_tokens import Usage, UsageLedger

MODELS = ["gpt-4o", "gpt-4o-mini", "claude-sonnet-4", "o3"]


def usages(n: int, seed: int = 1) -> list[Usage]:
    """A varied, realistic mix (distinct values, so no small-int sharing flatters memory)."""
    rnd = random.Random(seed)
    pool = []
    for _ in range(min(n, 5000)):
        inp = rnd.randint(500, 120_000)
        pool.append(Usage(
            input_tokens=inp, output_tokens=rnd.randint(1, 4000),
            cache_read_tokens=rnd.randint(0, inp // 2), reasoning_tokens=None,
            model=rnd.choice(MODELS), provider="openai",
        ))  # fmt: skip
    return [pool[i % len(pool)] for i in range(n)]


def bench_append(n: int, rounds: int) -> dict[str, float]:
    """Median microseconds per append: in memory, with explicit ids and trace context."""
    data = usages(n)
    variants = {
        "append (generated id)": lambda led, u, i: led.append(u, cost_usd=0.0123),
        "append (request id, trace/span ids)": lambda led, u, i: led.append(
            u, cost_usd=0.0123, request_id="chatcmpl-AbCdEf0123456789", trace_id=i + 1,
            span_id=i + 1,
        ),
        "append (bounded, max_history=10000)": None,
    }
    results: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            led = UsageLedger(max_history=10_000 if fn is None else None)
            call = fn or (lambda led, u, i: led.append(u, cost_usd=0.0123))
            gc.collect()
            start = time.perf_counter()
            for i, u in enumerate(data):
                call(led, u, i)
            results[name].append((time.perf_counter() - start) / n * 1e6)
    return {name: statistics.median(v) for name, v in results.items()}


def bench_memory(n: int, explicit_ids: bool) -> float:
    """Bytes per retained record (tracemalloc) for an unbounded ledger of ``n`` records."""
    data = usages(n)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    led = UsageLedger()
    for i, u in enumerate(data):
        if explicit_ids:
            led.append(u, cost_usd=0.0123, request_id=f"chatcmpl-{i:024d}", trace_id=i + 1,
                       span_id=i + 1)  # fmt: skip
        else:
            led.append(u, cost_usd=0.0123)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(led) == n
    return (after - before) / n


def bench_percentiles(n: int, repeats: int) -> dict[str, float]:
    """p95 milliseconds of a p95 query over ``n`` records, in three situations."""
    data = usages(n)
    out: dict[str, list[float]] = {"cold (first query)": [], "after 1 append": [],
                                   "bounded, after 1 append + eviction": []}  # fmt: skip
    for _ in range(repeats):
        led = UsageLedger()
        for u in data:
            led.append(u)
        start = time.perf_counter()
        led.percentile("input_tokens", 95)
        out["cold (first query)"].append((time.perf_counter() - start) * 1e3)
        for _ in range(5):
            led.append(data[0])
            start = time.perf_counter()
            led.percentile("input_tokens", 95)
            out["after 1 append"].append((time.perf_counter() - start) * 1e3)
        bounded = UsageLedger(max_history=n)
        for u in data:
            bounded.append(u)
        bounded.percentile("input_tokens", 95)
        bounded.append(data[1])
        start = time.perf_counter()
        bounded.percentile("input_tokens", 95)
        out["bounded, after 1 append + eviction"].append((time.perf_counter() - start) * 1e3)
    return {k: sorted(v)[max(0, int(len(v) * 0.95) - 1)] for k, v in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args()
    append_n, rounds = (20_000, 1) if args.quick else (200_000, 5)
    memory_sizes = (10_000,) if args.quick else (100_000, 1_000_000)
    pct_n, repeats = (10_000, 1) if args.quick else (100_000, 5)

    print("append cost (median of interleaved rounds), target <= 3 us")
    for name, us in bench_append(append_n, rounds).items():
        print(f"  {name:<40} {us:6.2f} us")
    print("memory per record (tracemalloc), target <= 300 bytes")
    for n in memory_sizes:
        for explicit in (False, True):
            label = "request id + trace/span ids" if explicit else "generated ids"
            print(f"  {n:>9,} records, {label:<28} {bench_memory(n, explicit):6.1f} bytes")
    print(f"p95 query time over {pct_n:,} records (p95 of repeats), target <= 10 ms")
    for name, ms in bench_percentiles(pct_n, repeats).items():
        print(f"  {name:<40} {ms:6.2f} ms")


if __name__ == "__main__":
    main()
