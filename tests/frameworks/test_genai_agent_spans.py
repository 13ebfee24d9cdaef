"""Agent names from GenAI ``invoke_agent`` spans, whoever made them: a framework's tracer
(here a provider of its own, not otel_tokens') opens agent spans the way the GenAI agent
conventions say, and the real ``openai`` client calls the local server inside them; the
innermost agent span names the call, through tool and chat spans between; its conversation
id goes on the call; a binding in the code wins; otel_tokens' own spans never name one. The
span processor is on a provider only once another library than otel_tokens takes a tracer from
it (before instrument(), for the global one), and agent spans are asked only once it is."""

from __future__ import annotations

import openai
import pytest
from opentelemetry.sdk.trace import TracerProvider

import otel_tokens
from otel_tokens.capture.frameworks import genai_agents_patches
from otel_tokens.capture.sdk import openai as openai_sdk

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


def watched(provider: TracerProvider) -> bool:
    """True when the agent-span processor is on this provider."""
    return genai_agents_patches._SPANS in provider._active_span_processor._span_processors


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


def test_a_provider_made_before_instrument_is_watched_once_a_tracer_is_taken_from_it(telemetry):
    genai_agents_patches.uninstall()
    earlier = TracerProvider()  # made before instrument(), not the global one
    genai_agents_patches.install()
    tracer = earlier.get_tracer("framework")
    assert watched(earlier)
    server, client = served(70)
    with invoke_agent(tracer, "planner"):
        with tracer.start_as_current_span("execute_tool search"):
            ask(client)
    assert recorded(telemetry) == [("planner", 70, 8, None)]
    server.close()


def test_a_tracer_taken_before_instrument_is_read_when_its_agent_span_is_current(telemetry, tracer):
    genai_agents_patches.uninstall()
    earlier = TracerProvider()
    unseen = earlier.get_tracer("framework")  # taken before instrument(): never watched
    genai_agents_patches.install()
    assert not watched(earlier)  # (the framework's provider, ``tracer``, is)
    server, client = served(70)
    with invoke_agent(unseen, "planner"):
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


def test_a_provider_gets_the_processor_only_once_another_library_takes_a_tracer(telemetry):
    provider = TracerProvider()  # made after install()
    own = provider.get_tracer("otel_tokens")
    assert not watched(provider)  # only otel_tokens traces there: nothing per span
    with own.start_as_current_span("chat gpt-4o-mini"):
        pass
    tracer = provider.get_tracer("some.agent.framework")
    assert watched(provider)
    provider.get_tracer("another.library")
    assert provider._active_span_processor._span_processors.count(genai_agents_patches._SPANS) == 1
    server, client = served(80)
    with invoke_agent(tracer, "planner", conversation="conv-3"):
        with tracer.start_as_current_span("execute_tool search"):  # read through the processor
            ask(client)
    assert recorded(telemetry) == [("planner", 80, 9, "conv-3")]
    server.close()


#: a fresh process: the application's global provider set before instrument(), a framework
#: taking its tracer (argv[1]) never, before install, after, or as a proxy before any provider
LAZY = """
import json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

when = sys.argv[1]
if when == "proxy":
    framework = trace.get_tracer("some.agent.framework")  # no provider set yet: a proxy
spans = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(spans))
trace.set_tracer_provider(provider)
if when == "before":
    framework = trace.get_tracer("some.agent.framework")

from otel_tokens.account import agents
from otel_tokens.account.anomalies import AnomalyGuard
from otel_tokens.account.pricing import Pricer
from otel_tokens.capture.frameworks import genai_agents_patches
from otel_tokens.capture.sdk import openai as openai_sdk
from otel_tokens.handler import Handler, set_handler

set_handler(Handler(pricer=Pricer(), guard=AnomalyGuard()))  # otel_tokens' tracer: the global's
openai_sdk.install()
genai_agents_patches.install()
import openai
from tests.frameworks.chat_server import ChatServer, completion
server = ChatServer(completion({"content": "ok"}, 100, 10), completion({"content": "ok"}, 200, 20))
client = openai.OpenAI(api_key="test", base_url=server.url, max_retries=0)

def ask():
    client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])

def state():
    return [genai_agents_patches._SPANS in provider._active_span_processor._span_processors,
            genai_agents_patches.current_run in agents._framework_sources]

ask()
alone = state()
if when == "after":
    framework = trace.get_tracer("some.agent.framework")
if when != "never":
    with framework.start_as_current_span("invoke_agent planner", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"}):
        with framework.start_as_current_span("execute_tool search"):
            ask()
print(json.dumps({"alone": alone, "then": state(), "agents": [
    s.attributes["gen_ai.agent.name"] for s in spans.get_finished_spans()
    if s.instrumentation_scope.name == "otel_tokens" and s.name.startswith("chat")]}))
"""


def child(script: str, *args: str) -> str:
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-c", script, *args], cwd=root, capture_output=True,
                            text=True, timeout=120, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize(("when", "alone", "agents"), [
    ("never", [False, False], ["default"]),  # nothing else traces: no processor, no source asked
    ("after", [False, False], ["default", "planner"]),
    ("proxy", [False, False], ["default", "planner"]),  # resolved at the framework's first span
    ("before", [True, True], ["default", "planner"]),  # the global provider handed one out
])  # fmt: skip
def test_the_global_provider_is_watched_once_a_framework_traces_with_it(when, alone, agents):
    import json

    found = json.loads(child(LAZY, when))
    assert found == {"alone": alone, "then": [when != "never"] * 2, "agents": agents}


