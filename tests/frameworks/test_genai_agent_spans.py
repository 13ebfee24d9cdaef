"""Agent names from GenAI ``invoke_agent`` spans, whoever made them: a framework's tracer
(here a provider of its own, not otel_tokens') opens agent spans the way the GenAI agent
conventions say, and the real ``openai`` client calls the local server inside them; the
innermost agent span names the call, through tool and chat spans between; its conversation
id goes on the call; a binding in the code wins; otel_tokens' own spans never name one."""

from __future__ import annotations

import openai
import pytest
from opentelemetry.sdk.trace import TracerProvider

import otel_tokens
from otel_tokens.capture import genai_agents_patches, openai_sdk

from ..telemetry.conftest import handling
from .chat_server import ChatServer, completion


@pytest.fixture
def telemetry():
    with handling(openai_sdk, genai_agents_patches) as t:
        yield t


@pytest.fixture
def tracer():
    """The framework's tracer: a provider made after instrument(), not the handler's."""
    return TracerProvider().get_tracer("some.agent.framework")


def served(*tokens: int) -> tuple[ChatServer, openai.OpenAI]:
    server = ChatServer(*(completion({"content": "ok"}, n, n // 10 + 1) for n in tokens))
    return server, openai.OpenAI(api_key="test", base_url=server.url, max_retries=0)


def ask(client: openai.OpenAI) -> None:
    client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])


def recorded(telemetry) -> list[tuple[str, int, int, str | None]]:
    return [(s.attributes["gen_ai.agent.name"], s.attributes["gen_ai.usage.input_tokens"],
             s.attributes["gen_ai.usage.output_tokens"], s.attributes.get("gen_ai.conversation.id"))
            for s in telemetry.finished() if s.name.startswith("chat")]  # fmt: skip


def invoke_agent(tracer, name: str, conversation: str | None = None):  # type: ignore[no-untyped-def]
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
    if conversation:
        attributes["gen_ai.conversation.id"] = conversation
    return tracer.start_as_current_span(f"invoke_agent {name}", attributes=attributes)


def test_the_innermost_agent_span_names_each_call_through_tool_and_chat_spans(telemetry, tracer):
    server, client = served(100, 200, 300, 400)
    with invoke_agent(tracer, "manager", conversation="conv-7"):
        ask(client)  # the agent span is current
        with tracer.start_as_current_span("execute_tool delegate",
                                          attributes={"gen_ai.operation.name": "execute_tool"}):
            with invoke_agent(tracer, "worker"):
                with tracer.start_as_current_span("chat gpt-4o-mini",
                                                  attributes={"gen_ai.operation.name": "chat"}):
                    ask(client)  # worker, two spans down; its conversation is the manager's
            ask(client)  # back in the manager's tool span
    ask(client)  # outside every agent span
    assert recorded(telemetry) == [("manager", 100, 11, "conv-7"), ("worker", 200, 21, "conv-7"),
                                   ("manager", 300, 31, "conv-7"), ("default", 400, 41, None)]  # fmt: skip
    from otel_tokens.account.agents import get_agent

    assert get_agent("worker").state.figures().total_output_tokens == 21  # its own TokenState
    server.close()


def test_attributes_set_after_the_span_started_and_the_name_in_the_span_name(telemetry, tracer):
    server, client = served(10, 20)
    with tracer.start_as_current_span("invoke_agent researcher"):  # no attributes at all
        ask(client)
    with tracer.start_as_current_span("agent run") as span:  # named by attributes set later
        span.set_attribute("gen_ai.operation.name", "invoke_agent")
        span.set_attribute("gen_ai.agent.name", "writer")
        span.set_attribute("gen_ai.conversation.id", "thread-2")
        ask(client)
    assert recorded(telemetry) == [("researcher", 10, 2, None), ("writer", 20, 3, "thread-2")]
    server.close()


def test_a_binding_in_the_code_wins_and_gives_its_conversation(telemetry, tracer):
    server, client = served(50, 60)
    with invoke_agent(tracer, "framework-agent", conversation="conv-1"):
        with otel_tokens.agent("batch", conversation="job-4"):
            ask(client)
        with otel_tokens.agent("batch"):
            ask(client)  # the binding names the agent; the span still gives the conversation
    assert recorded(telemetry) == [("batch", 50, 6, "job-4"), ("batch", 60, 7, "conv-1")]
    server.close()


def test_a_provider_made_before_instrument_is_read_when_its_agent_span_is_current(telemetry):
    genai_agents_patches.uninstall()
    earlier = TracerProvider()  # made before instrument(): not watched (not the global one)
    genai_agents_patches.install()
    tracer = earlier.get_tracer("framework")
    server, client = served(70)
    with invoke_agent(tracer, "planner"):
        ask(client)
    assert recorded(telemetry) == [("planner", 70, 8, None)]
    server.close()


def test_otel_tokens_own_spans_and_other_operations_name_no_agent(telemetry, tracer):
    server, client = served(30, 40)
    own = telemetry.tracer_provider.get_tracer("otel_tokens")
    with own.start_as_current_span("invoke_agent copilot",
                                   attributes={"gen_ai.agent.name": "copilot"}):  # fmt: skip
        ask(client)
    with tracer.start_as_current_span("create_agent helper", attributes={
            "gen_ai.operation.name": "create_agent", "gen_ai.agent.name": "helper"}):  # fmt: skip
        ask(client)
    assert [name for name, *_ in recorded(telemetry)] == ["default", "default"]
    server.close()


def test_after_uninstall_agent_spans_name_nothing(telemetry, tracer):
    server, client = served(90)
    genai_agents_patches.uninstall()
    with invoke_agent(tracer, "manager"):
        ask(client)
    genai_agents_patches.install()
    assert recorded(telemetry) == [("default", 90, 10, None)]
    server.close()


def test_spans_never_ended_are_forgotten_past_the_bound(telemetry, tracer, monkeypatch):
    monkeypatch.setattr(genai_agents_patches, "MAX_TRACKED", 8)
    leaked = [tracer.start_span(f"invoke_agent a{i}") for i in range(20)]  # never ended
    assert len(genai_agents_patches._SPANS.enclosing) <= 8
    for span in leaked:
        span.end()
    assert not genai_agents_patches._SPANS.enclosing
