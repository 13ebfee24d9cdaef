"""At exit, the calls the program made as one table on stderr (``OTEL_TOKENS_SUMMARY_AT_EXIT``).

For a short script whose telemetry shows nowhere else: no collector receives it, and its
``/metrics`` ends with it. An in-memory metric reader beside the others (no network) holds a
process's points; a forked child starts from none (``process.py`` empties every reader's
state), so each process reads its own calls only.

One table for the whole program: the first process that sets the summary up (the program's top
process) makes a private directory (mode 0700) and names it to its descendants (module state
for forked ones, ``OTEL_TOKENS_SUMMARY_DIR`` for spawned ones and Python subprocesses). A
descendant prints nothing: at its exit flush (``atexit``, or ``Setup.shutdown`` where a pool
worker ends in ``os._exit``) it leaves its rows there as one JSON file (written, then renamed
into place). At its exit the top process adds the files present to its own rows, prints one
table and removes the directory; it waits for no descendant (one still running is not
counted; one that outlives the top process prints its own table). The cells are drawn by
``otel-tokens report``'s table helpers (``cli/report.py``), every recorded value shown escaped.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import stat
import sys
import tempfile
import uuid
from typing import Any

from .. import faults
from ..settings import SUMMARY_DIR_MARKER
from . import instruments as names

__all__ = ["install", "leave_rows", "print_summary", "reader", "summary_rows"]

_reader: Any = None
_gather: str | None = None  # the directory descendants leave their rows in
_top_pid = 0  # the process that made it: it prints the table
_printed: dict[int, object] = {}  # pid -> a mark: that process has printed its table
_names: dict[int, str] = {}  # pid -> the name of the file its rows are left in

#: (agent, model) -> its figures
Rows = dict[tuple[Any, Any], dict[str, Any]]
_FIELDS = ("requests", "failures", "input_tokens", "output_tokens", "cost_usd")


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
        if inherited and _private_directory(inherited):
            _gather = inherited
            return
        if worker:
            return
        _gather = tempfile.mkdtemp(prefix="otel_tokens-summary-")  # mode 0700
        _top_pid = os.getpid()
        os.environ[SUMMARY_DIR_MARKER] = _gather  # for spawned descendants
    except Exception as exc:  # noqa: BLE001 - the process then prints its own calls only
        faults.report("internal", exc, f"the at-exit summary covers this process only: {exc!r}")


def _private_directory(path: str) -> bool:
    """A directory of this user's that nobody else can read or write (not a link)."""
    try:
        info = os.lstat(path)
    except (OSError, ValueError):  # gone (its top process has ended), or a NUL in the name
        return False
    return (stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
            and stat.S_IMODE(info.st_mode) & 0o077 == 0)  # fmt: skip


def print_summary() -> None:
    """At exit: the program's table in the top process; a descendant leaves its rows for it
    (or prints them when the top process has ended). A fault is reported, never raised."""
    try:
        if _reader is None:
            return
        if os.getpid() == _top_pid:
            if _first_time():
                _print_program()
        elif (_gather is None or not _leave(_own_rows())) and _first_time():
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


def _file_name() -> str:
    """This process's file: one name, however many of its exit paths leave its rows (each
    replaces it with the same or later figures, so none is counted twice)."""
    return _names.setdefault(os.getpid(), f"{os.getpid()}-{uuid.uuid4().hex}.json")


def _own_rows() -> Rows:
    return summary_rows(_reader.get_metrics_data())


def _print_program() -> None:
    """The top process: its rows and those its descendants left, one table; the directory
    removed (also when nobody left anything)."""
    try:
        rows = _own_rows()
        others = _add_left_rows(rows)
    finally:
        shutil.rmtree(_gather, ignore_errors=True)  # type: ignore[arg-type]
    _print(rows, others)


def _leave(rows: Rows) -> bool:
    """This descendant's rows as a file in the top process's directory (nothing when it made
    no call); False when the directory is gone (the top process has ended)."""
    if not rows:
        return True
    folder = str(_gather)
    try:
        fd, part = tempfile.mkstemp(prefix=f"{os.getpid()}-", suffix=".part", dir=folder)
    except FileNotFoundError:
        return False
    try:
        with os.fdopen(fd, "w", encoding="ascii") as out:  # JSON escapes every non-ASCII
            json.dump([[agent, model, row] for (agent, model), row in rows.items()], out)
        os.replace(part, os.path.join(folder, _file_name()))  # the top reads whole files only
    except FileNotFoundError:  # removed meanwhile: the top process has ended
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(part)  # left behind only when the rename did not happen
    return True


