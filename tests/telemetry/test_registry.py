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
