"""Agent names from AutoGen AgentChat, without code changes.

A call made while an AgentChat agent (``AssistantAgent``, ``CodeExecutorAgent``,
``SocietyOfMindAgent``) handles messages, alone (``run``, ``run_stream``) or in a team
(round-robin, selector, swarm, graph), is recorded under the agent's ``name``; an agent used
as a tool by another, or a team inside a society-of-mind agent, records its own calls (the
innermost agent wins). In a team the conversation is the team's id (the key of the agents'
runtime ids). The agents' message handlers are wrapped at import; an
``otel_tokens.agent(...)`` binding still wins. With AutoGen's telemetry on, its
``invoke_agent`` spans say the same (:mod:`.genai_agents_patches`).
"""

from __future__ import annotations

import sys
from typing import Any

from ...account.agents import FrameworkRun
from .names import RunScopes
from ..patching import Backend

__all__ = ["BACKEND", "DEPENDENCIES", "install", "uninstall"]

BACKEND = Backend(
    "AutoGenInstrumentor",
    "Agent names from AutoGen AgentChat: agents and teams.",
    requirements=("autogen-agentchat >= 0.4",),
    extra="autogen",
    apis=(),
)
DEPENDENCIES: tuple[str, ...] = BACKEND.requirements
_AGENTS = "autogen_agentchat.agents."


def _team() -> str | None:
    """The key of the runtime agent handling the current message (a team's id), if any."""
    core = sys.modules.get("autogen_core")
    context = getattr(core, "MessageHandlerContext", None)
    try:
        key = context.agent_id().key if context is not None else None
    except RuntimeError:  # not inside a message handler: an agent run on its own
        return None
    return key if isinstance(key, str) and key not in ("", "default") else None


def _run(agent: Any, _args: tuple, _kwargs: dict) -> FrameworkRun | None:
    name = getattr(agent, "name", None)
    if not isinstance(name, str) or not name.strip():
        return None
    return FrameworkRun(name, _team())


_SCOPES = RunScopes(
    "autogen_agentchat",
    [
        (_AGENTS + module, cls, method, _run)
        for module, cls in (
            ("_assistant_agent", "AssistantAgent"),
            ("_code_executor_agent", "CodeExecutorAgent"),
            ("_society_of_mind_agent", "SocietyOfMindAgent"),
        )
        for method in ("on_messages", "on_messages_stream")
    ],
)


def install(**_: Any) -> bool:
    """Name calls after AgentChat agents once the application imports AgentChat."""
    return _SCOPES.install()


def uninstall() -> None:
    _SCOPES.uninstall()
