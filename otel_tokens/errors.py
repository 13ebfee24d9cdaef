"""Exceptions raised by otel_tokens' own APIs (never into a host program's backend calls)."""

from __future__ import annotations

__all__ = [
    "HistoryEvictedError",
    "InvalidTransitionError",
    "LedgerError",
    "LedgerPersistenceError",
    "OtelTokensError",
]


class OtelTokensError(Exception):
    """Base class of every error otel_tokens raises on purpose."""


class InvalidTransitionError(OtelTokensError):
    """A TokenState operation that the RFC 00040 state machine does not allow."""


class LedgerError(OtelTokensError):
    """A usage-ledger operation that cannot be carried out as asked."""


class HistoryEvictedError(LedgerError):
    """A rollback, checkpoint or range query that needs history the bounded buffer evicted.

    Raised instead of returning a total that would silently be wrong.
    """


class LedgerPersistenceError(LedgerError):
    """The SQLite file could not be opened or written (corrupt, locked, disk full).

    When raised by an append, the record is kept in memory and written on the next
    successful append, ``flush()`` or ``close()``: no appended record is lost.
    """
