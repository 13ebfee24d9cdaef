"""Explicit providers are honoured through any sequence of instrument/uninstrument, mixed across
``otel_tokens.instrument()`` and the entry-point instrumentor: each call of the real OpenAI
client (against a local server) lands once, in the providers given last, spans and every
metric point alike; two handlers on one meter provider never count a point twice.

The SDK registers an instrument name once per meter (a second registration returns the first
instrument and drops its callbacks): a handler rebuilt on the same providers used to make spans
and lose its counters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field

import pytest
from hypothesis import settings as hypothesis_settings
from hypothesis.stateful import RuleBasedStateMachine, rule
from hypothesis.strategies import sampled_from
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_tokens
from otel_tokens.emit.instruments import views
from otel_tokens.entry_points import OpenAIInstrumentor
from otel_tokens.handler import Handler, set_handler
from otel_tokens.usage import Usage

from ..local_server import LocalServer

openai = pytest.importorskip("openai")

CHAT = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}}  # fmt: skip
ANSWER = (200, "application/json", json.dumps(CHAT).encode(), {})


@dataclass
class Providers:
    """A real SDK tracer and meter provider, read in memory."""

    spans: InMemorySpanExporter = field(default_factory=InMemorySpanExporter)
    reader: InMemoryMetricReader = field(default_factory=InMemoryMetricReader)

    def __post_init__(self) -> None:
        self.tp = TracerProvider()
        self.tp.add_span_processor(SimpleSpanProcessor(self.spans))
        self.mp = MeterProvider(metric_readers=[self.reader], views=views())

    def kwargs(self) -> dict:
        return {"tracer_provider": self.tp, "meter_provider": self.mp}

    def totals(self) -> dict[str, float]:
        """Spans, and what every metric of a call adds up to so far (cumulative)."""
        out = {"spans": len(self.spans.get_finished_spans())}
        data = self.reader.get_metrics_data()
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    for point in metric.data.data_points:
                        name = metric.name
                        if name == "otel_tokens.tokens":
                            name += "." + point.attributes["gen_ai.token.type"]
                        value = point.count if hasattr(point, "bucket_counts") else point.value
                        out[name] = out.get(name, 0) + value
        return out


#: what one call of CHAT adds to a provider's totals
#: the local server is a self-hosted endpoint: tokens recorded, never priced (one unpriced call)
ONE_CALL = {"spans": 1, "gen_ai.client.operation.duration": 1, "gen_ai.client.token.usage": 2,
            "otel_tokens.tokens.input": 120, "otel_tokens.tokens.output": 30,
            "otel_tokens.estimate.error": 1, "otel_tokens.unpriced_requests": 1}  # fmt: skip


def added(before: dict, after: dict) -> dict:
    return {k: after.get(k, 0) - before.get(k, 0) for k in set(before) | set(after)
            if k != "otel_tokens.cost" and after.get(k, 0) != before.get(k, 0)}  # fmt: skip


@pytest.fixture(scope="module")
def client():
    server = LocalServer(lambda path, body: ANSWER)
    yield openai.OpenAI(base_url=server.url + "/v1", api_key="sk-test", max_retries=0)
    server.close()


@pytest.fixture(autouse=True)
def _restored():
    otel_tokens.uninstrument()
    previous = set_handler(None)
    yield
    otel_tokens.uninstrument()
    set_handler(previous)


def call_lands_once_in(client, target: Providers, others: list[Providers]) -> None:
    """One real call: the target gets one call's spans and points, the others nothing."""
    before = [p.totals() for p in (target, *others)]
    client.chat.completions.create(model="gpt-4o-mini",
                                   messages=[{"role": "user", "content": "hi"}])
    after = [p.totals() for p in (target, *others)]
    assert added(before[0], after[0]) == ONE_CALL
    for old, new in zip(before[1:], after[1:]):
        assert added(old, new) == {}


def api_on(p: Providers) -> None:
    otel_tokens.instrument(**p.kwargs())


def entry_point_on(p: Providers) -> None:
    OpenAIInstrumentor().instrument(**p.kwargs())


def api_off() -> None:
    otel_tokens.uninstrument()


def entry_point_off() -> None:
    OpenAIInstrumentor().uninstrument()