def _add_left_rows(rows: Rows) -> int:
    """The rows descendants left, added into ``rows``; how many processes left some."""
    count = 0
    for name in sorted(os.listdir(_gather)):  # type: ignore[arg-type]
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(_gather, name), encoding="ascii") as file:  # type: ignore[arg-type]
                left = _decoded(json.load(file))
        except (OSError, ValueError) as exc:
            faults.report("internal", exc, f"at-exit summary: a process's rows unreadable: {exc!r}")
            continue
        for key, row in left.items():
            _add_into(rows.setdefault(key, _new_row()), row)
        count += 1
    return count


def _decoded(data: Any) -> Rows:
    """A file's rows, checked: [agent, model, figures] each (else ValueError)."""
    rows: Rows = {}
    for entry in data if isinstance(data, list) else [None]:
        if not _is_row(entry):
            raise ValueError("not the summary's rows")
        _add_into(rows.setdefault((entry[0], entry[1]), _new_row()), entry[2])
    return rows


def _is_row(entry: Any) -> bool:
    """[agent, model, figures]: names a string or null, each figure a number or null."""
    if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[2], dict)):
        return False
    names_ok = all(value is None or isinstance(value, str) for value in entry[:2])
    return names_ok and set(entry[2]) == set(_FIELDS) and all(map(_figure, entry[2].values()))


def _figure(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def summary_rows(data: Any) -> Rows:
    """Requests, failures, input and output tokens and cost per agent and model, from
    otel_tokens' own metric points (another instrumentation's are left out)."""
    rows: Rows = {}
    for metric in _own_metrics(data):
        if metric.name not in _READ:
            continue
        for point in metric.data.data_points:
            attrs = point.attributes or {}
            model = attrs.get(names.RESPONSE_MODEL) or attrs.get(names.REQUEST_MODEL)
            row = rows.setdefault((attrs.get(names.AGENT_NAME), model), _new_row())
            _add_point(row, metric.name, attrs, point)
    return rows


#: the metrics the table reads (others, such as the context gauge, make no row)
_READ = (names.OPERATION_DURATION, names.TOKENS, names.COST)


def _own_metrics(data: Any) -> list[Any]:
    if data is None:
        return []
    return [metric for resource in data.resource_metrics for scope in resource.scope_metrics
            if scope.scope.name == names.SCOPE for metric in scope.metrics]  # fmt: skip


def _new_row() -> dict[str, Any]:
    return {"requests": 0, "failures": 0, "input_tokens": None, "output_tokens": None,
            "cost_usd": None}  # fmt: skip


def _add_point(row: dict[str, Any], metric: str, attrs: Any, point: Any) -> None:
    """One metric point into its row: the duration's count is the requests (failed ones carry
    ``error.type``), ``otel_tokens.tokens`` the input and output, ``otel_tokens.cost`` the USD."""
    if metric == names.OPERATION_DURATION:
        row["requests"] += point.count
        if attrs.get(names.ERROR_TYPE) is not None:
            row["failures"] += point.count
    elif metric == names.TOKENS and attrs.get(names.TOKEN_TYPE) in ("input", "output"):
        field = f"{attrs[names.TOKEN_TYPE]}_tokens"
        row[field] = (row[field] or 0) + point.value
    elif metric == names.COST:
        row["cost_usd"] = (row["cost_usd"] or 0) + point.value


def _add_into(total: dict[str, Any], row: dict[str, Any]) -> None:
    """``row``'s figures added into ``total`` (a figure nobody has stays ``None``)."""
    for field in _FIELDS:
        if row[field] is not None:
            total[field] = (total[field] or 0) + row[field]


def _total(rows: Rows) -> dict[str, Any]:
    total = _new_row()
    for row in rows.values():
        _add_into(total, row)
    return total


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

    table = report._table(_title(others),
                          ["agent", "model", "requests", "failed", "input", "output", "cost USD"],
                          left=("model",))  # fmt: skip
    ordered = sorted(rows.items(), key=lambda kv: -(kv[1]["cost_usd"] or 0))
    for i, ((agent, model), row) in enumerate(ordered):
        _add_row(table, report, report._cell(agent), report._cell(model), row,
                 last=i == len(ordered) - 1)  # fmt: skip
    _add_row(table, report, Text("TOTAL"), Text(""), _total(rows), last=False)
    with contextlib.redirect_stdout(sys.stderr):  # report's console writes to sys.stdout
        report._console().print(table)


def _add_row(table: Any, report: Any, agent: Any, model: Any, row: dict[str, Any],
             last: bool) -> None:  # fmt: skip
    table.add_row(agent, model, str(row["requests"]), str(row["failures"]),
                  report._n(row["input_tokens"]), report._n(row["output_tokens"]),
                  report._n(row["cost_usd"], 4), end_section=last)  # fmt: skip
