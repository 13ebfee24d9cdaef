"""The counters' running sums: a call's additions are kept and added up later (SumGroup), and
what a collection reads is exactly what adding one amount at a time would have given: ints
exact, floats with the rounding of one addition after another, a class never reported absent,
a class reported as 0 present, nothing lost between threads, nothing kept across a reset."""

from __future__ import annotations

import random
import sys
import threading

from otel_tokens import Usage
from otel_tokens.account.outcome import Line, Outcome
from otel_tokens.account.pricing import PriceResult
from otel_tokens.call import Call
from otel_tokens.emit.instruments import FOLD_AT, CounterSums

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
    checkpoints = {37, FOLD_AT, 5 * FOLD_AT + 3}  # before, at and well past a fold
    for n in range(1, 5 * FOLD_AT + 4):
        inp, out = rng.randrange(10, 5000), rng.randrange(1, 900)
        cached = rng.choice((0, 0, rng.randrange(0, inp)))  # reported, often as 0
        reasoning = rng.choice((None, rng.randrange(0, out)))  # reported by some calls only
        amount = rng.random() / 1000
        usage = Usage(input_tokens=inp, output_tokens=out, cache_read_tokens=cached,
                      reasoning_tokens=reasoning)  # fmt: skip
        call = Call(None, "chat", "openai", "model-a", False, started=0.0)
        recorder.start(call)
        recorder.stop(call, _outcome(usage, amount))
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
    for _ in range(FOLD_AT + 1):
        call = Call(None, "chat", "openai", "model-a", False, started=0.0)
        recorder.start(call)
        recorder.stop(call, _outcome(Usage(input_tokens=5, output_tokens=1,
                                           cache_read_tokens=0), 0.0))  # fmt: skip
    tokens = {p.attributes["gen_ai.token.type"]: p.value for p in t.points("otel_tokens.tokens")}
    assert tokens == {"input": 5 * (FOLD_AT + 1), "output": FOLD_AT + 1, "cache_read": 0}


def test_threads_adding_while_collections_read_lose_nothing():
    sums = CounterSums()
    keys = ((("k", "a"),), (("k", "b"),), (("k", "c"),))
    group = sums.group(keys, integers=True)
    threads, each = 6, 10_000
    seen: list[dict] = []
    done = threading.Event()

    def add() -> None:
        for _ in range(each):  # what the recorder does per call
            group.extend((1, 2, None))
            if len(group) >= FOLD_AT:
                group.fold()

    def collect() -> None:
        while not done.is_set():
            seen.append({p.attributes["k"]: p.value for p in sums.observe()})

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
    assert {p.attributes["k"]: p.value for p in sums.observe()} == {
        "a": threads * each, "b": 2 * threads * each}  # fmt: skip
    assert all(earlier.get("a", 0) <= later.get("a", 0) for earlier, later in zip(seen, seen[1:]))


def test_a_reset_keeps_nothing_of_before_and_the_kept_groups_still_count():
    sums = CounterSums()
    group = sums.group(((("k", "a"),), (("k", "b"),)))
    group.extend((0.5, 0.25))
    group.fold()
    group.extend((1.0, None))  # still pending at the reset
    sums.add(3, (("k", "c"),))
    sums.reset()
    assert sums.observe() == []
    group.extend((None, 2.0))
    assert {p.attributes["k"]: p.value for p in sums.observe()} == {"b": 2.0}
