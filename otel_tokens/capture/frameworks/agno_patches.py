"""Agent names from Agno agents and teams, without code changes.

A call made while an Agno ``Agent`` or ``Team`` runs (``run``/``arun``, streamed or not;
``print_response`` goes through them) is recorded under its ``name``; a team's leader calls
are the team's, a member's (delegated to by the leader) the member's: the innermost wins. Its
conversation is the run's ``session_id`` (given to the run, or the agent's). The run methods
are wrapped at import; an ``otel_tokens.agent(...)`` binding still wins.
"""

from __future__ import annotations

from typing import Any

from ...account.agents import FrameworkRun
from .names import RunScopes
from ..patching import Backend

__all__ = ["BACKEND", "DEPENDENCIES", "install", "uninstall"]

BACKEND = Backend(
    "AgnoInstrumentor",
    "Agent names from Agno: agents and teams.",
    requirements=("agno >= 2.0",),
    extra="agno",
    apis=(),
)
DEPENDENCIES: tuple[str, ...] = BACKEND.requirements


def _run(agent: Any, _args: tuple, kwargs: dict) -> FrameworkRun | None:
    """The agent's or team's name and the session the run belongs to."""
    name = getattr(agent, "name", None)
    session = kwargs.get("session_id") or getattr(agent, "session_id", None)
    if not isinstance(name, str) or not name.strip():
        return None
    return FrameworkRun(name, session if isinstance(session, str) else None)


_SCOPES = RunScopes(
    "agno",
    [
        (module, cls, method, _run)
        for module, cls in (("agno.agent.agent", "Agent"), ("agno.team.team", "Team"))
        for method in ("run", "arun")
    ],
)


def install(**_: Any) -> bool:
    """Name calls after Agno agents and teams once the application imports Agno."""
    return _SCOPES.install()


def uninstall() -> None:
    _SCOPES.uninstall()