FORK = """
import os, signal, threading
from opentelemetry.sdk.trace import TracerProvider
from otel_tokens.capture.frameworks import genai_agents_patches as g

g.install()
held, release = threading.Event(), threading.Event()

def hold():  # another thread registering a provider at the moment of the fork
    with g._watch_lock:
        held.set()
        release.wait()

threading.Thread(target=hold, daemon=True).start()
held.wait()
pid = os.fork()
if pid == 0:
    signal.alarm(20)  # a child stuck on the lock dies of it
    provider = TracerProvider()
    provider.get_tracer("some.agent.framework")
    os._exit(0 if g._SPANS in provider._active_span_processor._span_processors else 1)
release.set()
print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork on this platform")
def test_a_child_forked_while_a_provider_was_being_watched_still_watches_its_own():
    assert child(FORK) == "0"


# -- real frameworks' own agent spans, with no reader of their own: each in a fresh process, as
# the global tracer provider those frameworks trace with can be set once per process ---------------
CHILD = """
import json, os
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

spans = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(spans))
trace.set_tracer_provider(provider)  # the application's telemetry, set up before instrument()

from otel_tokens.account.anomalies import AnomalyGuard
from otel_tokens.account.pricing import Pricer
from otel_tokens.capture.frameworks import genai_agents_patches
from otel_tokens.capture.sdk import litellm_patches
from otel_tokens.capture.sdk import openai as openai_sdk
from otel_tokens.handler import Handler, set_handler

set_handler(Handler(pricer=Pricer(), guard=AnomalyGuard()))  # on the global providers
for patches in (openai_sdk, litellm_patches, genai_agents_patches):  # no framework reader
    patches.install()
from tests.frameworks.chat_server import ChatServer, completion, tool_call
%s
print(json.dumps([[s.attributes["gen_ai.agent.name"], s.attributes["gen_ai.usage.input_tokens"]]
                  for s in spans.get_finished_spans()
                  if s.instrumentation_scope.name == "otel_tokens" and s.name.startswith("chat")]))
"""

STRANDS = """
from strands import Agent, tool
from tests.frameworks.test_strands import model
server = ChatServer(completion(tool_call("ask_expert", {"question": "2+2?"}), 300, 30),
                    completion({"content": "4"}, 40, 4), completion({"content": "It is 4."}, 410, 41))
expert = Agent(name="expert", model=model(server), callback_handler=None)

@tool
def ask_expert(question: str) -> str:
    \"\"\"Ask the expert.\"\"\"
    return str(expert(question))

Agent(name="lead", model=model(server), tools=[ask_expert], callback_handler=None)("2+2?")
"""

ADK = """
from google.adk.agents import LlmAgent
from tests.frameworks.test_google_adk import model, run
server = ChatServer(completion(tool_call("transfer_to_agent", {"agent_name": "billing"}), 100, 10),
                    completion({"content": "Paid."}, 200, 20))
billing = LlmAgent(name="billing", model=model(server), instruction="Bill.", description="Billing.")
run(LlmAgent(name="triage", model=model(server), instruction="Route.", sub_agents=[billing]), "Paid?")
"""

AGENT_FRAMEWORK = """
import asyncio
from tests.frameworks.test_agent_framework import agent
server = ChatServer(completion(tool_call("expert", {"task": "2+2?"}), 300, 30),
                    completion({"content": "4"}, 40, 4), completion({"content": "It is 4."}, 410, 41))
expert = agent(server, "expert", description="Does sums.")
asyncio.run(agent(server, "lead", tools=[expert.as_tool()]).run("2+2?"))  # instrumentation on by default
"""

SEMANTIC_KERNEL = """
import asyncio, os
os.environ["SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS"] = "true"
from tests.frameworks.test_semantic_kernel import agent
server = ChatServer(completion(tool_call("expert-expert", {"messages": "2+2?"}), 300, 30),
                    completion({"content": "4"}, 40, 4), completion({"content": "It is 4."}, 410, 41))
expert = agent(server, "expert", description="Does sums.")
asyncio.run(agent(server, "lead", plugins=[expert]).get_response("2+2?"))
"""

#: framework -> (its scenario, made with its telemetry on; the calls it makes: agent, input tokens)
SCENARIOS = {
    "strands": (STRANDS, [["lead", 300], ["expert", 40], ["lead", 410]]),
    "google.adk": (ADK, [["triage", 100], ["billing", 200]]),
    "agent_framework": (AGENT_FRAMEWORK, [["lead", 300], ["expert", 40], ["lead", 410]]),
    "semantic_kernel": (SEMANTIC_KERNEL, [["lead", 300], ["expert", 40], ["lead", 410]]),
}


@pytest.mark.parametrize("framework", sorted(SCENARIOS))
def test_a_real_frameworks_own_agent_spans_name_its_calls(framework):
    import importlib.util
    import json
    import pathlib
    import subprocess
    import sys

    try:
        found = importlib.util.find_spec(framework) is not None
    except ImportError:
        found = False
    if not found:
        pytest.skip(f"{framework} is not installed (an optional extra)")
    scenario, expected = SCENARIOS[framework]
    root = pathlib.Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-c", CHILD % scenario], cwd=root, capture_output=True,
                            text=True, timeout=300, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == expected
