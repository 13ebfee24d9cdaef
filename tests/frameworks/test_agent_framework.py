"""Agent names from Microsoft Agent Framework without code changes: real ``Agent``s on the
framework's own OpenAI Chat Completions client (``OpenAIChatCompletionClient(base_url=...)``)
against the local chat server; an agent used as another's tool records its own calls; awaited
and streamed runs; the token figures exact as sent; the session is the conversation; a
binding in the code wins."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("agent_framework", reason="agent-framework is an optional extra (pip install otel-tokens[agent-framework])")
pytest.importorskip("agent_framework_openai", reason="the agent-framework extra brings agent-framework-openai")

import otel_tokens  # noqa: E402
from otel_tokens.capture.frameworks import agent_framework_patches
from otel_tokens.capture.sdk import openai as openai_sdk  # noqa: E402

from ..telemetry.conftest import handling  # noqa: E402
from .chat_server import ChatServer, completion, tool_call  # noqa: E402


@pytest.fixture
def telemetry():
    with handling(openai_sdk, agent_framework_patches) as t:
        yield t


def recorded(telemetry) -> list[tuple[str, int, int]]:
    return [(s.attributes["gen_ai.agent.name"], s.attributes["gen_ai.usage.input_tokens"],
             s.attributes["gen_ai.usage.output_tokens"]) for s in telemetry.finished()]  # fmt: skip


def agent(server: ChatServer, name: str, **kwargs):  # type: ignore[no-untyped-def]
    from agent_framework import Agent
    from agent_framework.openai import OpenAIChatCompletionClient

    client = OpenAIChatCompletionClient(model="gpt-4o-mini", base_url=server.url, api_key="test")
    return Agent(client=client, name=name, instructions=f"You are {name}.", **kwargs)


def test_an_agent_used_as_a_tool_records_its_own_calls_in_the_session(telemetry):
    server = ChatServer(completion(tool_call("expert", {"task": "2+2?"}), 300, 30),
                        completion({"content": "4"}, 40, 4),  # the expert, as the lead's tool
                        completion({"content": "The expert says 4."}, 410, 41))  # fmt: skip
    expert = agent(server, "expert", description="Does sums.")
    lead = agent(server, "lead", tools=[expert.as_tool()])

    async def run():  # type: ignore[no-untyped-def]
        return await lead.run("What is 2+2?", session=lead.create_session(session_id="session-3"))

    assert asyncio.run(run()).text == "The expert says 4."
    assert recorded(telemetry) == [("lead", 300, 30), ("expert", 40, 4), ("lead", 410, 41)]
    assert telemetry.finished()[0].attributes.get("gen_ai.conversation.id") == "session-3"
    server.close()


def test_a_streamed_run_and_a_binding_that_wins(telemetry):
    server = ChatServer(completion({"content": "one"}, 50, 5), completion({"content": "two"}, 60, 6))
    helper = agent(server, "helper")

    async def run():  # type: ignore[no-untyped-def]
        updates = [update async for update in helper.run("first", stream=True)]
        with otel_tokens.agent("batch"):
            await helper.run("second")
        return updates

    assert asyncio.run(run())
    assert server.streamed == [True, False]
    assert [(name, tokens) for name, tokens, _ in recorded(telemetry)] == [("helper", 50), ("batch", 60)]
    server.close()
