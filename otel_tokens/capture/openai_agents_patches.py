"""Agent names from the OpenAI Agents SDK (``openai-agents``), without code changes.

A call made while an ``Agent(name="triage")`` runs is recorded under agent ``triage``; with
handoffs and agents used as tools, the innermost agent making the call. The SDK keeps the
span it is in (agent, then response or generation span inside it) in a context variable,
whether tracing exports anything or is disabled; each span remembers the span that was
current when it started, so the agent is found by walking outward from the current span.
Nothing is patched and nothing imported before the application imports the SDK; an
``otel_tokens.agent(...)`` binding in the code still wins.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

import wrapt

from ..account.agents import add_name_source, remove_name_source

__all__ = ["DEPENDENCIES", "install", "uninstall"]

DEPENDENCIES: tuple[str, ...] = ("openai-agents >= 0.1",)
_SCOPE = "agents.tracing.scope"
_MAX_HOPS = 16  # spans between a model call and its agent (function, handoff, guardrail spans)
_state = {"installed": False, "hooked": False}


def agent_name() -> str | None:
    """The innermost running agent's name, or None outside any agent run."""
    scope = sys.modules.get(_SCOPE)
    span = scope.Scope.get_current_span() if scope is not None else None
    for _ in range(_MAX_HOPS):
        if span is None:
            return None
        data = getattr(span, "span_data", None)
        if type(data).__name__ == "AgentSpanData":
            name = getattr(data, "name", None)
            return name if isinstance(name, str) else None
        token = getattr(span, "_prev_span_token", None)  # the span current when this one started
        span = getattr(token, "old_value", None)
        if span is not None and not hasattr(span, "span_data"):  # Token.MISSING: the outermost
            return None
    return None


def _on_import(_module: Any) -> None:
    if _state["installed"]:
        add_name_source(agent_name)


def install(**_: Any) -> bool:
    """Name calls after openai-agents agents once the application imports the SDK; False
    when it is not installed."""
    try:
        if _SCOPE not in sys.modules and importlib.util.find_spec("agents.tracing") is None:
            return False
    except (ImportError, ValueError):
        return False
    _state["installed"] = True
    if _SCOPE in sys.modules:
        add_name_source(agent_name)
    elif not _state["hooked"]:
        wrapt.register_post_import_hook(_on_import, _SCOPE)
        _state["hooked"] = True
    return True


def uninstall() -> None:
    _state["installed"] = False
    remove_name_source(agent_name)
