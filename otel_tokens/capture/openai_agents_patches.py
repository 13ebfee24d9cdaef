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

import sys
from typing import Any

from .framework_names import FrameworkNames

__all__ = ["DEPENDENCIES", "install", "uninstall"]

DEPENDENCIES: tuple[str, ...] = ("openai-agents >= 0.1",)
_SCOPE = "agents.tracing.scope"
_MAX_HOPS = 16  # spans between a model call and its agent (function, handoff, guardrail spans)


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


_NAMES = FrameworkNames(_SCOPE, agent_name)


def install(**_: Any) -> bool:
    """Name calls after openai-agents agents once the application imports the SDK."""
    return _NAMES.install()


def uninstall() -> None:
    _NAMES.uninstall()
