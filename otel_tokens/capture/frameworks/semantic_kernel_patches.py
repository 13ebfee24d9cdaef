"""Agent names from Semantic Kernel agents, without code changes.

A call made while a Semantic Kernel agent answers (``ChatCompletionAgent``,
``OpenAIResponsesAgent``, ``OpenAIAssistantAgent``: ``get_response``, ``invoke``,
``invoke_stream``; in a group chat or an orchestration, or as another agent's plugin) is
recorded under the agent's ``name``: the innermost agent wins. Its conversation is the
``thread`` the run is given (its id). These methods are wrapped at import; with Semantic
Kernel's telemetry on, its ``invoke_agent`` spans say the same. An ``otel_tokens.agent(...)``
binding still wins.
"""

from __future__ import annotations

from typing import Any

from ...account.agents import FrameworkRun
from .names import RunScopes
from ..patching import Backend

__all__ = ["BACKEND", "DEPENDENCIES", "install", "uninstall"]

BACKEND = Backend(
    "SemanticKernelInstrumentor",
    "Agent names from Semantic Kernel agents.",
    requirements=("semantic-kernel >= 1.30",),
    extra="semantic-kernel",
    apis=(),
)
DEPENDENCIES: tuple[str, ...] = BACKEND.requirements
_AGENTS = "semantic_kernel.agents."


def _run(agent: Any, _args: tuple, kwargs: dict) -> FrameworkRun | None:
    """The agent's name and the id of the thread it answers in."""
    name = getattr(agent, "name", None)
    thread = getattr(kwargs.get("thread"), "id", None)
    if not isinstance(name, str) or not name.strip():
        return None
    return FrameworkRun(name, thread if isinstance(thread, str) else None)


_SCOPES = RunScopes(
    "semantic_kernel",
    [
        (_AGENTS + module, cls, method, _run)
        for module, cls in (
            ("chat_completion.chat_completion_agent", "ChatCompletionAgent"),
            ("open_ai.openai_responses_agent", "OpenAIResponsesAgent"),
            ("open_ai.openai_assistant_agent", "OpenAIAssistantAgent"),
        )
        for method in ("get_response", "invoke", "invoke_stream")
    ],
)


def install(**_: Any) -> bool:
    """Name calls after Semantic Kernel agents once the application imports them."""
    return _SCOPES.install()


def uninstall() -> None:
    _SCOPES.uninstall()
