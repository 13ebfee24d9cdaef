"""otel_tokens: what LLM agents consume (tokens, premium requests, dollars), as OpenTelemetry.

Data flow: instrumentors capture backend calls -> every backend's usage is normalized into one
:class:`Usage` -> accounted to the bound agent's :class:`TokenState` (RFC 00040) and
:class:`UsageLedger`, priced and checked for anomalies -> emitted as spans and metrics by the
one pipeline (``otel_tokens.telemetry``).

Typical use: ``otel_tokens.configure(); otel_tokens.instrument()`` once at start.
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
from .pricing import PriceFileError, Pricer, PriceResult
from .state import Display, Estimate, StreamHandle, TokenState
from .telemetry.anomalies import Anomaly, AnomalyGuard, Budget, BudgetExceeded, SpikeRule
from .telemetry.pipeline import CallContext, Pipeline, get_pipeline, on_anomaly, set_budget
from .telemetry.setup import Setup, configure, instrument, uninstrument
from .usage import TOKEN_CLASSES, Usage

__version__ = "0.1.0"

__all__ = [
    "AgentEntry",
    "Anomaly",
    "AnomalyGuard",
    "Budget",
    "BudgetExceeded",
    "CallContext",
    "Checkpoint",
    "ClassStats",
    "Display",
    "Estimate",
    "HistoryEvictedError",
    "InvalidTransitionError",
    "LedgerError",
    "LedgerPersistenceError",
    "OtelTokensError",
    "Pipeline",
    "PriceFileError",
    "PriceResult",
    "Pricer",
    "Setup",
    "SpikeRule",
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
    "configure",
    "current_agent",
    "get_pipeline",
    "instrument",
    "on_anomaly",
    "set_budget",
    "uninstrument",
]
