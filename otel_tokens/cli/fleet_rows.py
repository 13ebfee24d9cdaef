"""The rows of a fleet ledger (PostgreSQL) as ``otel-tokens report`` reads a ledger file's."""

from __future__ import annotations

from typing import Any

from ..account.ledger.postgres import COLUMNS
from ..redact import redact
from ..settings import postgres_url
from .common import CliError

#: the columns a row is read with (the ledger's own, less its row id and flag; error_type apart)
_COLUMNS = tuple(name for name in COLUMNS if name not in ("row_id", "active", "error_type"))
#: the column version 3 of the schema added: a database not yet migrated is read without it
_ERROR_COLUMN = "error_type"
_HAS_ERROR_COLUMN = (
    "SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE "
    "table_schema = current_schema() AND table_name = 'otel_tokens_requests' "
    "AND column_name = %s)"
)


def is_url(db: str) -> bool:
    """Whether ``--db`` names a PostgreSQL database rather than a file; raises for a URL of
    another database (only the file and PostgreSQL ledgers exist)."""
    scheme, sep, _ = db.partition("://")
    if not sep or "/" in scheme:
        return False
    if postgres_url(db) is not None:
        return True
    raise CliError(
        f"report: {redact(db)} is not a ledger: --db takes a ledger file or a "
        "postgresql://user@host:port/db URL"
    )


def shown_url(url: str) -> str:
    """``url`` without its password (it is printed in the report)."""
    return redact(url)


def read_fleet_rows(url: str, since: float | None = None) -> list[dict[str, Any]]:
    """Every active row of every process (those from ``since`` on when given), oldest first;
    ``error_type`` None where the row has none (a success, or a row of a database or a release
    before schema version 3)."""
    from ..account.ledger.postgres import connect, driver_missing

    try:
        import psycopg
    except ImportError as exc:
        raise CliError(f"report: cannot read a PostgreSQL ledger: {driver_missing(exc)}") from None

    url = postgres_url(url) or url
    where = "active=1" if since is None else "active=1 AND ts >= %s"
    try:
        with connect(url) as conn:
            error = _ERROR_COLUMN if _has_error_column(conn) else "NULL"
            cursor = conn.execute(
                f"SELECT {', '.join(_COLUMNS)}, {error} FROM "
                f"otel_tokens_requests WHERE {where} ORDER BY ts, row_id",
                () if since is None else (since,),
            )
            return [dict(zip((*_COLUMNS, _ERROR_COLUMN), row)) for row in cursor]
    except psycopg.errors.UndefinedTable:
        raise CliError(
            f"report: {shown_url(url)} holds no otel_tokens ledger (no otel_tokens_requests table)"
        ) from None
    except psycopg.Error as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CliError(f"report: cannot read {shown_url(url)}: {redact(detail)}") from None


def _has_error_column(conn: Any) -> bool:
    """Whether the database's requests table has the ``error_type`` column (schema 3)."""
    return bool(conn.execute(_HAS_ERROR_COLUMN, (_ERROR_COLUMN,)).fetchone()[0])
