"""Agent names from smolagents without code changes: real ``ToolCallingAgent``s on
smolagents' own OpenAI-compatible model client (``OpenAIServerModel(api_base=...)``) against
the local chat server; a manager calling its managed agent records each call under the agent
that made it, with the token figures exact as sent; streamed runs too; a binding wins."""

from __future__ import annotations

import pytest

pytest.importorskip("smolagents", reason="smolagents is an optional extra (pip install otel-tokens[smolagents])")

import otel_tokens  # noqa: E402
from otel_tokens.capture.sdk import openai as openai_sdk
from otel_tokens.capture.frameworks import smolagents_patches  # noqa: E402

from ..telemetry.conftest import handling  # noqa: E402
from .chat_server import ChatServer, completion, tool_call  # noqa: E402


@pytest.fixture
def telemetry():
    with handling(openai_sdk, smolagents_patches) as t:
        yield t


def recorded(telemetry) -> list[tuple[str, int, int]]:
    return [(s.attributes["gen_ai.agent.name"], s.attributes["gen_ai.usage.input_tokens"],
             s.attributes["gen_ai.usage.output_tokens"]) for s in telemetry.finished()]  # fmt: skip


def model(server: ChatServer):  # type: ignore[no-untyped-def]
    from smolagents import OpenAIServerModel

    return OpenAIServerModel(model_id="gpt-4o-mini", api_base=server.url, api_key="test")


def final(answer: str, prompt: int, output: int, call_id: str = "call_final") -> dict:
    return completion(tool_call("final_answer", {"answer": answer}, call_id), prompt, output)


def test_a_manager_and_its_managed_agent_each_record_their_calls(telemetry):
    from smolagents import ToolCallingAgent

    server = ChatServer(
        completion(tool_call("researcher", {"task": "Find the boiling point of water"}, "call_1"), 300, 30),
        final("100 C", 120, 12, "call_2"),  # the managed agent
        final("Water boils at 100 C.", 410, 41, "call_3"),  # the manager again
    )  # fmt: skip
    researcher = ToolCallingAgent(tools=[], model=model(server), name="researcher",
                                  description="Looks facts up.", max_steps=2)  # fmt: skip
    manager = ToolCallingAgent(tools=[], model=model(server), name="manager",
                               managed_agents=[researcher], max_steps=2)  # fmt: skip
    assert manager.run("At what temperature does water boil?") == "Water boils at 100 C."
    assert recorded(telemetry) == [("manager", 300, 30), ("researcher", 120, 12), ("manager", 410, 41)]
    from otel_tokens.account.agents import get_agent

    assert get_agent("researcher").state.figures().total_output_tokens == 12  # its own TokenState
    server.close()


def test_a_streamed_run_and_a_binding_that_wins(telemetry):
    from smolagents import ToolCallingAgent

    server = ChatServer(final("4", 50, 5), final("5", 60, 6))
    helper = ToolCallingAgent(tools=[], model=model(server), name="helper", max_steps=2)
    steps = list(helper.run("2+2?", stream=True))  # the run goes on as the steps are consumed
    assert steps
    with otel_tokens.agent("batch"):
        helper.run("2+3?")
    assert recorded(telemetry) == [("helper", 50, 5), ("batch", 60, 6)]
    server.close()
