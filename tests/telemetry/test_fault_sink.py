"""One fault sink: settings, capture, account and emit all report to it, and it is what
``otel_tokens.instrumentation.errors`` counts; nothing reaches the host."""

from __future__ import annotations

import openai
import pytest

import otel_tokens
from otel_tokens import Pricer, Usage, faults
from otel_tokens.capture.sdk import openai as openai_sdk
from otel_tokens.handler import set_handler

from ..sdk.replay import http_module
from .conftest import make_telemetry

http = http_module("openai")


class BrokenPricer(Pricer):
    def price(self, usage, provider, model):  # an account-step fault
        raise RuntimeError("price data corrupt")


def test_every_layer_reports_to_the_one_sink(monkeypatch):
    t = make_telemetry(pricer=BrokenPricer())
    previous = set_handler(t.handler)
    openai_sdk.install()
    try:
        monkeypatch.setenv("OTEL_TOKENS_LEDGER_MAX_HISTORY", "many")
        otel_tokens.settings.reload()  # settings: a bad value
        answers = iter([
            http.Response(200, json={"id": "x", "object": "chat.completion", "created": 0,
                                     "model": "gpt-4o", "choices": [],
                                     "usage": {"prompt_tokens": -4, "completion_tokens": 1}}),
            http.Response(200, json={"id": "y", "object": "chat.completion", "created": 0,
                                     "model": "gpt-4o", "choices": [],
                                     "usage": {"prompt_tokens": 4, "completion_tokens": 1}}),
        ])  # fmt: skip
        client = openai.OpenAI(api_key="k", max_retries=0, http_client=http.Client(
            transport=http.MockTransport(lambda request: next(answers))))  # fmt: skip
        with otel_tokens.agent("a"):
            client.chat.completions.create(model="gpt-4o", messages=[])  # capture: bad usage
            monkeypatch.setattr(t.handler.recorder.instruments.duration, "record",
                                lambda *a, **k: 1 / 0)  # emit: a broken instrument
            reply = client.chat.completions.create(model="gpt-4o", messages=[])  # account: pricing
    finally:
        openai_sdk.uninstall()
        set_handler(previous)
    assert reply.id == "y"
    assert t.errors() == {"config": 1, "usage_invalid": 1, "pricing": 1, "metrics": 1}
    assert faults.sink().counts == t.errors()


def test_the_sink_never_raises_whatever_its_counter_does():
    class Exploding:
        def add(self, *args, **kwargs):
            raise MemoryError("no room")

    sink = faults.Faults()
    sink.bind(Exploding())
    sink.report("internal", RuntimeError("x"))
    assert sink.counts == {"internal": 1}


@pytest.mark.parametrize("kind", ["config", "parse", "span"])
def test_faults_before_any_recorder_are_counted_by_the_first_one(kind):
    sink = faults.Faults()
    sink.report(kind, detail="early")

    class Sums:
        def __init__(self):
            self.added = []

        def add(self, amount, key):
            self.added.append((amount, key))

    sums = Sums()
    sink.bind(sums)
    assert sums.added == [(1, (("otel_tokens.error.kind", kind),))]
    assert sink.counts == {kind: 1}
