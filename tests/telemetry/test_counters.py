"""The contract's counters, asynchronous counters over running sums (``emit/sums.py``): what a
collection reads after many calls is what adding one amount at a time gives (ints exact, floats
with the rounding of one addition after another), a class never reported absent, a class
reported as 0 present; nothing lost or counted twice between threads or across a fork."""

from __future__ import annotations

import os
import random
import select
import signal
import sys
import threading

from otel_tokens import Usage
from otel_tokens.account.outcome import Line, Outcome
from otel_tokens.account.pricing import PriceResult
from otel_tokens.call import Call
from otel_tokens.emit.sums import CounterSums, reset_all
from otel_tokens.tracking import Tracking

from .conftest import make_telemetry


def _outcome(usage: Usage, cost: float) -> Outcome:
    return Outcome(
        failed=False, error_type=None, error_message=None, usage=usage,
        price=PriceResult(cost, "computed"),
        lines=(Line("model-a", usage, cost, "computed", False, None),),
        response_model="model-a", response_id="r", finish_reasons=("stop",),
        estimate=None, estimate_error=None, duration=0.5, time_to_first_chunk=None,
        stream=False, state=None, anomalies=(), attributes=None,
    )  # fmt: skip


def test_many_calls_sum_as_one_addition_at_a_time_at_every_collection():
    t = make_telemetry()
    recorder = t.handler.recorder
    rng = random.Random(35)
    sums = {"input": 0, "output": 0, "cache_read": 0, "reasoning": 0}
    cost = 0
    checkpoints = {37, 128, 300}  # collections between calls, cumulative
    for n in range(1, 301):
        inp, out = rng.randrange(10, 5000), rng.randrange(1, 900)
        cached = rng.choice((0, 0, rng.randrange(0, inp)))  # reported, often as 0
        reasoning = rng.choice((None, rng.randrange(0, out)))  # reported by some calls only
        amount = rng.random() / 1000
        usage = Usage(input_tokens=inp, output_tokens=out, cache_read_tokens=cached,
                      reasoning_tokens=reasoning)  # fmt: skip
        tracking = Tracking()
        call = Call(tracking, "chat", "openai", "model-a", False, started=0.0)
        recorder.start(call, tracking)
        recorder.stop(tracking, _outcome(usage, amount))
        sums["input"] += inp
        sums["output"] += out
        sums["cache_read"] += cached
        sums["reasoning"] += reasoning or 0
        cost = cost + amount  # the rounding of one addition at a time
        if n in checkpoints:
            tokens = {p.attributes["gen_ai.token.type"]: p.value
                      for p in t.points("otel_tokens.tokens")}  # fmt: skip
            assert tokens == sums  # cache_write: never reported, so no point at all
            assert t.point("otel_tokens.cost").value == cost


def test_a_class_reported_only_as_zero_is_a_point_of_zero():
    t = make_telemetry()
    recorder = t.handler.recorder
    for _ in range(3):
        tracking = Tracking()
        call = Call(tracking, "chat", "openai", "model-a", False, started=0.0)
        recorder.start(call, tracking)
        recorder.stop(tracking, _outcome(Usage(input_tokens=5, output_tokens=1,
                                           cache_read_tokens=0), 0.0))  # fmt: skip
    tokens = {p.attributes["gen_ai.token.type"]: p.value for p in t.points("otel_tokens.tokens")}
    assert tokens == {"input": 15, "output": 3, "cache_read": 0}


def _values(sums: CounterSums) -> dict:
    return {p.attributes["k"]: p.value for p in sums.observe()}


