"""Agent names and conversations from LangGraph without code changes: real graphs (a
multi-agent graph whose agents are nodes, one of them a subgraph) whose nodes call the real
``openai`` client against a fake Chat Completions endpoint, run sync and async; the thread id
is the conversation; an ``otel_tokens.agent(...)`` binding still wins."""

from __future__ import annotations

import asyncio
from typing import TypedDict

import pytest

pytest.importorskip("langgraph", reason="langgraph is an optional extra (pip install otel-tokens[langgraph])")

import otel_tokens  # noqa: E402
from otel_tokens.capture.frameworks import langgraph_patches
from otel_tokens.capture.sdk import openai as openai_sdk  # noqa: E402

from ..telemetry.conftest import handling  # noqa: E402
from .test_openai_agents import Endpoint, completion  # noqa: E402


class State(TypedDict):
    text: str


@pytest.fixture
def telemetry():
    with handling(openai_sdk, langgraph_patches) as t:
        yield t


def graph(endpoint: Endpoint):  # type: ignore[no-untyped-def]
    """researcher (a subgraph: plan, then search) -> writer; each step asks the model."""
    from langgraph.graph import END, START, StateGraph

    def asks(tag: str):  # type: ignore[no-untyped-def]
        async def node(state: State) -> State:
            answer = await endpoint.client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": f"{tag}: {state['text']}"}])  # fmt: skip
            return {"text": answer.choices[0].message.content}

        return node

    inner = StateGraph(State)
    inner.add_node("plan", asks("plan"))
    inner.add_node("search", asks("search"))
    inner.add_edge(START, "plan")
    inner.add_edge("plan", "search")
    inner.add_edge("search", END)
    outer = StateGraph(State)
    outer.add_node("researcher", inner.compile())
    outer.add_node("writer", asks("write"))
    outer.add_edge(START, "researcher")
    outer.add_edge("researcher", "writer")
    outer.add_edge("writer", END)
    return outer.compile()


def recorded(telemetry) -> list[tuple[str, int, str | None]]:
    return [(s.attributes["gen_ai.agent.name"], s.attributes["gen_ai.usage.input_tokens"],
             s.attributes.get("gen_ai.conversation.id")) for s in telemetry.finished()]  # fmt: skip


def answers() -> Endpoint:
    return Endpoint(completion({"content": "a plan"}, 10, 1), completion({"content": "found"}, 20, 2),
                    completion({"content": "the report"}, 30, 3))  # fmt: skip


def test_each_call_is_recorded_under_its_agent_node_in_the_thread(telemetry):
    app = graph(answers())
    result = asyncio.run(app.ainvoke({"text": "topic"}, {"configurable": {"thread_id": "thread-3"}}))
    assert result == {"text": "the report"}
    assert recorded(telemetry) == [("researcher", 10, "thread-3"), ("researcher", 20, "thread-3"),
                                   ("writer", 30, "thread-3")]  # fmt: skip
    from otel_tokens.account.agents import get_agent

    assert get_agent("writer").state.figures().total_output_tokens >= 3  # its own TokenState


def test_streamed_graph_without_a_thread(telemetry):
    app = graph(answers())

    async def run():
        return [chunk async for chunk in app.astream({"text": "topic"})]

    assert len(asyncio.run(run())) == 2  # one update per top-level node
    assert recorded(telemetry) == [("researcher", 10, None), ("researcher", 20, None), ("writer", 30, None)]


def test_a_binding_in_the_code_wins(telemetry):
    app = graph(answers())

    async def run():
        with otel_tokens.agent("nightly", conversation="job-1"):
            await app.ainvoke({"text": "topic"}, {"configurable": {"thread_id": "thread-3"}})

    asyncio.run(run())
    assert recorded(telemetry) == [("nightly", 10, "job-1"), ("nightly", 20, "job-1"), ("nightly", 30, "job-1")]


def test_outside_any_graph_the_call_is_the_default_agent(telemetry):
    endpoint = Endpoint(completion({"content": "plain"}, 12, 2))
    asyncio.run(endpoint.client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}]))
    assert recorded(telemetry) == [("default", 12, None)]


def test_a_sync_graph_whose_nodes_run_in_worker_threads(telemetry):
    import openai
    from langgraph.graph import END, START, StateGraph

    from ..sdk.replay import http_module

    http = http_module("openai")
    bodies = [completion({"content": "a"}, 11, 1), completion({"content": "b"}, 22, 2)]
    client = openai.OpenAI(api_key="test", max_retries=0, http_client=http.Client(
        transport=http.MockTransport(lambda request: http.Response(200, json=bodies.pop(0)))))  # fmt: skip

    def node(state: State) -> State:
        answer = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": state["text"]}])
        return {"text": answer.choices[0].message.content}

    g = StateGraph(State)
    g.add_node("critic", node)
    g.add_node("editor", node)
    g.add_edge(START, "critic")
    g.add_edge("critic", "editor")
    g.add_edge("editor", END)
    g.compile().invoke({"text": "draft"}, {"configurable": {"thread_id": "t-9"}})
    assert recorded(telemetry) == [("critic", 11, "t-9"), ("editor", 22, "t-9")]
