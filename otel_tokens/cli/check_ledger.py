"""The ledger part of ``otel-tokens check``: where each agent's rows are kept, said as it is.

The ledger file (``OTEL_TOKENS_LEDGER_PATH``: SQLite in WAL mode, its write-ahead log beside
it), the fleet database (``OTEL_TOKENS_LEDGER_URL``, password hidden) and whether it answers
within :data:`PROBE_SECONDS` (a thread of its own: a hung server never holds the check), and
the spool that keeps the fleet's rows while the database is down. Each thing that would keep
rows from where the settings send them is a problem: ``check`` exits 1 on it.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path
from typing import Any

import click

from otel_tokens.redact import redact

#: how long the check waits for the fleet database to answer (connect and ``SELECT 1``)
PROBE_SECONDS = 5.0


def ledger(found: Any, problems: list[str]) -> None:
    """The ``ledger:`` section: the file, the fleet database and its spool."""
    click.echo("ledger (where each agent's rows are kept):")
    if found.ledger_path is None and found.ledger_url is None:
        click.echo(
            "  memory  only this process's, lost at exit (set OTEL_TOKENS_LEDGER_PATH to keep "
            "them for otel-tokens report, or OTEL_TOKENS_LEDGER_URL for the fleet)"
        )
        return
    if found.ledger_path is not None:
        _file(found.ledger_path, problems)
    else:
        click.echo(
            "  file    none (OTEL_TOKENS_LEDGER_PATH unset): this process keeps its rows in "
            "memory, and writes each to the fleet database"
        )
    if found.ledger_url is not None:
        _fleet(found.ledger_url, problems)
        _spool(found, problems)


def _file(path: str, problems: list[str]) -> None:
    """The ledger file: what is there, whether a process can write it (it, its folder for the
    write-ahead log), and that log's size."""
    trouble = _file_trouble(path)
    if trouble is not None:
        click.echo(f"  file    {path}: NOT usable: {trouble} (rows stay in memory)")
        problems.append(f"OTEL_TOKENS_LEDGER_PATH {path!r}: {trouble}")
        return
    if not os.path.exists(path):
        click.echo(f"  file    {path}: not there yet (SQLite, made at the first row)")
        return
    mode = _journal_mode(path)
    if mode is None:
        click.echo(f"  file    {path}: empty (SQLite, made a ledger at the first row)")
        return
    wal = Path(f"{path}-wal")
    log = f"write-ahead log {wal.name} {_size(wal)}" if wal.exists() else "every row checkpointed"
    click.echo(f"  file    {path}: SQLite, {mode} mode, {log}")


def _file_trouble(path: str) -> str | None:
    """Why otel_tokens could not keep its rows in ``path`` (None: it can)."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        return "a directory, not a file"
    if not os.path.isdir(folder):
        return f"its folder {folder} does not exist"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"its folder {folder} is not writable (SQLite writes its write-ahead log there)"
    if not os.path.exists(path):
        return None
    if not stat.S_ISREG(os.stat(path).st_mode):
        return "not a regular file"
    if not os.access(path, os.R_OK | os.W_OK):
        return "not writable"
    try:
        _journal_mode(path)
    except (OSError, ValueError) as exc:
        return str(exc) if isinstance(exc, ValueError) else f"cannot be read ({exc.strerror})"
    return None


def _journal_mode(path: str) -> str | None:
    """``WAL`` or ``rollback journal`` from the file's SQLite header (None: an empty file,
    made a database at the first row), read as bytes: the check never opens the database,
    so it neither checkpoints nor removes a write-ahead log a running program relies on."""
    with open(path, "rb") as f:
        header = f.read(20)
    if not header:
        return None
    if len(header) < 20 or not header.startswith(b"SQLite format 3\x00"):
        raise ValueError("not a SQLite file")
    return "WAL" if header[18:20] == b"\x02\x02" else "rollback journal"


def _fleet(url: str, problems: list[str]) -> None:
    """The fleet database (no password shown) and whether it answers in time."""
    shown = redact(url)
    failure = probe(url)
    if failure is None:
        click.echo(f"  fleet   {shown}: reachable (every row is written there)")
        return
    click.echo(f"  fleet   {shown}: NOT usable: {failure}")
    problems.append(f"the fleet ledger {shown} cannot be used: {failure}")


def probe(url: str) -> str | None:
    """Why the fleet database at ``url`` cannot be used (None: it answered), within
    :data:`PROBE_SECONDS` whatever the server does (it may accept and never answer)."""
    outcome: list[str | None] = []
    thread = threading.Thread(
        target=lambda: outcome.append(_try(url)), daemon=True, name="otel-tokens-check-fleet"
    )
    thread.start()
    thread.join(PROBE_SECONDS)
    if not outcome:
        return f"no answer within {PROBE_SECONDS:g} s"
    return outcome[0]


def _try(url: str) -> str | None:
    """Connect as the fleet writer does and ask ``SELECT 1``; the failure, password hidden."""
    from otel_tokens.account.ledger.postgres import connect, driver_missing

    try:
        with connect(url, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except ImportError as exc:
        return driver_missing(exc)
    except Exception as exc:  # noqa: BLE001 - reported, whatever it is
        first = (str(exc).strip().splitlines() or [""])[0]
        return redact(f"unreachable ({type(exc).__name__}: {first})", url)
    return None


def _spool(found: Any, problems: list[str]) -> None:
    """The folder the fleet's rows wait in while the database is down: what waits there, and
    whether it can be used."""
    from otel_tokens.account.ledger.spool import Spool, SpoolUnsafe, default_folder

    limit = found.ledger_spool_max_mb * 1024 * 1024
    spool = Spool.for_database(found.ledger_spool_dir or default_folder(), found.ledger_url, limit)
    try:
        there = spool.usable()
    except SpoolUnsafe as exc:
        click.echo(f"  spool   {spool.folder}: NOT usable ({exc})")
        problems.append(str(exc))
        return
    if not there:
        trouble = _cannot_make(spool.folder)
        click.echo(f"  spool   {spool.folder}: {trouble or 'made when first needed'}")
        if trouble:
            problems.append(f"fleet ledger spool {spool.folder}: {trouble}")
        return
    names = os.listdir(spool.folder)
    waiting = sum(name.endswith(".rows") for name in names)
    failed = sum(name.endswith(".failed") for name in names)
    click.echo(
        f"  spool   {spool.folder}: {waiting} batch(es) waiting for the database, "
        f"{_size_of(spool.size())} of {found.ledger_spool_max_mb} MB"
        + (f"; {failed} file(s) of rows the database refused" if failed else "")
    )


def _cannot_make(folder: Path) -> str | None:
    """Why ``folder`` could not be made (its nearest existing parent is not writable)."""
    parent = folder
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if parent.is_dir() and os.access(parent, os.W_OK | os.X_OK):
        return None
    return f"cannot be made ({parent} is not a writable folder): rows are lost while it is down"


def _size(path: Path) -> str:
    return _size_of(path.stat().st_size)


def _size_of(size: int) -> str:
    return f"{size / 1024:.0f} kB" if size >= 1024 else f"{size} bytes"
