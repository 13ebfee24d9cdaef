"""otel_tokens: what LLM agents consume (tokens, premium requests, dollars), as OpenTelemetry.

One call path: instrumentors **capture** each backend call as a :class:`Call` record
(``otel_tokens.capture``) -> the **account** step turns the finished record into an outcome:
tokens by class, cost, premium requests, the agent's :class:`TokenState` (RFC 00040) and
:class:`UsageLedger`, anomalies (``otel_tokens.account``) -> one recorder **emits** the
outcome as a span and metrics (``otel_tokens.emit``). Settings, the fault sink and the
instrumentation registry are read and kept in one place each.

Typical use: ``otel_tokens.configure(); otel_tokens.instrument()`` once at start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .account import ledger_options as _ledger_options
from .version import __version__

if TYPE_CHECKING:
    from .account.agents import AgentEntry, agent, agents, clear_agents, current_agent
    from .account.anomalies import Anomaly, AnomalyGuard, Budget, BudgetExceeded, SpikeRule
    from .account.ledger import Checkpoint, ClassStats, UsageLedger, UsageRecord, UsageTotals
    from .account.outcome import Outcome
    from .account.pricing import PriceFileError, Pricer, PriceResult
    from .account.state import Display, Estimate, StreamHandle, TokenState
    from .call import Call
    from .capture.agent_cli.runs import last_agent_run
    from .capture.methods.backend import instrument_backend, uninstrument_backend
    from .capture.agent_cli.parsers import AgentRun
    from .emit.setup import Setup, configure
    from .errors import (
        HistoryEvictedError,
        InvalidTransitionError,
        LedgerError,
        LedgerPersistenceError,
        OtelTokensError,
    )
    from .handler import Handler, get_handler, on_anomaly, set_budget, start_call
    from .registry import instrument, uninstrument
    from .request import Request
    from .settings import Settings
    from .usage import TOKEN_CLASSES, Usage

# The public API is imported on first use, so that ``import otel_tokens`` costs next to
# nothing and ``instrument()`` loads only what it needs: module -> names.
_MODULES: dict[str, tuple[str, ...]] = {
    "account.agents": ("AgentEntry", "agent", "agents", "clear_agents", "current_agent"),
    "account.anomalies": ("Anomaly", "AnomalyGuard", "Budget", "BudgetExceeded", "SpikeRule"),
    "account.ledger": ("Checkpoint", "ClassStats", "UsageLedger", "UsageRecord", "UsageTotals"),
    "account.outcome": ("Outcome",),
    "account.pricing": ("PriceFileError", "Pricer", "PriceResult"),
    "account.state": ("Display", "Estimate", "StreamHandle", "TokenState"),
    "call": ("Call",),
    "capture.agent_cli.runs": ("last_agent_run",),
    "capture.methods.backend": ("instrument_backend", "uninstrument_backend"),
    "capture.agent_cli.parsers": ("AgentRun",),
    "emit.setup": ("Setup", "configure"),
    "errors": (
        "HistoryEvictedError",
        "InvalidTransitionError",
        "LedgerError",
        "LedgerPersistenceError",
        "OtelTokensError",
    ),
    "handler": ("Handler", "get_handler", "on_anomaly", "set_budget", "start_call"),
    "registry": ("instrument", "uninstrument"),
    "request": ("Request",),
    "settings": ("Settings",),
    "usage": ("TOKEN_CLASSES", "Usage"),
}
_LAZY: dict[str, str] = {name: module for module, names in _MODULES.items() for name in names}


def _agent_ledgers() -> _ledger_options.LedgerOptions:
    """New agents' ledgers as the process's settings say now (the account step reads none)."""
    from .settings import current

    return _ledger_options.LedgerOptions.from_settings(current())


_ledger_options.source = _agent_ledgers


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
    "Call",
    "Checkpoint",
    "ClassStats",
    "Display",
    "Estimate",
    "Handler",
    "HistoryEvictedError",
    "InvalidTransitionError",
    "LedgerError",
    "LedgerPersistenceError",
    "OtelTokensError",
    "Outcome",
    "PriceFileError",
    "PriceResult",
    "Pricer",
    "Request",
    "Settings",
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
    "get_handler",
    "instrument",
    "instrument_backend",
    "last_agent_run",
    "on_anomaly",
    "set_budget",
    "start_call",
    "uninstrument",
    "uninstrument_backend",
    "__version__",
]
