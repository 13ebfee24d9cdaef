"""Agent names and conversations from LangGraph, without code changes.

A call made while a graph runs is recorded under the agent the graph says it belongs to: the
agent's own name where LangChain gives one (``lc_agent_name``, set by ``create_agent(name=...)``),
else the top-level graph node the call runs under (a multi-agent graph's agents are its nodes;
a subgraph's inner nodes stay its agent's). Its conversation is the run's ``thread_id``.
LangGraph keeps the running node's config in LangChain's context variable
(``var_child_runnable_config``), sync and async; nothing is patched and nothing imported before
the application imports LangChain, and an ``otel_tokens.agent(...)`` binding still wins.
"""

from __future__ import annotations

import sys
from typing import Any

from ...account.agents import FrameworkRun
from .names import FrameworkNames
from ..patching import Backend

__all__ = ["BACKEND", "DEPENDENCIES", "install", "uninstall"]

BACKEND = Backend(
    "LangGraphInstrumentor",
    "Agent names and threads from LangGraph: each call is recorded under the graph's agent.",
    requirements=("langgraph >= 0.3",),
    extra="langgraph",
    apis=(),
)
DEPENDENCIES: tuple[str, ...] = BACKEND.requirements
_CONFIG = "langchain_core.runnables.config"


def current_run() -> FrameworkRun | None:
    """The agent and thread of the graph node running in this context, or None outside a graph."""
    module = sys.modules.get(_CONFIG)
    config = module.var_child_runnable_config.get() if module is not None else None
    if not isinstance(config, dict):
        return None
    metadata = config.get("metadata")
    if not isinstance(metadata, dict):
        return None
    name = metadata.get("lc_agent_name")
    if not isinstance(name, str) or not name:
        namespace = metadata.get("langgraph_checkpoint_ns")  # "outer:<task id>|inner:<task id>"
        name = namespace.partition("|")[0].partition(":")[0] if isinstance(namespace, str) else None
    thread = metadata.get("thread_id")
    if not isinstance(thread, str):
        configurable = config.get("configurable")
        thread = configurable.get("thread_id") if isinstance(configurable, dict) else None
    if not name and not isinstance(thread, str):
        return None
    return FrameworkRun(name or None, thread if isinstance(thread, str) else None)


_NAMES = FrameworkNames(_CONFIG, current_run)


def install(**_: Any) -> bool:
    """Name calls after LangGraph agents once the application imports LangChain."""
    return _NAMES.install()


def uninstall() -> None:
    _NAMES.uninstall()
