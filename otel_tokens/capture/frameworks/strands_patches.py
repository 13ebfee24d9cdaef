"""Agent names from Strands Agents, without code changes.

A call made while a Strands ``Agent`` runs (``agent(...)``, ``invoke_async``,
``stream_async``; inside a ``Swarm`` or ``Graph``, or as another agent's tool) is recorded
under the agent's ``name`` (Strands' own default, ``Strands Agents``, when none is given): the
innermost agent wins. Its conversation is the session of the agent's session manager. The
agent's event loop (``stream_async``, behind the others) is wrapped at import; with Strands'
telemetry on its ``invoke_agent`` spans say the same. An ``otel_tokens.agent(...)`` binding
still wins.
"""

from __future__ import annotations

from typing import Any

from ...account.agents import FrameworkRun
from .names import RunScopes
from ..patching import Backend

__all__ = ["BACKEND", "DEPENDENCIES", "install", "uninstall"]

BACKEND = Backend(
    "StrandsInstrumentor",
    "Agent names from Strands Agents.",
    requirements=("strands-agents >= 1.0",),
    extra="strands",
    apis=(),
)
DEPENDENCIES: tuple[str, ...] = BACKEND.requirements


def _run(agent: Any, _args: tuple, _kwargs: dict) -> FrameworkRun | None:
    name = getattr(agent, "name", None)
    session = getattr(getattr(agent, "_session_manager", None), "session_id", None)
    if not isinstance(name, str) or not name.strip():
        return None
    return FrameworkRun(name, session if isinstance(session, str) else None)


_SCOPES = RunScopes("strands", [("strands.agent.agent", "Agent", "stream_async", _run)])


def install(**_: Any) -> bool:
    """Name calls after Strands agents once the application imports Strands."""
    return _SCOPES.install()


def uninstall() -> None:
    _SCOPES.uninstall()
