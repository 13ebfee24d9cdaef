"""Agent names from Agno without code changes: a real ``Team`` whose leader delegates to a
member ``Agent``, and agents alone, on Agno's own OpenAI model client
(``OpenAIChat(base_url=...)``) against the local chat server; every call under the agent or
team that made it, the token figures exact as sent; the session is the conversation; streamed
runs too; a binding in the code wins."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("agno.agent", reason="agno is an optional extra (pip install otel-tokens[agno])")

import otel_tokens  # noqa: E402
from otel_tokens.capture.frameworks import agno_patches
from otel_tokens.capture.sdk import openai as openai_sdk  # noqa: E402

from ..telemetry.conftest import handling  # noqa: E402
from .chat_server import ChatServer, completion, tool_call  # noqa: E402


@pytest.fixture
def telemetry(monkeypatch):
    monkeypatch.setenv("AGNO_TELEMETRY", "false")  # no network
    with handling(openai_sdk, agno_patches) as t:
        yield t


def recorded(telemetry) -> list[tuple[str, int, int]]:
    return [(s.attributes["gen_ai.agent.name"], s.attributes["gen_ai.usage.input_tokens"],
             s.attributes["gen_ai.usage.output_tokens"]) for s in telemetry.finished()]  # fmt: skip


def model(server: ChatServer):  # type: ignore[no-untyped-def]
    from agno.models.openai import OpenAIChat

    return OpenAIChat(id="gpt-4o-mini", base_url=server.url, api_key="test")


def test_a_team_leader_and_the_member_it_delegates_to(telemetry):
    from agno.agent import Agent
    from agno.team import Team

    server = ChatServer(
        completion(tool_call("delegate_task_to_member", {"member_id": "billing", "task": "Is invoice 7 paid?"}), 300, 30),
        completion({"content": "Invoice 7 is paid."}, 120, 12),  # the member
        completion({"content": "Your invoice is paid."}, 410, 41),  # the leader again
    )  # fmt: skip
    billing = Agent(name="billing", role="Answers billing questions", model=model(server))
    support = Team(name="support", members=[billing], model=model(server))
    result = support.run("Is my invoice paid?", session_id="session-5")
    assert result.content == "Your invoice is paid."
    assert recorded(telemetry) == [("support", 300, 30), ("billing", 120, 12), ("support", 410, 41)]
    assert {s.attributes.get("gen_ai.conversation.id") for s in telemetry.finished()} == {"session-5"}
    from otel_tokens.account.agents import get_agent

    assert get_agent("billing").state.figures().total_output_tokens == 12  # its own TokenState
    server.close()


def test_streamed_and_async_runs_and_a_binding_that_wins(telemetry):
    from agno.agent import Agent

    server = ChatServer(completion({"content": "one"}, 50, 5), completion({"content": "two"}, 60, 6),
                        completion({"content": "three"}, 70, 7))  # fmt: skip
    helper = Agent(name="helper", model=model(server))
    events = list(helper.run("first", stream=True))  # the run goes on as events are consumed
    assert events

    async def more():  # type: ignore[no-untyped-def]
        await helper.arun("second")
        with otel_tokens.agent("batch"):
            await helper.arun("third")

    asyncio.run(more())
    assert [name for name, *_ in recorded(telemetry)] == ["helper", "helper", "batch"]
    assert [tokens for _, tokens, _ in recorded(telemetry)] == [50, 60, 70]  # Agno asks for the usage chunk
    server.close()
