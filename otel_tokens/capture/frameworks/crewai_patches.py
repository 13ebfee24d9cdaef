"""Agent names and runs from CrewAI, without code changes.

A call made while a CrewAI agent works on a task (``Agent.execute_task``, sync or async) or
runs on its own (``Agent.kickoff``, ``LiteAgent.kickoff``) is recorded under the agent's
``role``; in a hierarchical crew or with delegation, the agent asked by the manager records its
own calls (the innermost agent wins). Its conversation is the crew's run (CrewAI's execution
id for the outermost kickoff). CrewAI keeps no readable "agent now running" context, so these
methods are wrapped (at import of CrewAI); an ``otel_tokens.agent(...)`` binding still wins.
"""

from __future__ import annotations

import sys
from typing import Any

from ...account.agents import FrameworkRun
from .names import RunScopes
from ..patching import Backend

__all__ = ["BACKEND", "DEPENDENCIES", "install", "uninstall"]

BACKEND = Backend(
    "CrewAIInstrumentor",
    "Agent names from CrewAI: each call is recorded under the role of the agent working.",
    requirements=("crewai >= 1.0",),
    extra="crewai",
    apis=(),
)
DEPENDENCIES: tuple[str, ...] = BACKEND.requirements


def _run(agent: Any, _args: tuple, _kwargs: dict) -> FrameworkRun | None:
    """The agent's role and the crew run it belongs to."""
    role = getattr(agent, "role", None)
    execution = sys.modules.get("crewai.execution")
    run_id = execution.get_execution_uuid() if execution is not None else None
    if not isinstance(role, str):
        return None
    return FrameworkRun(role.strip() or None, run_id if isinstance(run_id, str) else None)


_SCOPES = RunScopes(
    "crewai",
    [
        ("crewai.agent.core", "Agent", "execute_task", _run),
        ("crewai.agent.core", "Agent", "aexecute_task", _run),
        ("crewai.agent.core", "Agent", "kickoff", _run),
        ("crewai.agent.core", "Agent", "kickoff_async", _run),
        ("crewai.lite_agent", "LiteAgent", "kickoff", _run),
        ("crewai.lite_agent", "LiteAgent", "kickoff_async", _run),
    ],
)


def install(**_: Any) -> bool:
    """Name calls after CrewAI agents once the application imports CrewAI."""
    return _SCOPES.install()


def uninstall() -> None:
    _SCOPES.uninstall()
