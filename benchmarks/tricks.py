"""What each speed trick issue 46 took back was buying, one by one: the instructions per
instrumented call at each commit of a range, so each commit's difference from the one before is
what its plain form costs; with ``--official-python``, the bare call and the official
instrumentation counted the same way, and each commit's ratio to the official.

The call is ``instructions.py``'s non-streamed openai call (its mocked transport and answer),
with a simple span processor and an in-memory metric reader (no exporter or reader thread) and
the garbage collector off. callgrind counts only the calls themselves (collection on inside
one ``functools.reduce`` that makes them: no start-up, import or warm-up), and per call =
(I(n2) - I(n1)) / (n2 - n1). Two runs of one commit agree to within ~1 k instructions per call,
finer than the ~20 k a trick had to buy to stay (issue 46, point 3), which ``instructions.py``'s
process-wide count (the SDK's threads, the warm-up) moves by tens of k between runs.

With ``--without PARTS``, this tree's call is measured whole and then with each named part of
otel_tokens stubbed out (:data:`PARTS`: the pre-call estimate, the estimator's learning, the
ledger row, the counters' additions, the anomaly checks, the estimate-error histogram point):
the difference is what that part costs per call.

Run by hand (needs valgrind and git; ~2 min per commit or part):
    python benchmarks/tricks.py [--revs REV,REV,...] [--calls 10,60] [--official-python PY]
    python benchmarks/tricks.py --without all [--calls 10,40]
Each commit is checked out in a temporary git worktree and imported from there.
"""

from __future__ import annotations

import argparse
import functools
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
    ("a611358", "put back: a chat completion object read by attribute (its request by name)"),
    ("3df31ba", "put back: Usage's twin-class build"),
]


def _stub_estimate() -> None:
    """The pre-call estimate made once and handed back on every later call."""
    from otel_tokens.account.estimate import Estimator

    made = {}
    estimate = Estimator.estimate

    def once(self, request, *, provider, agent="default"):  # type: ignore[no-untyped-def]
        if "estimate" not in made:
            made["estimate"] = estimate(self, request, provider=provider, agent=agent)
        return made["estimate"]

    Estimator.estimate = once  # type: ignore[method-assign]


def _without(part: str) -> None:
    """Measurement only: stub out one part of otel_tokens' call (``--without``), so the
    difference from the whole call is what that part costs."""
    from otel_tokens.account.anomalies import AnomalyGuard
    from otel_tokens.account.estimate import Estimator
    from otel_tokens.account.ledger import UsageLedger
    from otel_tokens.emit import recorder
    from otel_tokens.emit import sums

    def no_counters() -> None:
        sums.CounterSums.add = lambda self, amount, key: None  # type: ignore[method-assign]
        if hasattr(sums, "Sum"):  # the sums the recorder keeps with its label sets
            sums.Sum.add = lambda self, amount: None  # type: ignore[method-assign]

    stubs = {
        "estimate": _stub_estimate,
        "learning": lambda: setattr(Estimator, "observe", lambda self, *a: None),
        "ledger": lambda: setattr(UsageLedger, "append", lambda self, *a, **k: 0),
        "counters": no_counters,
        "anomalies": lambda: setattr(AnomalyGuard, "check_after", lambda self, *a: ()),
        "estimate_error_point": lambda: setattr(recorder, "record_signed", lambda *a: None),
    }
    stubs[part]()


PARTS = (
    "estimate", "learning", "ledger", "counters", "anomalies", "estimate_error_point",
)  # fmt: skip


def worker(n: int, variant: str = "otel_tokens") -> None:
    """``n`` non-streamed calls after a warm-up (run under callgrind, from the tree on
    ``sys.path``), instrumented by ``variant``: otel_tokens, official or bare (none), or
    otel_tokens without one of its :data:`PARTS` (``without:PART``)."""
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
    if variant == "otel_tokens" or variant.startswith("without:"):
        otel_tokens.instrument()
        if variant.startswith("without:"):
            _without(variant.partition(":")[2])
    elif variant == "official":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        OpenAIInstrumentor().instrument()
    instructions._run(client, "call", 30)
    instructions.settle()
    # the counted calls: callgrind collects inside functools.reduce alone (see count)
    functools.reduce(lambda _, __: instructions._run(client, "call", n), [0], None)


