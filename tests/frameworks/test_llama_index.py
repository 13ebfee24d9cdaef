"""Agent names from LlamaIndex agents without code changes: a real ``AgentWorkflow`` (triage
handing off to billing) of ``FunctionAgent``s and a ``ReActAgent``, on LlamaIndex's own OpenAI
model client (``api_base=``) against the local chat server. LlamaIndex streams; asked for the
usage chunk (``stream_options``) the figures are exact as sent, otherwise they are marked
estimates, still under the agent's name. The workflow run is the conversation; a binding in
the code wins."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("llama_index.core", reason="llama-index is an optional extra (pip install otel-tokens[llama-index])")
pytest.importorskip("llama_index.llms.openai", reason="the llama-index extra brings llama-index-llms-openai")

import otel_tokens  # noqa: E402
from otel_tokens.capture.frameworks import llama_index_patches
from otel_tokens.capture.sdk import openai as openai_sdk  # noqa: E402

from ..telemetry.conftest import handling  # noqa: E402
from .chat_server import ChatServer, completion, tool_call  # noqa: E402

USAGE = {"stream_options": {"include_usage": True}}


@pytest.fixture
def telemetry():
    with handling(openai_sdk, llama_index_patches) as t:
        yield t


def recorded(telemetry) -> list[tuple]:
    return [(s.attributes["gen_ai.agent.name"], s.attributes.get("gen_ai.usage.input_tokens"),
             s.attributes.get("gen_ai.usage.output_tokens")) for s in telemetry.finished()]  # fmt: skip


def llm(server: ChatServer, **kwargs):  # type: ignore[no-untyped-def]
    from llama_index.llms.openai import OpenAI

    return OpenAI(model="gpt-4o-mini", api_base=server.url, api_key="test", **kwargs)


def workflow(server: ChatServer, **kwargs):  # type: ignore[no-untyped-def]
    from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent

    triage = FunctionAgent(name="triage", description="Routes the user.", system_prompt="Route.",
                           llm=llm(server, **kwargs), can_handoff_to=["billing"])  # fmt: skip
    billing = FunctionAgent(name="billing", description="Answers billing questions.",
                            system_prompt="Answer billing questions.", llm=llm(server, **kwargs))  # fmt: skip
    return AgentWorkflow(agents=[triage, billing], root_agent="triage")


def run(agent, message: str):  # type: ignore[no-untyped-def]
    """The workflow's result (LlamaIndex starts a run inside a running event loop)."""

    async def go():  # type: ignore[no-untyped-def]
        return await agent.run(user_msg=message)

    return asyncio.run(go())


def handoff() -> ChatServer:
    return ChatServer(completion(tool_call("handoff", {"to_agent": "billing", "reason": "invoice"}), 100, 10),
                      completion({"content": "Your invoice is paid."}, 200, 20))  # fmt: skip


def test_a_multi_agent_workflow_records_each_agent_exactly_when_usage_is_streamed(telemetry):
    server = handoff()
    result = run(workflow(server, additional_kwargs=USAGE), "Is my invoice paid?")
    assert str(result) == "Your invoice is paid."
    assert server.streamed == [True, True]
    assert recorded(telemetry) == [("triage", 100, 10), ("billing", 200, 20)]
    runs = {s.attributes.get("gen_ai.conversation.id") for s in telemetry.finished()}
    assert len(runs) == 1 and None not in runs  # the workflow run
    server.close()


def test_without_the_usage_chunk_the_figures_are_marked_estimates_of_the_right_agent(telemetry):
    server = handoff()
    run(workflow(server), "Is my invoice paid?")
    spans = telemetry.finished()
    assert [s.attributes["gen_ai.agent.name"] for s in spans] == ["triage", "billing"]
    assert {s.attributes["otel_tokens.usage.source"] for s in spans} == {"estimated"}
    assert all(s.attributes["gen_ai.usage.input_tokens"] > 0 for s in spans)
    server.close()


def test_a_react_agent_and_a_binding_that_wins(telemetry):
    from llama_index.core.agent.workflow import ReActAgent

    server = ChatServer(completion({"content": "Thought: I can answer.\nAnswer: 4"}, 70, 7),
                        completion({"content": "Thought: I can answer.\nAnswer: 5"}, 80, 8))  # fmt: skip
    solver = ReActAgent(name="solver", description="Does sums.", llm=llm(server, additional_kwargs=USAGE))

    async def both():  # type: ignore[no-untyped-def]
        first = await solver.run(user_msg="2+2?")
        async with otel_tokens.agent("batch"):
            second = await solver.run(user_msg="2+3?")
        return str(first), str(second)

    assert asyncio.run(both()) == ("4", "5")
    assert recorded(telemetry) == [("solver", 70, 7), ("batch", 80, 8)]
    server.close()