def test_threads_adding_while_collections_read_lose_nothing():
    sums = CounterSums()
    threads, each = 6, 10_000
    seen: list[dict] = []
    done = threading.Event()

    def add() -> None:
        for _ in range(each):  # what the recorder does per call
            sums.add(1, (("k", "a"),))
            sums.add(2, (("k", "b"),))

    def collect() -> None:
        while not done.is_set():
            seen.append(_values(sums))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads taking turns between any two steps, or nearly
    try:
        reader = threading.Thread(target=collect)
        reader.start()
        workers = [threading.Thread(target=add) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        done.set()
        reader.join()
    finally:
        sys.setswitchinterval(interval)
    assert _values(sums) == {"a": threads * each, "b": 2 * threads * each}
    assert all(earlier.get("a", 0) <= later.get("a", 0) for earlier, later in zip(seen, seen[1:]))


def test_a_forked_child_counts_its_own_amounts_once_even_with_the_lock_held_at_the_fork():
    """The child starts from zero (the parent's amounts are the parent's to export), under a
    new lock (the parent's was held by a thread the child does not have); the parent's sums
    are untouched by the child's."""
    sums = CounterSums()
    sums.add(5, (("k", "a"),))
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with sums._lock:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: what process.py's fork hook does, then its own calls
        try:
            reset_all()
            sums.add(3, (("k", "a"),))
            sums.add(0, (("k", "b"),))
            os.write(write, repr(_values(sums)).encode())
        finally:
            os._exit(0)
    release.set()
    holder.join()
    os.close(write)
    answered = select.select([read], [], [], 30)[0]  # a child stuck on the old lock: never
    if not answered:
        os.kill(pid, signal.SIGKILL)
    with os.fdopen(read) as child:
        seen = child.read() if answered else "no answer: stuck on the parent's lock"
    assert os.waitpid(pid, 0)[1] == (0 if answered else signal.SIGKILL)
    assert seen == repr({"a": 3, "b": 0})
    sums.add(1, (("k", "a"),))
    assert _values(sums) == {"a": 6}


def test_a_sum_kept_by_the_recorder_is_the_one_its_key_reads():
    """The recorder adds through the Sum it keeps with a label set; adding by key reaches the
    same sum, and a sum asked for but never added to makes no point."""
    sums = CounterSums()
    kept = sums.sum((("k", "a"),))
    assert sums.sum((("k", "a"),)) is kept
    sums.sum((("k", "never"),))
    kept.add(2)
    sums.add(3, (("k", "a"),))
    kept.add(0)
    assert _values(sums) == {"a": 5}


def test_the_recorders_kept_sums_count_from_zero_in_a_forked_child():
    """A child's recorder keeps the parent's label sets and their Sum objects: after the fork
    hook they count the child's amounts alone, and a set the child never adds to is absent."""
    t = make_telemetry()
    recorder = t.handler.recorder

    def one_call(inp: int, out: int, model: str) -> None:
        tracking = Tracking()
        call = Call(tracking, "chat", "openai", model, False, started=0.0)
        recorder.start(call, tracking)
        outcome = _outcome(Usage(input_tokens=inp, output_tokens=out), 0.25)
        recorder.stop(tracking, outcome._replace(response_model=model, lines=(
            Line(model, outcome.usage, 0.25, "computed", False, None),)))  # fmt: skip

    one_call(100, 10, "model-a")
    one_call(7, 1, "model-b")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            reset_all()
            one_call(40, 4, "model-a")
            points = sorted(
                (p.attributes["gen_ai.response.model"], p.attributes["gen_ai.token.type"], p.value)
                for p in recorder.instruments.tokens.observe()
            )
            cost = [p.value for p in recorder.instruments.cost.observe()]
            os.write(write, repr((points, cost)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as child:
        seen = child.read()
    assert os.waitpid(pid, 0)[1] == 0
    assert seen == repr(([("model-a", "input", 40), ("model-a", "output", 4)], [0.25]))
    tokens = {(p.attributes["gen_ai.response.model"], p.attributes["gen_ai.token.type"]): p.value
              for p in t.points("otel_tokens.tokens")}  # fmt: skip
    assert tokens == {("model-a", "input"): 100, ("model-a", "output"): 10,
                      ("model-b", "input"): 7, ("model-b", "output"): 1}  # fmt: skip


def test_ten_thousand_model_names_keep_the_sums_bounded_and_every_token_counted():
    """Each admitted label set keeps its sums; past the cardinality bound the names fold into
    one set, so the sums kept stay bounded however many names come, and no token is lost."""
    t = make_telemetry()
    recorder = t.handler.recorder
    for i in range(10_000):
        model = f"model-{i}"
        usage = Usage(input_tokens=3, output_tokens=1)
        tracking = Tracking()
        recorder.start(Call(tracking, "chat", "openai", model, False, started=0.0), tracking)
        outcome = _outcome(usage, 0.5)
        recorder.stop(tracking, outcome._replace(response_model=model, lines=(
            Line(model, usage, 0.5, "computed", False, None),)))  # fmt: skip
    kept = len(recorder.instruments.tokens._sums)
    assert kept <= 5 * (recorder.cardinality.max_sets + 2)
    tokens = {}
    for p in t.points("otel_tokens.tokens"):
        kind = p.attributes["gen_ai.token.type"]
        tokens[kind] = tokens.get(kind, 0) + p.value
    assert tokens == {"input": 30_000, "output": 10_000}
    assert sum(p.value for p in t.points("otel_tokens.cost")) == 5_000