SEQUENCES = {  # steps: (turn on, with providers "a" or "b") or a turn off
    "again with the same providers": [(api_on, "a"), api_off, (api_on, "a")],
    "again with new providers": [(api_on, "a"), api_off, (api_on, "b")],
    "entry point, then instrument()": [(entry_point_on, "a"), (api_on, "a")],
    "entry point off and on, then instrument()": [
        (entry_point_on, "a"), entry_point_off, (entry_point_on, "a"), (api_on, "a")],
    "instrument(), then the entry point": [(api_on, "a"), (entry_point_on, "a")],
    "instrument() off, then the entry point": [(api_on, "a"), api_off, (entry_point_on, "a")],
    "entry point on new providers while on": [(api_on, "a"), (entry_point_on, "b")],
    "instrument() on new providers while on": [(entry_point_on, "a"), (api_on, "b")],
    "back to the first providers": [(api_on, "a"), (api_on, "b"), api_off, (entry_point_on, "a")],
}  # fmt: skip


@pytest.mark.parametrize("steps", SEQUENCES.values(), ids=SEQUENCES)
def test_each_call_lands_once_in_the_providers_given_last(client, steps):
    providers = {"a": Providers(), "b": Providers()}
    for step in steps:
        if callable(step):
            step()
            continue
        turn_on, name = step
        turn_on(providers[name])
        others = [p for key, p in providers.items() if key != name]
        call_lands_once_in(client, providers[name], others)


def test_the_entry_point_with_no_providers_then_instrument_with_them(client):
    given = Providers()
    OpenAIInstrumentor().instrument()  # the global providers (none set: nothing recorded)
    otel_tokens.instrument(**given.kwargs())
    call_lands_once_in(client, given, [])


class Sequences(RuleBasedStateMachine):
    """Random sequences of both APIs over two provider pairs: after every turn-on with
    providers, a call lands once, there."""

    client: openai.OpenAI

    def __init__(self) -> None:
        super().__init__()
        otel_tokens.uninstrument()
        self.providers = {"a": Providers(), "b": Providers()}

    @rule(on=sampled_from([api_on, entry_point_on]), name=sampled_from("ab"))
    def turn_on(self, on, name: str) -> None:
        on(self.providers[name])
        others = [p for key, p in self.providers.items() if key != name]
        call_lands_once_in(self.client, self.providers[name], others)

    @rule(off=sampled_from([api_off, entry_point_off]))
    def turn_off(self, off) -> None:
        off()

    def teardown(self) -> None:
        otel_tokens.uninstrument()


def test_random_sequences_of_both_apis(client):
    Sequences.client = client
    run = Sequences.TestCase("runTest")
    run.settings = hypothesis_settings(max_examples=25, stateful_step_count=8, deadline=None)
    run.runTest()


def test_two_handlers_on_one_meter_provider_count_each_call_once():
    shared = Providers()
    first, second = Handler(**shared.kwargs()), Handler(**shared.kwargs())
    before = shared.totals()
    for handler in (first, second):
        call = handler.start(operation="chat", provider="openai", request_model="gpt-4o-mini")
        call.stop(Usage(input_tokens=120, output_tokens=30))
    twice = {k: 2 * v for k, v in ONE_CALL.items()
             if k not in ("otel_tokens.estimate.error", "otel_tokens.unpriced_requests")}  # priced
    assert added(before, shared.totals()) == twice  # no request given: no estimate


def test_a_handler_built_on_the_global_proxy_shares_with_the_provider_set_later():
    """The warm-up builds the handler on the global providers; an application that sets its
    SDK afterwards and passes it to instrument() still gets every point once (own process:
    the global providers can be set only once)."""
    code = """
    import json, otel_tokens
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from otel_tokens.handler import get_handler
    from otel_tokens.usage import Usage

    early = get_handler()  # on the global proxy: nothing set yet
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader])
    metrics.set_meter_provider(mp)
    otel_tokens.instrument(meter_provider=mp)
    for handler in (early, get_handler()):
        call = handler.start(operation="chat", provider="openai", request_model="gpt-4o-mini")
        call.stop(Usage(input_tokens=120, output_tokens=30))
    sums = {}
    for rm in reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if m.name == "otel_tokens.tokens":
                    for p in m.data.data_points:
                        sums[p.attributes["gen_ai.token.type"]] = p.value
    print(json.dumps(sums))
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                            text=True, env=env, timeout=120, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"input": 240, "output": 60}
