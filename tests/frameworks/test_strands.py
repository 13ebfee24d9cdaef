"""Agent names from Strands Agents without code changes: real ``Agent``s on Strands' own
OpenAI model provider (``OpenAIModel(client_args={"base_url": ...})``, which streams and asks
for the usage chunk) against the local chat server; an agent used as another's tool records
its own calls; the token figures exact as sent; a binding in the code wins."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("strands", reason="strands is an optional extra (pip install otel-tokens[strands])")
pytest.importorskip("strands.models.openai", reason="the strands extra brings strands-agents[openai]")

import otel_tokens  # noqa: E402
from otel_tokens.capture.sdk import openai as openai_sdk
from otel_tokens.capture.frameworks import strands_patches  # noqa: E402

from ..telemetry.conftest import handling  # noqa: E402
from .chat_server import ChatServer, completion, tool_call  # noqa: E402


@pytest.fixture
def telemetry():
    with handling(openai_sdk, strands_patches) as t:
        yield t


def recorded(telemetry) -> list[tuple[str, int, int]]:
    return [(s.attributes["gen_ai.agent.name"], s.attributes["gen_ai.usage.input_tokens"],
             s.attributes["gen_ai.usage.output_tokens"]) for s in telemetry.finished()]  # fmt: skip


def model(server: ChatServer):  # type: ignore[no-untyped-def]
    from strands.models.openai import OpenAIModel

    return OpenAIModel(client_args={"base_url": server.url, "api_key": "test"}, model_id="gpt-4o-mini")


def test_an_agent_used_as_a_tool_records_its_own_calls(telemetry):
    from strands import Agent, tool

    server = ChatServer(completion(tool_call("ask_expert", {"question": "2+2?"}), 300, 30),
                        completion({"content": "4"}, 40, 4),  # the expert, inside the lead's tool
                        completion({"content": "The expert says 4."}, 410, 41))  # fmt: skip
    expert = Agent(name="expert", model=model(server), callback_handler=None)

    @tool
    def ask_expert(question: str) -> str:
        """Ask the expert a question."""
        return str(expert(question))

    lead = Agent(name="lead", model=model(server), tools=[ask_expert], callback_handler=None)
    assert str(lead("What is 2+2?")).strip() == "The expert says 4."
    assert server.streamed == [True, True, True]
    assert recorded(telemetry) == [("lead", 300, 30), ("expert", 40, 4), ("lead", 410, 41)]
    server.close()


def test_async_runs_in_the_agents_session_and_a_binding_that_wins(telemetry, tmp_path):
    from strands import Agent
    from strands.session.file_session_manager import FileSessionManager

    server = ChatServer(completion({"content": "one"}, 50, 5), completion({"content": "two"}, 60, 6))
    session = FileSessionManager(session_id="session-9", storage_dir=str(tmp_path))
    helper = Agent(name="helper", model=model(server), callback_handler=None, session_manager=session)

    async def run():  # type: ignore[no-untyped-def]
        await helper.invoke_async("first")
        with otel_tokens.agent("batch"):
            await helper.invoke_async("second")

    asyncio.run(run())
    assert recorded(telemetry) == [("helper", 50, 5), ("batch", 60, 6)]
    assert [s.attributes.get("gen_ai.conversation.id") for s in telemetry.finished()] == ["session-9"] * 2
    server.close()
