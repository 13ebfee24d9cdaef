"""Agent names from Google's Agent Development Kit (ADK), without code changes.

A call made while an ADK agent runs (``LlmAgent`` and the workflow agents, through a
``Runner``; after a transfer to a sub-agent, or inside an ``AgentTool``) is recorded under the
agent's ``name``: the innermost agent wins. Its conversation is the ADK session's id. The
agents' run methods (``BaseAgent.run_async``/``run_live``) are wrapped at import; with ADK's
telemetry on, its ``invoke_agent`` spans say the same. An ``otel_tokens.agent(...)`` binding
still wins.
"""

from __future__ import annotations

from typing import Any

from ...account.agents import FrameworkRun
from .names import RunScopes
from ..patching import Backend

__all__ = ["BACKEND", "DEPENDENCIES", "install", "uninstall"]

BACKEND = Backend(
    "GoogleADKInstrumentor",
    "Agent names from Google ADK: agents and sub-agents.",
    requirements=("google-adk >= 1.0",),
    extra="google-adk",
    apis=(),
)
DEPENDENCIES: tuple[str, ...] = BACKEND.requirements


def _run(agent: Any, args: tuple, kwargs: dict) -> FrameworkRun | None:
    """The agent's name and its invocation's session."""
    name = getattr(agent, "name", None)
    context = args[0] if args else kwargs.get("parent_context")
    session = getattr(getattr(context, "session", None), "id", None)
    if not isinstance(name, str) or not name.strip():
        return None
    return FrameworkRun(name, session if isinstance(session, str) else None)


_SCOPES = RunScopes(
    "google.adk",
    [
        ("google.adk.agents.base_agent", "BaseAgent", method, _run)
        for method in ("run_async", "run_live")
    ],
)


def install(**_: Any) -> bool:
    """Name calls after ADK agents once the application imports ADK."""
    return _SCOPES.install()


def uninstall() -> None:
    _SCOPES.uninstall()
