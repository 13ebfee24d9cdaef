"""At exit, the calls the program made as one table on stderr (``OTEL_TOKENS_SUMMARY_AT_EXIT``).

For a short script whose telemetry shows nowhere else: no collector receives it, and its
``/metrics`` ends with it. An in-memory metric reader beside the others (no network) holds a
process's points; a forked child starts from none (``process.py`` empties every reader's
state), so each process reads its own calls only.

One table for the whole program: the first process that sets the summary up (the program's top
process) makes a private directory (mode 0700) and names it to its descendants (module state
for forked ones, ``OTEL_TOKENS_SUMMARY_DIR`` for spawned ones and Python subprocesses). A
descendant prints nothing: at its exit flush (``atexit``, or ``Setup.shutdown`` where a pool
worker ends in ``os._exit``) it adds its rows to those left there (``summary_dir.py``: one
file however many workers come and go). At its exit the top process adds them to its own
rows, prints one table and removes the directory; it waits for no descendant (one still
running is not counted; one that outlives the top process prints its own table). The cells
are drawn by ``otel-tokens report``'s table helpers (``cli/report.py``), every recorded value
shown escaped.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sys
from typing import Any

from .. import faults
from ..settings import SUMMARY_DIR_MARKER
from . import summary_dir
from .summary_rows import Rows, summary_rows, total

__all__ = ["install", "leave_rows", "print_summary", "reader", "summary_rows"]

_reader: Any = None
_gather: str | None = None  # the directory descendants leave their rows in
_top_pid = 0  # the process that made it: it prints the table
_printed: dict[int, object] = {}  # pid -> a mark: that process has printed its table


def reader() -> Any:
    """A new in-memory metric reader for the meter provider: the at-exit table reads it."""
    global _reader
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    _reader = InMemoryMetricReader()
    return _reader


def install(inherited: str | None = None, worker: bool = False) -> None:
    """Print the table at exit, before the providers shut down (registered after them).
    ``inherited``: the top process's directory (``settings.summary_dir``), in a spawned
    descendant; ``worker``: a ``multiprocessing`` child."""
    if _reader is not None:
        _join_or_gather(inherited, worker)
        atexit.register(print_summary)


def _join_or_gather(inherited: str | None, worker: bool) -> None:
    """A descendant joins the directory it was given; the top process makes it, unless it is
    a ``multiprocessing`` worker whose parent gathers nothing (it prints its own table, as
    its siblings do; one ended by a signal, e.g. uvicorn's, then leaves no directory)."""
    global _gather, _top_pid
    try:
        if inherited and summary_dir.private(inherited):
            _gather = inherited
            return
        if worker:
            return
        _gather = summary_dir.make()
        _top_pid = os.getpid()
        os.environ[SUMMARY_DIR_MARKER] = _gather  # for spawned descendants
    except Exception as exc:  # noqa: BLE001 - the process then prints its own calls only
        faults.report("internal", exc, f"the at-exit summary covers this process only: {exc!r}")


def print_summary() -> None:
    """At exit: the program's table in the top process; a descendant leaves its rows for it
    (or prints them when the top process has ended). A fault is reported, never raised."""
    try:
        if _reader is None:
            return
        if os.getpid() == _top_pid:
            if _first_time():
                _print_program()
        elif (_gather is None or not summary_dir.leave(_gather, _own_rows())) and _first_time():
            _print(_own_rows(), others=0)  # no top process to leave them to
    except Exception as exc:  # noqa: BLE001 - at exit, in the host's process
        faults.report("internal", exc, f"the at-exit summary is not printed: {exc!r}")


def leave_rows() -> None:
    """At a descendant's exit flush (``Setup.shutdown``: a pool worker's ``os._exit`` runs no
    ``atexit``; a SIGTERM may cut its ``atexit`` short): its rows for the top process's
    table, before the providers shut down."""
    if _gather is not None and os.getpid() != _top_pid:
        print_summary()


def _first_time() -> bool:
    """True once per process (``setdefault`` is one step: two exit paths never both pass)."""
    mark = object()
    return _printed.setdefault(os.getpid(), mark) is mark


def _own_rows() -> Rows:
    return summary_rows(_reader.get_metrics_data())


def _print_program() -> None:
    """The top process: its rows and those its descendants left, one table; the directory
    removed (also when nobody left anything)."""
    try:
        rows = _own_rows()
        others = summary_dir.gather(_gather, rows)  # type: ignore[arg-type]
    finally:
        shutil.rmtree(_gather, ignore_errors=True)  # type: ignore[arg-type]
    _print(rows, others)


def _title(others: int) -> str:
    if not others:
        return f"otel_tokens: the calls of this process (pid {os.getpid()})"
    more = "1 other process" if others == 1 else f"{others} other processes"
    return f"otel_tokens: the calls of pid {os.getpid()} and {more}"  # fits 80 columns


def _print(rows: Rows, others: int) -> None:
    """The table, as ``otel-tokens report`` draws its tables, on stderr (nothing when no
    call was made)."""
    if not rows:
        return
    from rich.text import Text

    from ..cli import report

    table = report._table(
        _title(others),
        ["agent", "model", "requests", "failed", "input", "output", "cost USD"],
        left=("model",),
    )
    shown, rest = _costliest(rows)
    for i, ((agent, model), row) in enumerate(shown):
        _add_row(
            table,
            report,
            report._cell(agent),
            report._cell(model),
            row,
            last=i == len(shown) - 1 and not rest,
        )
    if rest:
        _add_row(table, report, Text(f"({len(rest)} more)"), Text(""), total(dict(rest)), last=True)
    _add_row(table, report, Text("TOTAL"), Text(""), total(rows), last=False)
    with contextlib.redirect_stdout(sys.stderr):  # report's console writes to sys.stdout
        report._console().print(table)


#: rows the table shows one by one; past it, the rest as one "(N more)" row
MAX_ROWS = 20


def _costliest(rows: Rows) -> tuple[list[Any], list[Any]]:
    """The rows by cost, then tokens, most first: those shown, and the rest past
    :data:`MAX_ROWS` (a program of many agents and models prints a table that fits a screen)."""
    ordered = sorted(rows.items(), key=lambda kv: (-(kv[1]["cost_usd"] or 0), -_tokens(kv[1])))
    if len(ordered) <= MAX_ROWS:
        return ordered, []
    return ordered[: MAX_ROWS - 1], ordered[MAX_ROWS - 1 :]


def _tokens(row: dict[str, Any]) -> int:
    return (row["input_tokens"] or 0) + (row["output_tokens"] or 0)


def _add_row(
    table: Any, report: Any, agent: Any, model: Any, row: dict[str, Any], last: bool
) -> None:
    table.add_row(
        agent,
        model,
        str(row["requests"]),
        str(row["failures"]),
        report._n(row["input_tokens"]),
        report._n(row["output_tokens"]),
        report._n(row["cost_usd"], 4),
        end_section=last,
    )
