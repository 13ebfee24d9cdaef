"""Agent names from Semantic Kernel agents without code changes: real ``ChatCompletionAgent``s
on Semantic Kernel's own OpenAI connector (``OpenAIChatCompletion`` with an ``AsyncOpenAI``
pointed at the local chat server); an agent used as another's plugin records its own calls;
answered and streamed; the token figures exact as sent; the thread is the conversation; a
binding in the code wins."""

from __future__ import annotations

import asyncio

import openai
import pytest

pytest.importorskip("semantic_kernel", reason="semantic-kernel is an optional extra (pip install otel-tokens[semantic-kernel])")

import otel_tokens  # noqa: E402
from otel_tokens.capture.sdk import openai as openai_sdk
from otel_tokens.capture.frameworks import semantic_kernel_patches  # noqa: E402

from ..telemetry.conftest import handling  # noqa: E402
from .chat_server import ChatServer, completion, tool_call  # noqa: E402


@pytest.fixture
def telemetry():
    with handling(openai_sdk, semantic_kernel_patches) as t:
        yield t


def recorded(telemetry) -> list[tuple[str, int, int]]:
    return [(s.attributes["gen_ai.agent.name"], s.attributes["gen_ai.usage.input_tokens"],
             s.attributes["gen_ai.usage.output_tokens"]) for s in telemetry.finished()]  # fmt: skip


def agent(server: ChatServer, name: str, **kwargs):  # type: ignore[no-untyped-def]
    from semantic_kernel.agents import ChatCompletionAgent
    from semantic_kernel.connectors.ai.open_ai import OpenAIChatCompletion

    client = openai.AsyncOpenAI(base_url=server.url, api_key="test", max_retries=0)
    service = OpenAIChatCompletion(ai_model_id="gpt-4o-mini", async_client=client)
    return ChatCompletionAgent(service=service, name=name, instructions=f"You are {name}.", **kwargs)


def test_an_agent_used_as_a_plugin_records_its_own_calls_in_the_thread(telemetry):
    from semantic_kernel.agents import ChatHistoryAgentThread

    server = ChatServer(completion(tool_call("expert-expert", {"messages": "2+2?"}), 300, 30),
                        completion({"content": "4"}, 40, 4),  # the expert, as the lead's plugin
                        completion({"content": "The expert says 4."}, 410, 41))  # fmt: skip
    expert = agent(server, "expert", description="Does sums.")
    lead = agent(server, "lead", plugins=[expert])

    async def run():  # type: ignore[no-untyped-def]
        thread = ChatHistoryAgentThread(thread_id="thread-4")
        return await lead.get_response("What is 2+2?", thread=thread)

    assert str(asyncio.run(run()).content) == "The expert says 4."
    assert recorded(telemetry) == [("lead", 300, 30), ("expert", 40, 4), ("lead", 410, 41)]
    assert telemetry.finished()[0].attributes.get("gen_ai.conversation.id") == "thread-4"
    server.close()


def test_a_streamed_answer_and_a_binding_that_wins(telemetry):
    server = ChatServer(completion({"content": "one"}, 50, 5), completion({"content": "two"}, 60, 6))
    helper = agent(server, "helper")

    async def run():  # type: ignore[no-untyped-def]
        chunks = [chunk async for chunk in helper.invoke_stream("first")]
        with otel_tokens.agent("batch"):
            await helper.get_response("second")
        return chunks

    assert asyncio.run(run())
    assert server.streamed == [True, False]
    assert recorded(telemetry) == [("helper", 50, 5), ("batch", 60, 6)]  # SK asks for the usage chunk
    server.close()
