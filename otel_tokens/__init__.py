"""otel_tokens: what LLM agents consume (tokens, premium requests, dollars), as OpenTelemetry.

Data flow: instrumentors capture backend calls -> every backend's usage is normalized into one
:class:`Usage` -> accounted to the bound agent's :class:`TokenState` (RFC 00040) and
:class:`UsageLedger`, priced and checked for anomalies -> emitted as spans and metrics by the
one pipeline (``otel_tokens.telemetry``).

Typical use: ``otel_tokens.configure(); otel_tokens.instrument()`` once at start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# Eager: importing the submodule ``otel_tokens.agents`` would otherwise shadow the function.
from .agents import AgentEntry, agent, agents, clear_agents, current_agent

if TYPE_CHECKING:
    from .errors import (
        HistoryEvictedError,
        InvalidTransitionError,
        LedgerError,
        LedgerPersistenceError,
        OtelTokensError,
    )
    from .instrumentors.agent_runs import last_agent_run
    from .instrumentors.backend import instrument_backend, uninstrument_backend
    from .ledger import Checkpoint, ClassStats, UsageLedger, UsageRecord, UsageTotals
    from .parsers import AgentRun
    from .pricing import PriceFileError, Pricer, PriceResult
    from .state import Display, Estimate, StreamHandle, TokenState
    from .telemetry.anomalies import Anomaly, AnomalyGuard, Budget, BudgetExceeded, SpikeRule
    from .telemetry.pipeline import CallContext, Pipeline, get_pipeline, on_anomaly, set_budget
    from .telemetry.setup import Setup, configure, instrument, uninstrument
    from .usage import TOKEN_CLASSES, Usage

__version__ = "0.1.0"

# The public API is imported on first use, so that ``import otel_tokens`` costs next to
# nothing and ``instrument()`` loads only what it needs: module -> names.
_MODULES: dict[str, tuple[str, ...]] = {
    "errors": ("HistoryEvictedError", "InvalidTransitionError", "LedgerError",
               "LedgerPersistenceError", "OtelTokensError"),  # fmt: skip
    "instrumentors.agent_runs": ("last_agent_run",),
    "instrumentors.backend": ("instrument_backend", "uninstrument_backend"),
    "ledger": ("Checkpoint", "ClassStats", "UsageLedger", "UsageRecord", "UsageTotals"),
    "parsers": ("AgentRun",),
    "pricing": ("PriceFileError", "Pricer", "PriceResult"),
    "state": ("Display", "Estimate", "StreamHandle", "TokenState"),
    "telemetry.anomalies": ("Anomaly", "AnomalyGuard", "Budget", "BudgetExceeded", "SpikeRule"),
    "telemetry.pipeline": ("CallContext", "Pipeline", "get_pipeline", "on_anomaly", "set_budget"),
    "telemetry.setup": ("Setup", "configure", "instrument", "uninstrument"),
    "usage": ("TOKEN_CLASSES", "Usage"),
}
_LAZY: dict[str, str] = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> object:
    """Import a public name's module on first access (see ``_MODULES``)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'otel_tokens' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})

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
