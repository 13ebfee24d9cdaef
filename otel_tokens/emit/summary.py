"""At exit, the calls this process made as one table on stderr (``OTEL_TOKENS_SUMMARY_AT_EXIT``).

For a short script whose telemetry shows nowhere else: no collector receives it, and its
``/metrics`` ends with it. An in-memory metric reader beside the others (no network) holds the
process's points; a forked child starts from none (``process.py`` empties every reader's
state), so a process prints its own calls only, and nothing when it made none. The cells are
drawn by ``otel-tokens report``'s table helpers (``cli/report.py``), every recorded value
shown escaped.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from typing import Any

from .. import faults
from . import instruments as names

__all__ = ["install", "print_summary", "reader", "summary_rows"]

_reader: Any = None

#: (agent, model) -> its figures
Rows = dict[tuple[Any, Any], dict[str, Any]]


def reader() -> Any:
    """A new in-memory metric reader for the meter provider: the at-exit table reads it."""
    global _reader
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    _reader = InMemoryMetricReader()
    return _reader


def install() -> None:
    """Print the table at exit, before the providers shut down (registered after them)."""
    if _reader is not None:
        atexit.register(print_summary)


def print_summary() -> None:
    """The table on stderr when this process made calls; a fault is reported, never raised."""
    try:
        data = _reader.get_metrics_data() if _reader is not None else None
        rows = summary_rows(data)
        if rows:
            _print(rows)
    except Exception as exc:  # noqa: BLE001 - at exit, in the host's process
        faults.report("internal", exc, f"the at-exit summary is not printed: {exc!r}")


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


def _total(rows: Rows) -> dict[str, Any]:
    total = _new_row()
    for row in rows.values():
        for field, value in row.items():
            if value is not None:
                total[field] = (total[field] or 0) + value
    return total


def _print(rows: Rows) -> None:
    """The table, as ``otel-tokens report`` draws its tables, on stderr."""
    from rich.text import Text

    from ..cli import report

    table = report._table(f"otel_tokens: the calls of this process (pid {os.getpid()})",
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
