"""Agent names from Microsoft Agent Framework, without code changes.

A call made while an Agent Framework agent runs (``Agent.run``, awaited or streamed; inside a
workflow, or as another agent's tool) is recorded under the agent's ``name``: the innermost
agent wins. Its conversation is the run's ``AgentSession`` id. The core agent's ``run``
(``RawAgent.run``, beneath the middleware and telemetry layers) is wrapped at import; a
streamed run's ``ResponseStream`` gets the agent set around each pull (its own
``with_pull_context_manager``). With the framework's telemetry on, its ``invoke_agent`` spans
say the same. An ``otel_tokens.agent(...)`` binding still wins.
"""

from __future__ import annotations

from typing import Any, Callable

from ...account.agents import FrameworkRun
from .names import RunScopes
from ..patching import Backend

__all__ = ["BACKEND", "DEPENDENCIES", "install", "uninstall"]

BACKEND = Backend(
    "AgentFrameworkInstrumentor",
    "Agent names from Microsoft Agent Framework.",
    requirements=("agent-framework-core >= 1.0",),
    extra="agent-framework",
    apis=(),
)
DEPENDENCIES: tuple[str, ...] = BACKEND.requirements


def _run(agent: Any, _args: tuple, kwargs: dict) -> FrameworkRun | None:
    """The agent's name and the session it runs in."""
    name = getattr(agent, "name", None)
    session = getattr(kwargs.get("session"), "session_id", None)
    if not isinstance(name, str) or not name.strip():
        return None
    return FrameworkRun(name, session if isinstance(session, str) else None)


def _stream(result: Any, scope: Callable[[], Any]) -> Any:
    """A streamed run: the agent is current around each pull of its ``ResponseStream``."""
    pull = getattr(result, "with_pull_context_manager", None)
    return pull(scope) if pull is not None else result


_SCOPES = RunScopes(
    "agent_framework", [("agent_framework._agents", "RawAgent", "run", _run)], _stream
)


def install(**_: Any) -> bool:
    """Name calls after Agent Framework agents once the application imports it."""
    return _SCOPES.install()


def uninstall() -> None:
    _SCOPES.uninstall()
