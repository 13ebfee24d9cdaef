"""Agent names from CrewAI without code changes: a real crew (sequential, and hierarchical
with a manager delegating to a worker) whose agents use CrewAI's own OpenAI-compatible model
client (``LLM(base_url=...)``) against the local chat server; every call is recorded under
the role of the agent making it, with the token figures exact as sent; the crew's run is the
conversation; a binding in the code wins."""

from __future__ import annotations

import pytest

pytest.importorskip("crewai", reason="crewai is an optional extra (pip install otel-tokens[crewai])")

import otel_tokens  # noqa: E402
from otel_tokens.capture.frameworks import crewai_patches
from otel_tokens.capture.sdk import openai as openai_sdk  # noqa: E402

from ..telemetry.conftest import handling  # noqa: E402
from .chat_server import ChatServer, completion, tool_call  # noqa: E402


@pytest.fixture
def telemetry(monkeypatch):
    for name in ("CREWAI_DISABLE_TELEMETRY", "CREWAI_DISABLE_TRACKING"):  # no network
        monkeypatch.setenv(name, "true")
    monkeypatch.setenv("CREWAI_TRACING_ENABLED", "false")
    with handling(openai_sdk, crewai_patches) as t:
        yield t


def recorded(telemetry) -> list[tuple[str, int, int]]:
    return [(s.attributes["gen_ai.agent.name"], s.attributes["gen_ai.usage.input_tokens"],
             s.attributes["gen_ai.usage.output_tokens"]) for s in telemetry.finished()]  # fmt: skip


def answer(text: str, prompt: int, output: int) -> dict:
    return completion({"content": f"Thought: I know it.\nFinal Answer: {text}"}, prompt, output)


def crew(server: ChatServer, **options):  # type: ignore[no-untyped-def]
    from crewai import LLM, Agent, Crew, Task

    llm = LLM(model="gpt-4o-mini", base_url=server.url, api_key="test")
    researcher = Agent(role="Researcher", goal="Find facts", backstory="Careful.", llm=llm)
    writer = Agent(role="Writer", goal="Write it up", backstory="Clear.", llm=llm)
    if options:
        return Crew(agents=[researcher, writer], manager_llm=llm, tasks=[
            Task(description="Write a note on tides", expected_output="a note")], **options)  # fmt: skip
    return Crew(agents=[researcher, writer], tasks=[
        Task(description="Research tides", expected_output="facts", agent=researcher),
        Task(description="Write a note on tides", expected_output="a note", agent=writer)])  # fmt: skip


def test_each_agent_records_its_calls_under_its_role(telemetry):
    server = ChatServer(answer("tides follow the moon", 120, 12), answer("A note on tides.", 230, 23))
    assert str(crew(server).kickoff()) == "A note on tides."
    assert recorded(telemetry) == [("Researcher", 120, 12), ("Writer", 230, 23)]
    conversations = {s.attributes.get("gen_ai.conversation.id") for s in telemetry.finished()}
    assert len(conversations) == 1 and None not in conversations  # one crew run
    from otel_tokens.account.agents import get_agent

    assert get_agent("Writer").state.figures().total_output_tokens == 23  # its own TokenState
    server.close()


def test_a_hierarchical_manager_and_the_worker_it_delegates_to(telemetry):
    from crewai import Process

    server = ChatServer(
        completion(tool_call("delegate_work_to_coworker", {
            "task": "Write a note on tides", "context": "for a blog", "coworker": "Writer"}), 300, 30),
        answer("A note on tides.", 140, 14),  # the Writer, asked by the manager
        completion({"content": "A note on tides."}, 410, 41),  # the manager, with the Writer's answer
    )  # fmt: skip
    result = crew(server, process=Process.hierarchical).kickoff()
    assert str(result) == "A note on tides."
    assert recorded(telemetry) == [("Crew Manager", 300, 30), ("Writer", 140, 14), ("Crew Manager", 410, 41)]
    server.close()


def test_a_standalone_agent_kickoff_and_a_binding_that_wins(telemetry):
    from crewai import LLM, Agent

    server = ChatServer(answer("4", 50, 5), answer("5", 60, 6))
    llm = LLM(model="gpt-4o-mini", base_url=server.url, api_key="test")
    helper = Agent(role="Helper", goal="Answer", backstory="Quick.", llm=llm)
    helper.kickoff("What is 2+2?")
    with otel_tokens.agent("batch"):
        helper.kickoff("What is 2+3?")
    assert recorded(telemetry) == [("Helper", 50, 5), ("batch", 60, 6)]
    server.close()
