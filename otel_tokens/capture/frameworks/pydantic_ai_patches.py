"""Agent names from Pydantic AI, without code changes.

A call made while ``Agent(name="helper")`` runs is recorded under agent ``helper`` (the
innermost run when one agent calls another from a tool), in the run's conversation
(``conversation_id``: given to ``Agent.run`` or carried by the message history, else one
Pydantic AI makes per run). Pydantic AI keeps the run context of the model request in progress
in a context variable (``get_current_run_context()``), whose ``agent`` names it. Nothing is patched and nothing imported before the application imports
Pydantic AI; an ``otel_tokens.agent(...)`` binding in the code still wins.
"""

from __future__ import annotations

import sys
from typing import Any

from ...account.agents import FrameworkRun
from .names import FrameworkNames
from ..patching import Backend

__all__ = ["BACKEND", "DEPENDENCIES", "install", "uninstall"]

BACKEND = Backend(
    "PydanticAIInstrumentor",
    "Agent names from Pydantic AI: each call is recorded under the running agent.",
    requirements=("pydantic-ai-slim >= 1.0",),
    extra="pydantic-ai",
    apis=(),
)
DEPENDENCIES: tuple[str, ...] = BACKEND.requirements
_RUN_CONTEXT = "pydantic_ai._run_context"


def current_run() -> FrameworkRun | None:
    """The agent whose run is making the current model request and its conversation, or None."""
    module = sys.modules.get(_RUN_CONTEXT)
    context = module.get_current_run_context() if module is not None else None
    if context is None:
        return None
    name = getattr(getattr(context, "agent", None), "name", None)
    conversation = getattr(context, "conversation_id", None)
    return FrameworkRun(
        name if isinstance(name, str) else None,
        conversation if isinstance(conversation, str) else None,
    )


_NAMES = FrameworkNames(_RUN_CONTEXT, current_run)


def install(**_: Any) -> bool:
    """Name calls after Pydantic AI agents once the application imports it."""
    return _NAMES.install()


def uninstall() -> None:
    _NAMES.uninstall()
