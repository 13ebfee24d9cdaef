"""Run scopes, the way agent names are told for frameworks with no readable run context: the
agent-run methods of a small framework-shaped module (made here, as the real frameworks' shapes
are each tested in their own file) are wrapped at its import; the run is current while the
method runs or its coroutine or stream steps, and nowhere else; the innermost wins; a
``describe`` that breaks is counted and the call goes through unchanged; uninstall restores."""

from __future__ import annotations

import asyncio
import sys
import types

import pytest

from otel_tokens.account.agents import FrameworkRun, current_agent
from otel_tokens.capture.frameworks.names import RunScopes

from ..telemetry.conftest import handling

SOURCE = '''
class Agent:
    def __init__(self, name, inner=None):
        self.name, self.inner = name, inner

    def run(self, seen):
        seen.append(NAMES())
        if self.inner is not None:
            self.inner.run(seen)
        seen.append(NAMES())
        return "done"

    async def arun(self, seen):
        seen.append(NAMES())
        return "adone"

    def stream(self, seen):
        for _ in range(2):
            seen.append(NAMES())
            yield "item"

    async def astream(self, seen):
        for _ in range(2):
            seen.append(NAMES())
            yield "item"

    def later(self, seen):
        return self.arun(seen)  # a coroutine made here, awaited by the caller
'''


def describe(agent, _args, _kwargs):  # type: ignore[no-untyped-def]
    if agent.name == "broken":
        raise RuntimeError("the framework moved")
    return FrameworkRun(agent.name, f"conv-{agent.name}")


@pytest.fixture
def framework():
    scopes = RunScopes("fakeframework", [("fakeframework", "Agent", method, describe)
                                         for method in ("run", "arun", "stream", "astream", "later")])  # fmt: skip
    module = types.ModuleType("fakeframework")
    module.NAMES = lambda: current_agent().name  # type: ignore[attr-defined]
    sys.modules["fakeframework"] = module
    try:
        with handling() as telemetry:
            assert scopes.install()
            exec(SOURCE, module.__dict__)  # noqa: S102 - the class appears after install: patched
            scopes._patch(module)  # what the import hook does when the module finishes loading
            yield module, telemetry, scopes
            scopes.uninstall()
    finally:
        del sys.modules["fakeframework"]


def test_sync_runs_nest_and_the_innermost_wins(framework):
    module, _, _ = framework
    seen: list[str] = []
    assert module.Agent("manager", module.Agent("worker")).run(seen) == "done"
    assert seen == ["manager", "worker", "worker", "manager"]
    assert current_agent().name == "default"  # nothing left behind


def test_coroutines_and_streams_are_the_agents_only_while_they_step(framework):
    module, _, _ = framework
    seen: list[str] = []
    agent = module.Agent("streamer")
    for _ in agent.stream(seen):
        seen.append(current_agent().name)  # the consumer, between items

    async def run():  # type: ignore[no-untyped-def]
        assert await agent.arun(seen) == "adone"
        assert await agent.later(seen) == "adone"
        async for _ in agent.astream(seen):
            seen.append(current_agent().name)

    asyncio.run(run())
    assert seen == ["streamer", "default", "streamer", "default", "streamer", "streamer",
                    "streamer", "default", "streamer", "default"]  # fmt: skip


def test_a_describe_that_breaks_is_counted_and_the_call_goes_through(framework):
    module, telemetry, _ = framework
    seen: list[str] = []
    assert module.Agent("broken").run(seen) == "done"
    assert seen == ["default", "default"]
    assert telemetry.errors().get("internal") == 1


def test_another_frameworks_uninstall_leaves_these_and_uninstall_restores(framework):
    module, _, scopes = framework
    RunScopes("otherframework", []).uninstall()  # not installed: the shared reader stays
    seen: list[str] = []
    module.Agent("still").run(seen)
    scopes.uninstall()
    assert not hasattr(module.Agent.__dict__["run"], "__wrapped__")  # the original function
    module.Agent("gone").run(seen)
    assert seen == ["still", "still", "default", "default"]
