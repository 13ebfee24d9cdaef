"""What each speed trick issue 46 took back was buying, one by one: the instructions per
instrumented call at each commit of a range (callgrind), so each commit's difference from the
one before is what its plain form costs.

The call is ``instructions.py``'s non-streamed openai call (its mocked transport and answer),
made so that nothing but the calling thread runs and nothing depends on the clock's reading:
a simple span processor and an in-memory metric reader (no exporter or reader thread), the
garbage collector off from the start, otel_tokens' warm-up over before counting. Per call =
(I(n2) - I(n1)) / (n2 - n1), so start-up and imports cancel out. Two runs of one commit agree
to within a few hundred instructions per call: far finer than the ~20 k a trick had to buy to
stay (issue 46, point 3), which ``instructions.py``'s process-wide count (SDK threads, +-15 k
between runs) cannot tell apart.

Run by hand (needs valgrind and git; ~1 min per commit):
    python benchmarks/tricks.py [--revs REV,REV,...] [--calls 20,220]
Each commit is checked out in a temporary git worktree and imported from there.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

#: issue 46's plain forms, one commit each, after the base they were measured from
PLAIN_FORMS = [
    ("5ad2b5f", "base: every trick in place"),
    ("4c7af20", "Usage a frozen dataclass checked in __post_init__ (was: a class swap)"),
    ("b994aa3", "Estimate's __post_init__, TokenState's figures by name, its lock a with"),
    ("617f305", "four more locks as with statements (anomalies, ledger, estimator, end)"),
    ("d8da6d3", "estimate, cursor, price by name; observe through _put and _add"),
    ("b6b425e", "the Outcome and its Line by name"),
    ("8c201a0", "the spike check through _Rolling.above and .add"),
    ("5a58cdf", "a chat completion by the field-by-field reader; the request by name"),
    ("ab5145f", "an answer ended through checked and stop_with; Call.stop through _fill"),
]


def worker(n: int) -> None:
    """``n`` non-streamed calls after a warm-up (run under callgrind, from the tree on
    ``sys.path``)."""
    gc.disable()
    sys.path.insert(0, HERE)
    os.environ.setdefault("OTEL_TOKENS_PROMETHEUS_PORT", "0")
    import instructions
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    import otel_tokens
    from otel_tokens.emit.instruments import views

    class Null(SpanExporter):
        def export(self, spans):  # type: ignore[no-untyped-def]
            return SpanExportResult.SUCCESS

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(Null()))
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()], views=views()))
    client = instructions._client()
    otel_tokens.instrument()
    instructions._run(client, "call", 30)
    instructions.settle()
    instructions._run(client, "call", n)


def count(tree: str, n: int) -> int:
    """Instructions of one worker run importing otel_tokens from ``tree``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(PYTHONHASHSEED="1", PYTHONPATH=tree)
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
         os.path.join(tree, "benchmarks", "tricks.py"), "--worker", str(n)],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    found = re.search(r"Collected : (\d+)", out.stderr)
    if out.returncode != 0 or found is None:
        raise RuntimeError(f"{tree} {n}: {out.stderr[-2000:]}")
    return int(found.group(1))


def per_call(rev: str, calls: tuple[int, int]) -> float:
    """Instructions per call at ``rev`` (checked out in a temporary worktree)."""
    with tempfile.TemporaryDirectory() as folder:
        tree = os.path.join(folder, "tree")
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "-q", "--detach", tree, rev], check=True)
        try:
            if not os.path.exists(os.path.join(tree, "benchmarks", "tricks.py")):
                os.makedirs(os.path.join(tree, "benchmarks"), exist_ok=True)
                with open(__file__) as mine, open(os.path.join(tree, "benchmarks", "tricks.py"), "w") as theirs:
                    theirs.write(mine.read())
            n1, n2 = calls
            return (count(tree, n2) - count(tree, n1)) / (n2 - n1)
        finally:
            subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", tree], check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--revs", default=",".join(rev for rev, _ in PLAIN_FORMS))
    parser.add_argument("--calls", default="20,220")
    args = parser.parse_args()
    if args.worker is not None:
        worker(args.worker)
        return
    calls = tuple(int(c) for c in args.calls.split(","))
    what = dict(PLAIN_FORMS)
    before = None
    print(f"instructions per call (callgrind, (I({calls[1]}) - I({calls[0]})) / {calls[1] - calls[0]})")
    for rev in args.revs.split(","):
        figure = per_call(rev, calls)  # type: ignore[arg-type]
        step = "" if before is None else f"{figure - before:+10,.0f}"
        print(f"  {rev:>10}  {figure:12,.0f}  {step:>10}  {what.get(rev, '')}", flush=True)
        before = figure


if __name__ == "__main__":
    main()
