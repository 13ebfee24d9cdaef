"""Agent names and runs from LlamaIndex agents, without code changes.

A call made while a ``FunctionAgent``, ``ReActAgent`` or ``CodeActAgent`` takes a step (its
model turn, alone or as one agent of an ``AgentWorkflow``, after handoffs too) is recorded
under the agent's ``name``; its conversation is the workflow run (``llamaindex.run_id``, the
id LlamaIndex tags the run's instrumentation with). The agent's step method is wrapped (at
import of LlamaIndex's agent modules); an ``otel_tokens.agent(...)`` binding still wins.
"""

from __future__ import annotations

import sys
from typing import Any

from ...account.agents import FrameworkRun
from .names import RunScopes
from ..patching import Backend

__all__ = ["BACKEND", "DEPENDENCIES", "install", "uninstall"]

BACKEND = Backend(
    "LlamaIndexInstrumentor",
    "Agent names from LlamaIndex agents and multi-agent workflows.",
    requirements=("llama-index-core >= 0.12",),
    extra="llama-index",
    apis=(),
)
DEPENDENCIES: tuple[str, ...] = BACKEND.requirements
_TAGS = "llama_index_instrumentation.dispatcher"
_AGENTS = "llama_index.core.agent.workflow."
_RUN_ID = "llamaindex.run_id"


def _run(agent: Any, _args: tuple, _kwargs: dict) -> FrameworkRun | None:
    """The agent's name and the workflow run it steps in."""
    name = getattr(agent, "name", None)
    tags = sys.modules.get(_TAGS)
    run_id = tags.active_instrument_tags.get().get(_RUN_ID) if tags is not None else None
    if not isinstance(name, str):
        return None
    return FrameworkRun(name.strip() or None, run_id if isinstance(run_id, str) else None)


_SCOPES = RunScopes(
    "llama_index",
    [
        (_AGENTS + "function_agent", "FunctionAgent", "take_step", _run),
        (_AGENTS + "react_agent", "ReActAgent", "take_step", _run),
        (_AGENTS + "codeact_agent", "CodeActAgent", "take_step", _run),
    ],
)


def install(**_: Any) -> bool:
    """Name calls after LlamaIndex agents once the application imports them."""
    return _SCOPES.install()


def uninstall() -> None:
    _SCOPES.uninstall()
