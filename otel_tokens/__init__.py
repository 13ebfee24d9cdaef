"""otel_tokens: what LLM agents consume (tokens, premium requests, dollars), as OpenTelemetry.

Data flow: instrumentors capture backend calls -> every backend's usage is normalized into one
:class:`Usage` -> accounted to the bound agent's :class:`TokenState` (RFC 00040) and
:class:`UsageLedger`, priced and checked for anomalies -> emitted as spans and metrics by the
one pipeline (``otel_tokens.telemetry``).

Typical use: ``otel_tokens.configure(); otel_tokens.instrument()`` once at start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from .instrumentors.agent_runs import last_agent_run
    from .instrumentors.backend import instrument_backend, uninstrument_backend
    from .parsers import AgentRun

__version__ = "0.1.0"

# Imported on first use, so that ``import otel_tokens`` stays light (these pull in
# opentelemetry-instrumentation and the parsers): name -> (module, attribute).
_LAZY = {
    "AgentRun": ("otel_tokens.parsers", "AgentRun"),
    "instrument_backend": ("otel_tokens.instrumentors.backend", "instrument_backend"),
    "uninstrument_backend": ("otel_tokens.instrumentors.backend", "uninstrument_backend"),
    "last_agent_run": ("otel_tokens.instrumentors.agent_runs", "last_agent_run"),
}


def __getattr__(name: str) -> object:
    """Lazily provide the agent-CLI API (see ``_LAZY``)."""
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'otel_tokens' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(target[0]), target[1])
    globals()[name] = value
    return value

__all__ = [
    "AgentEntry",
    "AgentRun",
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
    "instrument_backend",
    "last_agent_run",
    "on_anomaly",
    "set_budget",
    "uninstrument",
    "uninstrument_backend",
]
