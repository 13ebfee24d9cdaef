"""Agent names from Pydantic AI without code changes: the real ``Agent`` driving the real
``openai`` client against a fake Chat Completions endpoint (documented format); an agent
called from another agent's tool records the inner agent; a binding in the code wins."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("pydantic_ai", reason="pydantic-ai is an optional extra (pip install otel-tokens[pydantic-ai])")

import otel_tokens  # noqa: E402
from otel_tokens.capture.sdk import openai as openai_sdk
from otel_tokens.capture.frameworks import pydantic_ai_patches  # noqa: E402

from ..telemetry.conftest import handling  # noqa: E402
from .test_openai_agents import Endpoint, completion, recorded, tool_call  # noqa: E402


@pytest.fixture
def telemetry():
    with handling(openai_sdk, pydantic_ai_patches) as t:
        yield t


def model(endpoint: Endpoint):  # type: ignore[no-untyped-def]
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    return OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(openai_client=endpoint.client))


def test_calls_are_recorded_under_the_running_agent_the_innermost_wins(telemetry):
    from pydantic_ai import Agent

    endpoint = Endpoint(completion(tool_call("ask_expert", {"question": "2+2?"}), 80, 8),
                        completion({"content": "4"}, 40, 1),
                        completion({"content": "The expert says 4."}, 120, 6))  # fmt: skip
    expert = Agent(model(endpoint), name="expert")
    lead = Agent(model(endpoint), name="lead")

    @lead.tool_plain
    async def ask_expert(question: str) -> str:
        return (await expert.run(question)).output

    result = asyncio.run(lead.run("What is 2+2?"))
    assert result.output == "The expert says 4."
    assert recorded(telemetry) == [("lead", 80), ("expert", 40), ("lead", 120)]


def test_a_binding_in_the_code_wins(telemetry):
    from pydantic_ai import Agent

    endpoint = Endpoint(completion({"content": "ok"}, 30, 3))
    helper = Agent(model(endpoint), name="helper")

    async def run():
        with otel_tokens.agent("batch"):
            await helper.run("hi")

    asyncio.run(run())
    assert recorded(telemetry) == [("batch", 30)]


def test_the_run_conversation_id_is_on_every_call(telemetry):
    from pydantic_ai import Agent

    endpoint = Endpoint(completion({"content": "one"}, 30, 3), completion({"content": "two"}, 50, 5))
    helper = Agent(model(endpoint), name="helper")

    async def run():
        first = await helper.run("hi", conversation_id="conv-9")
        await helper.run("again", message_history=first.all_messages())  # the history carries it

    asyncio.run(run())
    assert [s.attributes.get("gen_ai.conversation.id") for s in telemetry.finished()] == ["conv-9", "conv-9"]
