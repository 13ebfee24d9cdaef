"""Agent names from the OpenAI Agents SDK (``openai-agents``), without code changes.

A call made while an ``Agent(name="triage")`` runs is recorded under agent ``triage``; with
handoffs and agents used as tools, the innermost agent making the call. Its conversation is
the run's trace ``group_id`` (``RunConfig(group_id=...)``, the SDK's id "linking traces from
the same conversation, e.g. a chat thread"; tracing on). The SDK keeps the
span it is in (agent, then response or generation span inside it) in a context variable,
whether tracing exports anything or is disabled; each span remembers the span that was
current when it started, so the agent is found by walking outward from the current span.
Nothing is patched and nothing imported before the application imports the SDK; an
``otel_tokens.agent(...)`` binding in the code still wins.
"""

from __future__ import annotations

import sys
from typing import Any

from ...account.agents import FrameworkRun
from .names import FrameworkNames
from ..patching import Backend

__all__ = ["BACKEND", "DEPENDENCIES", "install", "uninstall"]

BACKEND = Backend(
    "OpenAIAgentsInstrumentor",
    "Agent names from the OpenAI Agents SDK: each call is recorded under the running agent.",
    requirements=("openai-agents >= 0.1",),
    extra="openai-agents",
    apis=(),
)
DEPENDENCIES: tuple[str, ...] = BACKEND.requirements
_SCOPE = "agents.tracing.scope"
_MAX_HOPS = 16  # spans between a model call and its agent (function, handoff, guardrail spans)


def current_run() -> FrameworkRun | None:
    """The innermost running agent's name and the run's group id, or None outside any run."""
    scope = sys.modules.get(_SCOPE)
    if scope is None:
        return None
    name = _agent_name(scope.Scope.get_current_span())
    group = getattr(scope.Scope.get_current_trace(), "group_id", None)
    if name is None and not isinstance(group, str):
        return None
    return FrameworkRun(name, group if isinstance(group, str) else None)


def _agent_name(span: Any) -> str | None:
    """The name of the agent span at or around ``span``."""
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


_NAMES = FrameworkNames(_SCOPE, current_run)


def install(**_: Any) -> bool:
    """Name calls after openai-agents agents once the application imports the SDK."""
    return _NAMES.install()


def uninstall() -> None:
    _NAMES.uninstall()
