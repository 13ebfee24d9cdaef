"""Agent names from the OpenAI Agents SDK without code changes: the real ``Runner`` driving
the real ``openai`` client against a fake Chat Completions endpoint (documented format), with
tracing on (exporting nowhere) and off; handoffs and agents used as tools record the inner
agent; an ``otel_tokens.agent(...)`` binding still wins."""

from __future__ import annotations

import asyncio

import pytest

agents = pytest.importorskip("agents", reason="openai-agents is an optional extra (pip install otel-tokens[openai-agents])")

import otel_tokens  # noqa: E402
from otel_tokens.capture.frameworks import openai_agents_patches
from otel_tokens.capture.sdk import openai as openai_sdk  # noqa: E402

from ..sdk.replay import http_module  # noqa: E402
from ..telemetry.conftest import handling  # noqa: E402
from .chat_server import completion, tool_call  # noqa: E402,F401 (also used by the other framework tests)


class Endpoint:
    def __init__(self, *bodies: dict) -> None:
        self.bodies = list(bodies)
        http = http_module("openai")
        self.client = __import__("openai").AsyncOpenAI(
            api_key="test", max_retries=0,
            http_client=http.AsyncClient(transport=http.MockTransport(self.answer)))  # fmt: skip
        self._http = http

    def answer(self, request):  # type: ignore[no-untyped-def]
        return self._http.Response(200, json=self.bodies.pop(0))

    def model(self):  # type: ignore[no-untyped-def]
        from agents import OpenAIChatCompletionsModel

        return OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=self.client)


@pytest.fixture(params=["tracing on", "tracing off"])
def telemetry(request):
    from agents import set_trace_processors, set_tracing_disabled

    set_trace_processors([])  # tracing runs, exporting nowhere (no network)
    set_tracing_disabled(request.param == "tracing off")
    with handling(openai_sdk, openai_agents_patches) as t:
        yield t
    set_tracing_disabled(False)


def recorded(telemetry) -> list[tuple[str, int]]:
    return [(s.attributes["gen_ai.agent.name"], s.attributes["gen_ai.usage.input_tokens"])
            for s in telemetry.finished()]  # fmt: skip


def test_a_handoff_records_each_agent_under_its_own_name(telemetry):
    from agents import Agent, Runner

    endpoint = Endpoint(completion(tool_call("transfer_to_billing", {}), 100, 10),
                        completion({"content": "Your invoice is paid."}, 200, 20))  # fmt: skip
    billing = Agent(name="billing", instructions="Answer billing questions.", model=endpoint.model())
    triage = Agent(name="triage", instructions="Route the user.", model=endpoint.model(), handoffs=[billing])
    result = asyncio.run(Runner.run(triage, "Is my invoice paid?"))
    assert result.final_output == "Your invoice is paid."
    assert recorded(telemetry) == [("triage", 100), ("billing", 200)]
    from otel_tokens.account.agents import get_agent

    assert get_agent("billing").state.figures().total_output_tokens >= 20  # its own TokenState


def test_an_agent_used_as_a_tool_records_the_inner_agent(telemetry):
    from agents import Agent, Runner

    endpoint = Endpoint(completion(tool_call("translate", {"input": "hello"}), 50, 5),
                        completion({"content": "bonjour"}, 60, 6),
                        completion({"content": "It is bonjour."}, 70, 7))  # fmt: skip
    translator = Agent(name="translator", instructions="Translate to French.", model=endpoint.model())
    lead = Agent(name="lead", instructions="Use tools.", model=endpoint.model(),
                 tools=[translator.as_tool(tool_name="translate", tool_description="Translate.")])  # fmt: skip
    asyncio.run(Runner.run(lead, "Say hello in French."))
    assert recorded(telemetry) == [("lead", 50), ("translator", 60), ("lead", 70)]


def test_a_binding_in_the_code_wins(telemetry):
    from agents import Agent, Runner

    endpoint = Endpoint(completion({"content": "ok"}, 30, 3))
    helper = Agent(name="helper", instructions="Help.", model=endpoint.model())

    async def run():
        with otel_tokens.agent("nightly-job"):
            await Runner.run(helper, "hi")

    asyncio.run(run())
    assert recorded(telemetry) == [("nightly-job", 30)]


def test_outside_any_run_the_call_is_the_default_agent(telemetry):
    endpoint = Endpoint(completion({"content": "plain"}, 12, 2))
    asyncio.run(endpoint.client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}]))
    assert recorded(telemetry) == [("default", 12)]


def test_the_run_group_id_is_the_conversation_of_every_call(telemetry, request):
    from agents import Agent, RunConfig, Runner

    endpoint = Endpoint(completion(tool_call("transfer_to_billing", {}), 100, 10),
                        completion({"content": "Paid."}, 200, 20))  # fmt: skip
    billing = Agent(name="billing", instructions="Billing.", model=endpoint.model())
    triage = Agent(name="triage", instructions="Route.", model=endpoint.model(), handoffs=[billing])
    asyncio.run(Runner.run(triage, "Is my invoice paid?", run_config=RunConfig(group_id="thread-7")))
    conversations = [s.attributes.get("gen_ai.conversation.id") for s in telemetry.finished()]
    if request.node.callspec.params["telemetry"] == "tracing on":
        assert conversations == ["thread-7", "thread-7"]
    else:  # no trace, no group: nothing said, nothing guessed
        assert conversations == [None, None]


def test_a_binding_conversation_wins_over_the_group_id(telemetry, request):
    from agents import Agent, RunConfig, Runner

    endpoint = Endpoint(completion({"content": "ok"}, 30, 3))
    helper = Agent(name="helper", instructions="Help.", model=endpoint.model())

    async def run():
        with otel_tokens.agent("support", conversation="ticket-42"):
            await Runner.run(helper, "hi", run_config=RunConfig(group_id="thread-7"))

    asyncio.run(run())
    [span] = telemetry.finished()
    assert span.attributes["gen_ai.conversation.id"] == "ticket-42"
    assert span.attributes["gen_ai.agent.name"] == "support"
