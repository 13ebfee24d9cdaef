"""The OpenAI Agents SDK's realtime sessions (``agents.realtime``: ``RealtimeRunner`` and
``RealtimeSession``) open their own websocket, not ``client.realtime.connect``: through the
real SDK against the local Realtime server, each ``response.done`` is still one call, once,
under the agent bound when the session was entered."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("agents.realtime")
pytest.importorskip("websockets")

from agents.realtime import RealtimeAgent, RealtimeRunner

import otel_tokens
from otel_tokens import settings as otel_settings
from otel_tokens.capture.sdk import openai_patches

from ..telemetry.conftest import handling
from .realtime_server import DOCUMENTED_USAGE, MODEL, RealtimeServer, usage
from .test_openai_realtime import billed, tokens


@pytest.fixture
def server(monkeypatch):
    s = RealtimeServer()
    # the local server stands for OpenAI's (a user's provider URL names it)
    monkeypatch.setenv("OTEL_TOKENS_PROVIDER_URLS", f"http://127.0.0.1:{s.port}=openai")
    otel_settings.reload()
    yield s
    s.close()


async def converse(server: RealtimeServer, turns: int) -> list[str]:
    """A RealtimeSession of ``turns`` user messages, each answered; the session's events."""
    agent = RealtimeAgent(name="Greeter", instructions="Be brief.")
    runner = RealtimeRunner(agent, config={"model_settings": {"model_name": "gpt-realtime"}})
    session = await runner.run(model_config={"url": f"{server.url}/realtime?model=gpt-realtime",
                                             "api_key": "sk-test"})  # fmt: skip
    seen = []
    async with session:
        for _ in range(turns):
            await session.send_message("Hello")
            async for event in session:
                seen.append(event.type)
                if event.type == "agent_end":
                    break
    return seen


def test_each_response_of_a_realtime_session_is_one_call(server):
    server.usages.extend([DOCUMENTED_USAGE, usage(200, 30, 100, 10, 40, 80)])
    with handling(openai_patches) as t, otel_tokens.agent("front-desk"):
        seen = asyncio.run(converse(server, 2))
    assert seen.count("agent_end") == 2
    spans = t.finished()
    assert [tokens(s.attributes) for s in spans] == [(132, 121, 64), (230, 120, 110)]
    for span, used in zip(spans, [DOCUMENTED_USAGE, usage(200, 30, 100, 10, 40, 80)]):
        attrs = span.attributes
        assert attrs["gen_ai.provider.name"] == "openai"
        assert attrs["gen_ai.agent.name"] == "front-desk"
        assert (attrs["gen_ai.request.model"], attrs["gen_ai.response.model"]) == (
            "gpt-realtime",
            MODEL,
        )
        assert attrs["otel_tokens.cost.usd"] == pytest.approx(billed(used), rel=1e-9)


def test_with_no_binding_a_response_is_the_realtime_agent_s(server):
    """No ``agent(...)`` binding: each response is recorded under the ``RealtimeAgent`` the
    session runs (the framework's name, as for the SDK's other runs)."""
    with handling(openai_patches) as t:
        asyncio.run(converse(server, 1))
    (span,) = t.finished()
    assert span.attributes["gen_ai.agent.name"] == "Greeter"
