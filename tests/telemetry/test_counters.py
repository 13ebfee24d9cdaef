"""The contract's counters (plain OpenTelemetry counters): what a collection reads after many
calls is what adding one amount at a time gives: ints exact, floats to their last digits (the
SDK adds each collection's amounts to the cumulative sum), a class never reported absent, a
class reported as 0 present."""

from __future__ import annotations

import random

import pytest

from otel_tokens import Usage
from otel_tokens.account.outcome import Line, Outcome
from otel_tokens.account.pricing import PriceResult
from otel_tokens.call import Call

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
        call = Call(None, "chat", "openai", "model-a", False, started=0.0)
        recorder.start(call)
        recorder.stop(call, _outcome(usage, amount))
        sums["input"] += inp
        sums["output"] += out
        sums["cache_read"] += cached
        sums["reasoning"] += reasoning or 0
        cost = cost + amount
        if n in checkpoints:
            tokens = {p.attributes["gen_ai.token.type"]: p.value
                      for p in t.points("otel_tokens.tokens")}  # fmt: skip
            assert tokens == sums  # cache_write: never reported, so no point at all
            assert t.point("otel_tokens.cost").value == pytest.approx(cost, rel=1e-12)


def test_a_class_reported_only_as_zero_is_a_point_of_zero():
    t = make_telemetry()
    recorder = t.handler.recorder
    for _ in range(3):
        call = Call(None, "chat", "openai", "model-a", False, started=0.0)
        recorder.start(call)
        recorder.stop(call, _outcome(Usage(input_tokens=5, output_tokens=1,
                                           cache_read_tokens=0), 0.0))  # fmt: skip
    tokens = {p.attributes["gen_ai.token.type"]: p.value for p in t.points("otel_tokens.tokens")}
    assert tokens == {"input": 15, "output": 3, "cache_read": 0}
