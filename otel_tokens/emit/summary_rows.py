"""The at-exit table's rows: requests, failures, input and output tokens and cost per agent and
model, read from otel_tokens' own metric points, added up across processes and checked when
read back from a file another process wrote (``summary_dir.py``)."""

from __future__ import annotations

from typing import Any

from . import instruments as names

__all__ = [
    "FIELDS",
    "Rows",
    "add_into",
    "add_rows",
    "decoded",
    "encoded",
    "new_row",
    "since",
    "summary_rows",
    "total",
]

#: (agent, model) -> its figures
Rows = dict[tuple[Any, Any], dict[str, Any]]
FIELDS = ("requests", "failures", "input_tokens", "output_tokens", "cost_usd")

#: the metrics the table reads (others, such as the context gauge, make no row)
_READ = (names.OPERATION_DURATION, names.TOKENS, names.COST)


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
            row = rows.setdefault((attrs.get(names.AGENT_NAME), model), new_row())
            _add_point(row, metric.name, attrs, point)
    return rows


def _own_metrics(data: Any) -> list[Any]:
    if data is None:
        return []
    return [
        metric
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        if scope.scope.name == names.SCOPE
        for metric in scope.metrics
    ]


def new_row() -> dict[str, Any]:
    return {
        "requests": 0,
        "failures": 0,
        "input_tokens": None,
        "output_tokens": None,
        "cost_usd": None,
    }


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


def add_into(total: dict[str, Any], row: dict[str, Any]) -> None:
    """``row``'s figures added into ``total`` (a figure nobody has stays ``None``)."""
    for field in FIELDS:
        if row[field] is not None:
            total[field] = (total[field] or 0) + row[field]


def add_rows(total: Rows, rows: Rows) -> None:
    """Every row of ``rows`` added into ``total``'s row of the same agent and model."""
    for key, row in rows.items():
        add_into(total.setdefault(key, new_row()), row)


def since(now: Rows, before: Rows) -> Rows:
    """What ``now`` holds beyond ``before``, an earlier reading of the same process's
    cumulative figures (a figure ``now`` does not have stays ``None``)."""
    grown: Rows = {}
    for key, row in now.items():
        old = before.get(key, new_row())
        grown[key] = {
            field: row[field] if row[field] is None else row[field] - (old[field] or 0)
            for field in FIELDS
        }
    return grown


def total(rows: Rows) -> dict[str, Any]:
    """One row, the sum of ``rows``."""
    summed = new_row()
    for row in rows.values():
        add_into(summed, row)
    return summed


def encoded(rows: Rows) -> list[list[Any]]:
    """``rows`` as JSON can hold them: ``[agent, model, figures]`` each."""
    return [[agent, model, row] for (agent, model), row in rows.items()]


def decoded(data: Any) -> Rows:
    """Rows read back from :func:`encoded`'s form, checked (else ValueError)."""
    rows: Rows = {}
    for entry in data if isinstance(data, list) else [None]:
        if not _is_row(entry):
            raise ValueError("not the summary's rows")
        add_into(rows.setdefault((entry[0], entry[1]), new_row()), entry[2])
    return rows


def _is_row(entry: Any) -> bool:
    """[agent, model, figures]: names a string or null, each figure a number or null."""
    if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[2], dict)):
        return False
    names_ok = all(value is None or isinstance(value, str) for value in entry[:2])
    return names_ok and set(entry[2]) == set(FIELDS) and all(map(_figure, entry[2].values()))


def _figure(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))
