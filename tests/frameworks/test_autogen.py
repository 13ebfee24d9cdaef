"""Agent names from AutoGen AgentChat without code changes: real ``AssistantAgent``s on
AutoGen's own OpenAI client (``OpenAIChatCompletionClient(base_url=...)``) against the local
chat server, alone and in a round-robin team; an agent used as a tool by another records its
own calls; every token figure exact as sent, under the agent that made the call; the team's
id is the conversation; a binding in the code wins."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("autogen_agentchat", reason="autogen is an optional extra (pip install otel-tokens[autogen])")
pytest.importorskip("autogen_ext.models.openai", reason="the autogen extra brings autogen-ext[openai]")

import otel_tokens  # noqa: E402
from otel_tokens.capture.frameworks import autogen_patches
from otel_tokens.capture.sdk import openai as openai_sdk  # noqa: E402

from ..telemetry.conftest import handling  # noqa: E402
from .chat_server import ChatServer, completion, tool_call  # noqa: E402


@pytest.fixture
def telemetry():
    with handling(openai_sdk, autogen_patches) as t:
        yield t


def recorded(telemetry) -> list[tuple[str, int, int]]:
    return [(s.attributes["gen_ai.agent.name"], s.attributes["gen_ai.usage.input_tokens"],
             s.attributes["gen_ai.usage.output_tokens"]) for s in telemetry.finished()]  # fmt: skip


def client(server: ChatServer):  # type: ignore[no-untyped-def]
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    return OpenAIChatCompletionClient(model="gpt-4o-mini", base_url=server.url, api_key="test")


def test_a_round_robin_team_records_each_agent_in_the_team_conversation(telemetry):
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import MaxMessageTermination
    from autogen_agentchat.teams import RoundRobinGroupChat

    server = ChatServer(completion({"content": "A draft."}, 100, 10), completion({"content": "Looks good."}, 200, 20))
    writer = AssistantAgent("writer", model_client=client(server))
    critic = AssistantAgent("critic", model_client=client(server))
    team = RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(3))
    result = asyncio.run(team.run(task="Write a haiku."))
    assert [m.source for m in result.messages] == ["user", "writer", "critic"]
    assert recorded(telemetry) == [("writer", 100, 10), ("critic", 200, 20)]
    teams = {s.attributes.get("gen_ai.conversation.id") for s in telemetry.finished()}
    assert len(teams) == 1 and None not in teams
    server.close()


def test_an_agent_used_as_a_tool_records_its_own_calls(telemetry):
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.tools import AgentTool

    server = ChatServer(completion(tool_call("expert", {"task": "2+2?"}), 300, 30),
                        completion({"content": "4"}, 40, 4),  # the expert, as the lead's tool
                        completion({"content": "The expert says 4."}, 410, 41))  # fmt: skip
    expert = AssistantAgent("expert", model_client=client(server), description="Does sums.")
    lead = AssistantAgent("lead", model_client=client(server), tools=[AgentTool(expert)],
                          reflect_on_tool_use=True)  # fmt: skip
    result = asyncio.run(lead.run(task="What is 2+2?"))
    assert result.messages[-1].content == "The expert says 4."
    assert recorded(telemetry) == [("lead", 300, 30), ("expert", 40, 4), ("lead", 410, 41)]
    server.close()


def test_a_binding_in_the_code_wins(telemetry):
    from autogen_agentchat.agents import AssistantAgent

    server = ChatServer(completion({"content": "ok"}, 30, 3))
    helper = AssistantAgent("helper", model_client=client(server))

    async def run():  # type: ignore[no-untyped-def]
        with otel_tokens.agent("batch"):
            await helper.run(task="hi")

    asyncio.run(run())
    assert recorded(telemetry) == [("batch", 30, 3)]
    server.close()
