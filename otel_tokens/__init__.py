"""otel_tokens: what LLM agents consume (tokens, premium requests, dollars), as OpenTelemetry.

The accounting core: every backend's usage is normalized into one :class:`Usage` record and
accounted to the bound agent's :class:`TokenState` (RFC 00040) and :class:`UsageLedger`.
"""

from __future__ import annotations

from .agents import AgentEntry, agent, agents, clear_agents, current_agent
from .errors import (
    HistoryEvictedError,
    InvalidTransitionError,
    LedgerError,
    LedgerPersistenceError,
    OtelTokensError,
)
from .ledger import Checkpoint, ClassStats, UsageLedger, UsageRecord, UsageTotals
from .state import Display, Estimate, StreamHandle, TokenState
from .usage import TOKEN_CLASSES, Usage

__version__ = "0.1.0"

__all__ = [
    "AgentEntry",
    "Checkpoint",
    "ClassStats",
    "Display",
    "Estimate",
    "HistoryEvictedError",
    "InvalidTransitionError",
    "LedgerError",
    "LedgerPersistenceError",
    "OtelTokensError",
    "StreamHandle",
    "TOKEN_CLASSES",
    "TokenState",
    "Usage",
    "UsageLedger",
    "UsageRecord",
    "UsageTotals",
    "agent",
    "agents",
    "clear_agents",
    "current_agent",
]
