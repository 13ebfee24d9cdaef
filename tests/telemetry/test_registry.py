"""One registry behind ``instrument()``/``uninstrument()`` and the entry-point instrumentors:
any sequence of them, mixed across the two APIs, leaves each patch applied exactly once or not
at all (a hypothesis state machine drives the sequences)."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import settings as hypothesis_settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from hypothesis.strategies import sampled_from

import otel_tokens
from otel_tokens import registry
from otel_tokens.entry_points import AgentCliInstrumentor, AnthropicInstrumentor, OpenAIInstrumentor

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
from anthropic.resources.messages import Messages  # noqa: E402
from openai.resources.chat.completions import Completions  # noqa: E402

ENTRY_POINTS = {"openai": OpenAIInstrumentor, "anthropic": AnthropicInstrumentor,
                "agent_cli": AgentCliInstrumentor}  # fmt: skip
#: one patched function of each backend, read where the patch puts it
TARGETS = {
    "openai": lambda: vars(Completions)["create"],
    "anthropic": lambda: vars(Messages)["create"],
    "agent_cli": lambda: vars(subprocess.Popen)["__init__"],
}


def depth(function) -> int:
    """How many wrapt wrappers sit around ``function``."""
    n = 0
    while "FunctionWrapper" in type(function).__name__:
        n += 1
        function = function.__wrapped__
    return n


class Sequences(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        otel_tokens.uninstrument()
        self.expected = {name: False for name in ENTRY_POINTS}

    @rule()
    def instrument(self) -> None:
        otel_tokens.instrument()
        self.expected = dict.fromkeys(self.expected, True)

    @rule()
    def uninstrument(self) -> None:
        otel_tokens.uninstrument()
        self.expected = dict.fromkeys(self.expected, False)

    @rule(name=sampled_from(sorted(ENTRY_POINTS)))
    def entry_point_instrument(self, name: str) -> None:
        ENTRY_POINTS[name]().instrument()
        self.expected[name] = True

    @rule(name=sampled_from(sorted(ENTRY_POINTS)))
    def entry_point_uninstrument(self, name: str) -> None:
        ENTRY_POINTS[name]().uninstrument()
        self.expected[name] = False

    @invariant()
    def each_patch_is_applied_once_or_not_at_all(self) -> None:
        for name, on in self.expected.items():
            assert depth(TARGETS[name]()) == (1 if on else 0), (name, on)
            assert registry.is_active(name) is on
            assert ENTRY_POINTS[name]().is_instrumented_by_opentelemetry is on

    def teardown(self) -> None:
        otel_tokens.uninstrument()


TestSequences = Sequences.TestCase
TestSequences.settings = hypothesis_settings(max_examples=60, stateful_step_count=12, deadline=None)


def test_the_reported_sequence_through_the_entry_point_leaves_the_sdk_patched():
    instrumentor = OpenAIInstrumentor()
    try:
        instrumentor.instrument()
        instrumentor.uninstrument()
        instrumentor.instrument()
        assert depth(TARGETS["openai"]()) == 1
        otel_tokens.instrument()  # the other API on top: still once
        assert depth(TARGETS["openai"]()) == 1
    finally:
        otel_tokens.uninstrument()
    assert depth(TARGETS["openai"]()) == 0 and not instrumentor.is_instrumented_by_opentelemetry


def _chat_client():
    httpx = pytest.importorskip("httpx", reason="the openai client on httpx (not in the minimum-versions venv)")

    body = {"id": "c1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}  # fmt: skip
    from tests.sdk.replay import http_module

    http = http_module("openai") if hasattr(openai, "_base_client") else httpx
    transport = http.MockTransport(lambda request: http.Response(200, json=body))
    return openai.OpenAI(api_key="k", max_retries=0, http_client=http.Client(transport=transport))


def test_the_loader_gives_way_to_the_real_wrapper_at_the_first_call(telemetry):
    """The per-call module loads at the first call; its wrapper then replaces the loader, so
    later calls skip a step; uninstrument() still restores the SDK's own method."""
    original = vars(Completions)["create"]
    otel_tokens.instrument()
    try:
        loader = vars(Completions)["create"]
        client = _chat_client()
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}])
        real = vars(Completions)["create"]
        assert real is not loader and depth(real) == 1 and real.__wrapped__ is original
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}])
        assert len(telemetry.finished()) == 2
    finally:
        otel_tokens.uninstrument()
    assert vars(Completions)["create"] is original


def test_the_loader_stays_when_another_instrumentation_wrapped_the_method_since(telemetry):
    import wrapt

    original = vars(Completions)["create"]
    otel_tokens.instrument()
    try:
        wrapt.wrap_function_wrapper(Completions, "create", lambda wrapped, i, a, k: wrapped(*a, **k))
        theirs = vars(Completions)["create"]
        _chat_client().chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}])
        assert vars(Completions)["create"] is theirs and depth(theirs) == 2  # theirs on top, ours under
        assert len(telemetry.finished()) == 1
        setattr(Completions, "create", theirs.__wrapped__)  # their uninstrument
    finally:
        otel_tokens.uninstrument()
    assert vars(Completions)["create"] is original
