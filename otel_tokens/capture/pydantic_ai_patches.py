"""Agent names from Pydantic AI, without code changes.

A call made while ``Agent(name="helper")`` runs is recorded under agent ``helper`` (the
innermost run when one agent calls another from a tool). Pydantic AI keeps the run context
of the model request in progress in a context variable (``get_current_run_context()``), whose
``agent`` names it. Nothing is patched and nothing imported before the application imports
Pydantic AI; an ``otel_tokens.agent(...)`` binding in the code still wins.
"""

from __future__ import annotations

import sys
from typing import Any

from .framework_names import FrameworkNames

__all__ = ["DEPENDENCIES", "install", "uninstall"]

DEPENDENCIES: tuple[str, ...] = ("pydantic-ai-slim >= 1.0",)
_RUN_CONTEXT = "pydantic_ai._run_context"


def agent_name() -> str | None:
    """The name of the agent whose run is making the current model request, or None."""
    module = sys.modules.get(_RUN_CONTEXT)
    context = module.get_current_run_context() if module is not None else None
    name = getattr(getattr(context, "agent", None), "name", None)
    return name if isinstance(name, str) else None


_NAMES = FrameworkNames(_RUN_CONTEXT, agent_name)


def install(**_: Any) -> bool:
    """Name calls after Pydantic AI agents once the application imports it."""
    return _NAMES.install()


def uninstall() -> None:
    _NAMES.uninstall()
