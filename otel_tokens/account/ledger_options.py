"""What a new agent's ledger is opened with: where its rows are kept, how many stay in memory,
and the fleet ledger's writer.

The account step reads no settings: the package gives :data:`source` at import
(``otel_tokens/__init__.py``: the process's settings as they are when an agent is first used,
so settings read again later are followed). Until then ledgers live in memory. No imports of
its own at load: ``import otel_tokens`` stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = ["LedgerOptions", "source"]


class LedgerOptions(NamedTuple):
    """The options of a new agent's ledger."""

    path: str | None = None  # the SQLite file every agent shares; None: in memory
    max_history: int | None = None  # records kept in memory per agent; None: the ledger's default
    sink: Any = None  # the fleet ledger's writer (every row to PostgreSQL too), or None

    @classmethod
    def from_settings(cls, settings: Any) -> LedgerOptions:
        """The options ``OTEL_TOKENS_LEDGER_PATH``, ``_LEDGER_MAX_HISTORY`` and
        ``_LEDGER_URL`` (with its spool and queue) ask for, as the settings read them."""
        return cls(settings.ledger_path, settings.ledger_max_history, _fleet_sink(settings))


def _fleet_sink(settings: Any) -> Any:
    """The process's fleet ledger writer when ``OTEL_TOKENS_LEDGER_URL`` is set, else None."""
    if settings.ledger_url is None:
        return None
    from .ledger.postgres import fleet_writer

    return fleet_writer(
        settings.ledger_url,
        settings.ledger_spool_dir,
        settings.ledger_spool_max_mb * 1024 * 1024,
        settings.ledger_queue,
        settings.service_name,
        settings.exit_timeout,
    )


#: the options of the next new agent's ledger, asked each time one is opened
source: Callable[[], LedgerOptions] = LedgerOptions
