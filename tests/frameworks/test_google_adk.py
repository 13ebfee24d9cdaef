"""Agent names from Google ADK without code changes: a real ``Runner`` of ``LlmAgent``s on
ADK's own OpenAI-compatible model (``LiteLlm(api_base=...)``) against the local chat server;
a root agent transferring to its sub-agent, and an agent used as a tool, each call recorded
under the agent that made it, the token figures exact as sent; the ADK session is the
conversation; a binding in the code wins."""

from __future__ import annotations

import asyncio
import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network at import
pytest.importorskip("google.adk", reason="google-adk is an optional extra (pip install otel-tokens[google-adk])")
pytest.importorskip("litellm", reason="the google-adk extra brings litellm (ADK's OpenAI-compatible models)")

import otel_tokens  # noqa: E402
from otel_tokens.capture.frameworks import google_adk_patches
from otel_tokens.capture.sdk import litellm_patches
from otel_tokens.capture.sdk import openai as openai_sdk  # noqa: E402

from ..telemetry.conftest import handling  # noqa: E402
from .chat_server import ChatServer, completion, tool_call  # noqa: E402


@pytest.fixture
def telemetry():
    with handling(openai_sdk, litellm_patches, google_adk_patches) as t:
        yield t


def recorded(telemetry) -> list[tuple[str, int, int, str | None]]:
    return [(s.attributes["gen_ai.agent.name"], s.attributes["gen_ai.usage.input_tokens"],
             s.attributes["gen_ai.usage.output_tokens"], s.attributes.get("gen_ai.conversation.id"))
            for s in telemetry.finished()]  # fmt: skip


def model(server: ChatServer):  # type: ignore[no-untyped-def]
    from google.adk.models.lite_llm import LiteLlm

    return LiteLlm(model="openai/gpt-4o-mini", api_base=server.url, api_key="test")


def run(agent, text: str, session: str = "session-1") -> list[str]:  # type: ignore[no-untyped-def]
    """The authors of the run's events with text, through ADK's in-memory runner."""
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    runner = InMemoryRunner(agent=agent, app_name="app")

    async def go() -> list[str]:
        await runner.session_service.create_session(app_name="app", user_id="u", session_id=session)
        message = types.Content(role="user", parts=[types.Part(text=text)])
        return [event.author async for event in runner.run_async(user_id="u", session_id=session, new_message=message)
                if event.content and event.content.parts and event.content.parts[0].text]  # fmt: skip

    return asyncio.run(go())


def test_a_transfer_to_a_sub_agent_records_each_agent_in_the_session(telemetry):
    from google.adk.agents import LlmAgent

    server = ChatServer(completion(tool_call("transfer_to_agent", {"agent_name": "billing"}), 100, 10),
                        completion({"content": "Your invoice is paid."}, 200, 20))  # fmt: skip
    billing = LlmAgent(name="billing", model=model(server), instruction="Answer billing questions.",
                       description="Billing questions.")  # fmt: skip
    triage = LlmAgent(name="triage", model=model(server), instruction="Route.", sub_agents=[billing])
    assert run(triage, "Is my invoice paid?", "session-7") == ["billing"]
    assert recorded(telemetry) == [("triage", 100, 10, "session-7"), ("billing", 200, 20, "session-7")]
    server.close()


def test_an_agent_used_as_a_tool_and_a_binding_that_wins(telemetry):
    from google.adk.agents import LlmAgent
    from google.adk.tools.agent_tool import AgentTool

    server = ChatServer(completion(tool_call("expert", {"request": "2+2?"}), 300, 30),
                        completion({"content": "4"}, 40, 4),  # the expert, as the lead's tool
                        completion({"content": "The expert says 4."}, 410, 41),
                        completion({"content": "ok"}, 50, 5))  # fmt: skip
    expert = LlmAgent(name="expert", model=model(server), instruction="Do sums.", description="Does sums.")
    lead = LlmAgent(name="lead", model=model(server), instruction="Ask the expert.", tools=[AgentTool(expert)])
    assert run(lead, "What is 2+2?")[-1] == "lead"
    with otel_tokens.agent("batch"):
        run(LlmAgent(name="helper", model=model(server), instruction="Help."), "hi", "session-2")
    assert [(name, tokens) for name, tokens, *_ in recorded(telemetry)] == [
        ("lead", 300), ("expert", 40), ("lead", 410), ("batch", 50)]  # fmt: skip
    server.close()
