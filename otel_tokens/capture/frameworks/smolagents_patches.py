"""Agent names from smolagents, without code changes.

A call made while a smolagents agent (``CodeAgent``, ``ToolCallingAgent``, any
``MultiStepAgent``) given a ``name`` runs is recorded under that name; a managed agent called
by its manager records its own calls (the innermost agent wins). smolagents keeps no readable
run context, so the agent's run loop (``MultiStepAgent._run_stream``, behind ``run`` streamed
or not) is wrapped at import; an ``otel_tokens.agent(...)`` binding still wins. smolagents
has no conversation id of its own.
"""

from __future__ import annotations

from typing import Any

from ...account.agents import FrameworkRun
from .names import RunScopes
from ..patching import Backend

__all__ = ["BACKEND", "DEPENDENCIES", "install", "uninstall"]

BACKEND = Backend(
    "SmolagentsInstrumentor",
    "Agent names from smolagents: named and managed agents.",
    requirements=("smolagents >= 1.0",),
    extra="smolagents",
    apis=(),
)
DEPENDENCIES: tuple[str, ...] = BACKEND.requirements


def _run(agent: Any, _args: tuple, _kwargs: dict) -> FrameworkRun | None:
    """The agent's name (None for an unnamed agent: its calls stay the outer agent's)."""
    name = getattr(agent, "name", None)
    return FrameworkRun(name) if isinstance(name, str) and name.strip() else None


_SCOPES = RunScopes("smolagents", [("smolagents.agents", "MultiStepAgent", "_run_stream", _run)])


def install(**_: Any) -> bool:
    """Name calls after smolagents agents once the application imports smolagents."""
    return _SCOPES.install()


def uninstall() -> None:
    _SCOPES.uninstall()