def count(tree: str, n: int, variant: str = "otel_tokens", python: str = sys.executable) -> int:
    """Instructions of ``n`` calls in one worker run importing otel_tokens from ``tree``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(PYTHONHASHSEED="1", PYTHONPATH=tree)
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", "--collect-atstart=no",
         "--toggle-collect=functools_reduce", python, os.path.join(tree, "benchmarks", "tricks.py"),
         "--worker", str(n), variant],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    found = re.search(r"Collected : (\d+)", out.stderr)
    if out.returncode != 0 or found is None:
        raise RuntimeError(f"{tree} {variant} {n}: {out.stderr[-2000:]}")
    return int(found.group(1))


def per_call(tree: str, calls: tuple[int, int], variant: str = "otel_tokens",
             python: str = sys.executable) -> float:  # fmt: skip
    n1, n2 = calls
    return (count(tree, n2, variant, python) - count(tree, n1, variant, python)) / (n2 - n1)


def at(rev: str, calls: tuple[int, int]) -> float:
    """Instructions per otel_tokens call at ``rev`` (checked out in a temporary worktree, this
    file copied in)."""
    with tempfile.TemporaryDirectory() as folder:
        tree = os.path.join(folder, "tree")
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "-q", "--detach", tree, rev], check=True)
        try:
            with open(__file__) as mine, open(os.path.join(tree, "benchmarks", "tricks.py"), "w") as copy:
                copy.write(mine.read())
            return per_call(tree, calls)
        finally:
            subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", tree], check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", nargs=2, metavar=("N", "VARIANT"), help=argparse.SUPPRESS)
    parser.add_argument("--revs", default=",".join(rev for rev, _ in PLAIN_FORMS))
    parser.add_argument("--calls", default="10,60")
    parser.add_argument("--without", default=None, metavar="PARTS",
                        help="instead of --revs: this tree's call whole and without each part "
                             f"(comma-separated; 'all': {', '.join(PARTS)})")  # fmt: skip
    parser.add_argument("--official-python", default=None,
                        help="also the bare call and the official instrumentation (a venv with "
                             "opentelemetry-instrumentation-openai-v2: see instructions.py)")  # fmt: skip
    args = parser.parse_args()
    if args.worker is not None:
        worker(int(args.worker[0]), args.worker[1])
        return
    calls: tuple[int, int] = tuple(int(c) for c in args.calls.split(","))  # type: ignore[assignment]
    bare = official = None
    if args.official_python:
        bare = per_call(ROOT, calls, "bare")
        official = per_call(ROOT, calls, "official", args.official_python) - bare
        print(f"bare call {bare:,.0f}; the official instrumentation adds {official:,.0f}")
    if args.without:
        parts = PARTS if args.without == "all" else args.without.split(",")
        whole = per_call(ROOT, calls)
        print(f"instructions per call, this tree: {whole:,.0f}; what each part costs:")
        for part in parts:
            figure = per_call(ROOT, calls, f"without:{part}")
            print(f"  {part:>22}  {whole - figure:10,.0f}", flush=True)
        return
    what = dict(PLAIN_FORMS)
    before = None
    print(f"instructions per call (callgrind, (I({calls[1]}) - I({calls[0]})) / {calls[1] - calls[0]})")
    for rev in args.revs.split(","):
        figure = at(rev, calls)
        step = "" if before is None else f"{figure - before:+,.0f}"
        ratio = "" if official is None else f"{(figure - bare) / official:.2f}x"  # type: ignore[operator]
        print(f"  {rev:>10}  {figure:12,.0f}  {step:>9}  {ratio:>6}  {what.get(rev, '')}", flush=True)
        before = figure


if __name__ == "__main__":
    main()
