"""``otel-tokens report``: what a persisted usage ledger holds, for every agent in it.

Reads the SQLite file ``OTEL_TOKENS_LEDGER_PATH`` points to (or ``--db``) read-only, and
prints totals per agent, statistics (p50/p95/p99), cost by model, cost by time range, the
failed calls by error type and the top requests. Only the current timeline counts (rows a
rollback deactivated are left out). A failed call is counted as a failure, never as a request
whose usage is unpriced or estimated.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sqlite3
import tempfile
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click

from .common import CliError
from .fleet_rows import is_url, read_fleet_rows, shown_url

_COLUMNS = (
    "ledger, request_id, ts, model, provider, source, input_tokens, output_tokens, "
    "cache_read_tokens, cache_write_tokens, reasoning_tokens, cost_usd, "
    "premium_requests, trace_id, span_id"
)
_STAT_FIGURES = ("input_tokens", "output_tokens", "total_tokens", "cost_usd")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
#: the error type of a failed call in a ledger that does not record error types (a file
#: before schema version 3, rows a release before schema 3 wrote to a fleet database): a row
#: without any token figure or estimate
NOT_RECORDED = "(error type not recorded)"
#: providers whose streams report usage only when asked (``stream_options.include_usage``)
_INCLUDE_USAGE_PROVIDERS = ("openai", "azure")
#: decimals of a USD amount in ``--json`` (sums of binary floats rounded: no 0.0223324000000002)
JSON_USD_DECIMALS = 10


def shown(value: Any) -> str:
    """A recorded value as a table shows it: ``-`` for none only; the value itself when it is
    printable text; otherwise (control characters, escape sequences, line breaks, the text
    ``-``, a leading ``"``) quoted with those characters escaped, so that no value can clear
    the terminal, set its title, add a row or pass for "none"."""
    if value is None or value == "":
        return "-"
    text = str(value)
    if text != "-" and not text.startswith('"') and text.isprintable():
        return text
    return '"' + "".join(_escaped(c) for c in text) + '"'


def _escaped(char: str) -> str:
    if char in '"\\':
        return "\\" + char
    if char.isprintable():
        return char
    code = ord(char)
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char)
    if named:
        return named
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else f"\\U{code:08x}"
    )


def parse_since(text: str, now: float | None = None) -> float:
    """``30m``, ``24h``, ``7d``, ``2w`` (ago), or an ISO date/date-time -> epoch seconds."""
    now = time.time() if now is None else now
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text)
    if m:
        return now - float(m.group(1)) * _UNITS[m.group(2)]
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is neither a duration (30m, 24h, 7d, 2w) nor an ISO date "
            "(2025-06-01, 2025-06-01T12:00)",
            param_hint="--since",
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time, as the user typed it
    return moment.timestamp()


def read_rows(path: str) -> list[dict[str, Any]]:
    """Every active row of the file, oldest first (read-only; clear errors).

    A ledger in WAL mode on a read-only filesystem (a backup or snapshot volume) cannot be
    opened read-only in place: SQLite needs to create its shared-memory file beside it. It is
    then read from a private copy of the file and its write-ahead log, so rows not yet
    checkpointed count too; the original is never written."""
    file = Path(path)
    if not file.exists():
        raise CliError(f"report: no ledger file at {path}")
    if file.is_dir():
        raise CliError(f"report: {path} is a directory, not a ledger file")
    if not os.access(file, os.R_OK):
        raise CliError(f"report: cannot read {path} (permission denied)")
    try:
        return _rows(sqlite3.connect(f"file:{file.resolve()}?mode=ro", uri=True), path)
    except sqlite3.OperationalError as exc:
        if "unable to open" not in str(exc) and "readonly" not in str(exc):
            raise CliError(f"report: cannot open {path}: {exc}") from None
    with tempfile.TemporaryDirectory(prefix="otel-tokens-report-") as scratch:
        copy = Path(scratch) / file.name
        for suffix in ("", "-wal"):
            if Path(f"{file}{suffix}").exists():
                shutil.copyfile(f"{file}{suffix}", f"{copy}{suffix}")
        return _rows(sqlite3.connect(str(copy)), path)


def _rows(conn: sqlite3.Connection, path: str) -> list[dict[str, Any]]:
    try:
        try:
            version = conn.execute(
                "SELECT value FROM otel_tokens_meta WHERE key='schema_version'"
            ).fetchone()
        except sqlite3.OperationalError as exc:
            if "unable to open" in str(exc) or "readonly" in str(exc):
                raise  # a read-only volume: read_rows reads a copy
            raise CliError(f"report: cannot read {path}: {_reason(exc)}") from None
        except sqlite3.DatabaseError as exc:
            raise CliError(f"report: cannot read {path}: {_reason(exc)}") from None
        from ..account.ledger.sqlite import ERROR_COLUMN, SCHEMA_VERSION, WHO_COLUMNS

        if version is None or version[0] not in [str(v) for v in range(1, SCHEMA_VERSION + 1)]:
            raise CliError(
                f"report: {path} has ledger schema version "
                f"{version[0] if version else 'unknown'}, this otel_tokens reads "
                f"versions 1 to {SCHEMA_VERSION}"
            )
        who = ", ".join(WHO_COLUMNS) if version[0] != "1" else "NULL, NULL, NULL"  # 1: before them
        error = ERROR_COLUMN if int(version[0]) >= 3 else "NULL"  # before 3: not recorded
        names = [c.strip() for c in _COLUMNS.split(",")] + [*WHO_COLUMNS, ERROR_COLUMN]
        try:
            cursor = conn.execute(
                f"SELECT {_COLUMNS}, {who}, {error} FROM otel_tokens_requests "
                "WHERE active=1 ORDER BY id"
            )
            rows = [dict(zip(names, row)) for row in cursor]
            return rows if int(version[0]) >= 3 else with_inferred_failures(rows)
        except sqlite3.Error as exc:
            raise CliError(f"report: cannot read {path}: {exc}") from None
    finally:
        conn.close()


def with_inferred_failures(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of a ledger that does not record error types (or not for every row), failed
    calls' marked as such: a row with no error type and without any token figure, estimate
    or cost is taken for a failed call's (a success whose backend reported nothing and that
    could not be estimated reads the same); a recorded error type is kept."""
    for row in rows:
        if row.get("error_type") is not None:
            continue
        failed = (
            row["input_tokens"] is None
            and row["output_tokens"] is None
            and row["source"] == "estimated"
            and row["cost_usd"] is None
        )
        row["error_type"] = NOT_RECORDED if failed else None
    return rows


def is_failure(row: dict[str, Any]) -> bool:
    """Whether the row is a failed call's (its error type recorded)."""
    return row.get("error_type") is not None


def _reason(exc: sqlite3.Error) -> str:
    detail = str(exc)
    if "not a database" in detail:
        return "not an SQLite database"
    if "no such table" in detail:
        return "not an otel_tokens usage ledger (no otel_tokens tables)"
    return detail


def build_ledgers(rows: list[dict[str, Any]], since: float | None) -> dict[str, Any]:
    """In-memory ledgers: one per agent and, under None, one of all of them."""
    from ..account.ledger import UsageLedger
    from ..usage import Usage

    ledgers: dict[str | None, UsageLedger] = {None: UsageLedger("all")}
    for row in rows:
        if since is not None and row["ts"] < since:
            continue
        usage = Usage(
            input_tokens=row["input_tokens"],
            output_tokens=row["output_tokens"],
            cache_read_tokens=row["cache_read_tokens"],
            cache_write_tokens=row["cache_write_tokens"],
            reasoning_tokens=row["reasoning_tokens"],
            premium_requests=row["premium_requests"],
            model=row["model"],
            provider=row["provider"],
            source=row["source"],
        )
        for name in (row["ledger"], None):
            if name not in ledgers:
                ledgers[name] = UsageLedger(str(name))
            ledgers[name].append(
                usage,
                cost_usd=row["cost_usd"],
                request_id=row["request_id"],
                timestamp=row["ts"],
                trace_id=row["trace_id"] or None,
                span_id=row["span_id"] or None,
            )
    return ledgers


def time_ranges(ledger: Any, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Totals per day (per hour when everything falls within two days); ``requests`` without
    the failed calls, which ``failed`` counts."""
    records = ledger.history()
    if not records:
        return []
    first = min(r.timestamp for r in records)
    last = max(r.timestamp for r in records)
    step = 3600 if last - first <= 2 * 86400 else 86400
    start = math.floor(first / step) * step
    failed_in = Counter(math.floor(row["ts"] / step) * step for row in rows if is_failure(row))
    out = []
    while start <= last:
        totals = ledger.totals_between(start, start + step)
        if totals.requests:
            failed = failed_in.get(start, 0)
            out.append(
                {
                    "start": _iso(start),
                    "end": _iso(start + step),
                    **totals.to_dict(),
                    "requests": totals.requests - failed,
                    "failed": failed,
                    "total_tokens": totals.total_tokens,
                }
            )
        start += step
    return out


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _new_totals(**extra: Any) -> dict[str, Any]:
    return {
        **extra,
        "requests": 0,
        "failed": 0,
        "input_tokens": None,
        "output_tokens": None,
        "cost_usd": None,
        "estimated_requests": 0,
        "estimated_tokens": 0,
        "estimated_cost_usd": None,
    }


def _add(totals: dict[str, Any], row: dict[str, Any]) -> None:
    """One row into a group's totals: a request, or a failed call (whose tokens, when its
    backend reported some, still count); a request's estimated share when its usage is an
    estimate (the backend reported none)."""
    failed = is_failure(row)
    totals["failed" if failed else "requests"] += 1
    for key in ("input_tokens", "output_tokens", "cost_usd"):
        if row[key] is not None:
            totals[key] = (totals[key] or 0) + row[key]
    if row["source"] == "estimated" and not failed:
        totals["estimated_requests"] += 1
        totals["estimated_tokens"] += (row["input_tokens"] or 0) + (row["output_tokens"] or 0)
        if row["cost_usd"] is not None:
            totals["estimated_cost_usd"] = (totals["estimated_cost_usd"] or 0) + row["cost_usd"]


def _rows_since(rows: list[dict[str, Any]], since: float | None) -> list[dict[str, Any]]:
    return rows if since is None else [row for row in rows if row["ts"] >= since]


def by_model(rows: list[dict[str, Any]], since: float | None) -> dict[str | None, dict[str, Any]]:
    """Requests, tokens and cost per model (None: not recorded), unpriced models (cost None)
    included, most expensive first and unpriced ones last. A failed call without tokens is in
    :func:`failures`, not here: it used no model the bill shows."""
    models: dict[str | None, dict[str, Any]] = {}
    for row in _rows_since(rows, since):
        if is_failure(row) and row["input_tokens"] is None and row["output_tokens"] is None:
            continue
        m = models.get(row["model"])
        if m is None:
            m = models[row["model"]] = _new_totals(provider=row["provider"], unpriced_requests=0)
        _add(m, row)
        if row["cost_usd"] is None and (row["input_tokens"] or row["output_tokens"]):
            m["unpriced_requests"] += 1
    return dict(
        sorted(
            models.items(), key=lambda kv: (kv[1]["cost_usd"] is None, -(kv[1]["cost_usd"] or 0))
        )
    )


def failures(rows: list[dict[str, Any]], since: float | None) -> list[dict[str, Any]]:
    """Failed calls per agent, model and error type, the most frequent first."""
    groups: dict[tuple[Any, Any, Any], dict[str, Any]] = {}
    for row in _rows_since(rows, since):
        if not is_failure(row):
            continue
        key = (row["ledger"], row["model"], row["error_type"])
        g = groups.setdefault(
            key,
            {
                "agent": key[0],
                "model": key[1],
                "error_type": key[2],
                "calls": 0,
                "first": row["ts"],
                "last": row["ts"],
            },
        )
        g["calls"] += 1
        g["first"], g["last"] = min(g["first"], row["ts"]), max(g["last"], row["ts"])
    out = sorted(groups.values(), key=lambda g: (-g["calls"], -g["last"]))
    return [{**g, "first": _iso(g["first"]), "last": _iso(g["last"])} for g in out]


#: ``--by`` -> the ledger column it groups by (service: a fleet ledger's only)
GROUPS = {
    "user": "user_id",
    "tenant": "tenant_id",
    "conversation": "conversation_id",
    "service": "service",
    "agent": "ledger",
    "model": "model",
}


def by_who(
    rows: list[dict[str, Any]], since: float | None, column: str
) -> dict[str | None, dict[str, Any]]:
    """Requests, tokens and cost per user, tenant or conversation (None: not said), most
    expensive first."""
    groups: dict[str | None, dict[str, Any]] = {}
    for row in _rows_since(rows, since):
        key = row.get(column) or None
        g = groups.get(key)
        if g is None:
            g = groups[key] = _new_totals()
        _add(g, row)
    return dict(sorted(groups.items(), key=lambda kv: -(kv[1]["cost_usd"] or 0)))


def by_agent(rows: list[dict[str, Any]], since: float | None) -> dict[str, dict[str, Any]]:
    """Each agent's (None: all agents') requests, failed calls and estimated share."""
    agents: dict[str | None, dict[str, Any]] = {None: _new_totals()}
    for row in _rows_since(rows, since):
        _add(agents.setdefault(row["ledger"], _new_totals()), row)
        _add(agents[None], row)
    return agents


_SHARES = ("requests", "failed", "estimated_requests", "estimated_tokens", "estimated_cost_usd")


def build_report(
    path: str, since: float | None, top_n: int, by: str | None = None
) -> dict[str, Any]:
    """The report's figures; dictionaries are keyed by the recorded values (None: none
    recorded). :func:`json_ready` turns them into JSON keys."""
    if is_url(path):  # a fleet ledger: every process's rows (older releases': no error types)
        rows, path = with_inferred_failures(read_fleet_rows(path, since)), shown_url(path)
    else:
        rows = read_rows(path)
    if by is not None:
        return {
            "ledger": str(path),
            "since": _iso(since) if since is not None else None,
            "by": by,
            "groups": by_who(rows, since, GROUPS[by]),
        }
    ledgers = build_ledgers(rows, since)
    everything = ledgers.pop(None)
    shares = by_agent(rows, since)
    agents = {
        name: {
            **lg.cumulative.to_dict(),
            "total_tokens": lg.cumulative.total_tokens,
            **{k: shares[name][k] for k in _SHARES},
        }
        for name, lg in ledgers.items()
    }
    stats = everything.statistics()
    return {
        "ledger": str(path),
        "since": _iso(since) if since is not None else None,
        "totals": {
            **everything.cumulative.to_dict(),
            "total_tokens": everything.cumulative.total_tokens,
            **{k: shares[None][k] for k in _SHARES},
        },
        "agents": agents,
        "statistics": {f: stats[f].to_dict() for f in _STAT_FIGURES},
        "cost_by_model": dict(sorted(everything.cost_by_model().items(), key=lambda kv: -kv[1])),
        "models": by_model(rows, since),
        "cost_by_time": time_ranges(everything, _rows_since(rows, since)),
        "failures": failures(rows, since),
        "top_requests": [
            {
                **r.to_dict(),
                "agent": _agent_of(ledgers, r.request_id),
                "time": _iso(r.timestamp),
                "total_tokens": r.total_tokens,
            }
            for r in everything.top(top_n, by="cost_usd")
        ],
    }


def json_key(value: Any) -> str:
    """A recorded value as a JSON key: ``-`` for none; a value that reads as none quoted."""
    if value is None or value == "":
        return "-"
    return shown(value) if value == "-" or str(value).startswith('"') else str(value)


def json_ready(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with every dictionary keyed by recorded values keyed by :func:`json_key`, and
    every USD amount rounded (:func:`usd_rounded`)."""
    out = dict(data)
    for field in ("groups", "agents", "models", "cost_by_model"):
        if field in out:
            out[field] = {json_key(k): v for k, v in out[field].items()}
    return usd_rounded(out)


def usd_rounded(value: Any, money: bool = False) -> Any:
    """``value`` with every amount under a ``cost`` key rounded to :data:`JSON_USD_DECIMALS`
    decimals: the sums of the rows' binary floats, without their last-digit noise."""
    if isinstance(value, dict):
        return {k: usd_rounded(v, money or "cost" in str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [usd_rounded(v, money) for v in value]
    if money and isinstance(value, float):
        return round(value, JSON_USD_DECIMALS)
    return value


def _agent_of(ledgers: dict[str, Any], request_id: str) -> str | None:
    for name, lg in ledgers.items():
        if any(r.request_id == request_id for r in lg.history()):
            return name
    return None


def _n(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    if digits:
        return f"{value:,.{digits}f}"
    return f"{value:,.0f}" if isinstance(value, float) else f"{value:,}"


def _table(title: str, columns: list[str], left: tuple[str, ...] = ()) -> Any:
    """A table for 80 columns: figures never wrap (so never cut), names may fold."""
    from rich import box
    from rich.table import Table

    table = Table(
        title=title,
        box=box.SIMPLE_HEAD,
        title_justify="left",
        pad_edge=False,
        collapse_padding=True,
    )
    for i, col in enumerate(columns):
        text = i == 0 or col in left
        table.add_column(
            col, justify="left" if text else "right", no_wrap=not text, overflow="fold"
        )
    return table


def _premium(value: Any) -> str:
    return "-" if value is None else f"{value:g}"


def _console() -> Any:
    """Output where nothing recorded is interpreted: no markup, no emoji codes, no
    highlighting (every recorded value also goes through :func:`shown`, as plain ``Text``)."""
    from rich.console import Console

    return Console(highlight=False, markup=False, emoji=False)  # on a pipe: 80 columns, no colour


def _cell(value: Any) -> Any:
    """A table cell showing a recorded value (see :func:`shown`), never read as markup."""
    from rich.text import Text

    return Text(shown(value))


def _estimated(t: dict[str, Any]) -> str:
    """``; of which estimated ...`` when part of a total is an estimate, else nothing."""
    if not t.get("estimated_requests"):
        return ""
    cost = t["estimated_cost_usd"]
    return (
        f"; of which estimated (no usage reported): {t['estimated_requests']} requests, "
        f"{_n(t['estimated_tokens'])} tokens" + (f", USD {_n(cost, 4)}" if cost is not None else "")
    )


def print_report(data: dict[str, Any]) -> None:
    """The report as tables, each readable at 80 columns."""
    from rich.text import Text

    console = _console()
    t = data["totals"]
    scope = f" since {data['since']}" if data["since"] else ""
    failed = f"{t['failed']} failed, " if t["failed"] else ""
    console.print(
        Text(
            f"ledger {shown(data['ledger'])}{scope}: {t['requests']} requests, "
            f"{failed}{_n(t['total_tokens'])} tokens, USD {_n(t['cost_usd'], 4)}, "
            f"{_n(t['premium_requests'], 2) if t['premium_requests'] is not None else '-'} "
            f"premium requests{_estimated(t)}"
        ),
        overflow="fold",
    )
    if not t["requests"] and not t["failed"]:
        return
    agents = [*((_cell(name), a) for name, a in data["agents"].items()), (Text("TOTAL"), t)]
    _print_token_totals(console, agents)
    _print_cost_totals(console, agents)
    _print_statistics(console, data)
    _print_models(console, data)
    _print_failures(console, data)
    _print_time_and_top(console, data)


def _print_token_totals(console: Any, agents: list[tuple[Any, dict[str, Any]]]) -> None:
    """The tokens per agent, by kind, one row each and the TOTAL row set apart below them."""
    last = len(agents) - 2
    table = _table(
        "totals by agent: tokens",
        [
            "agent",
            "requests",
            "failed",
            "input",
            "cache\nread",
            "cache\nwrite",
            "output",
            "reasoning",
            "total",
        ],
    )
    for i, (name, a) in enumerate(agents):
        table.add_row(
            name,
            str(a["requests"]),
            str(a["failed"]),
            _n(a["input_tokens"]),
            _n(a["cache_read_tokens"]),
            _n(a["cache_write_tokens"]),
            _n(a["output_tokens"]),
            _n(a["reasoning_tokens"]),
            _n(a["total_tokens"]),
            end_section=i == last,
        )
    console.print(table)


def _print_cost_totals(console: Any, agents: list[tuple[Any, dict[str, Any]]]) -> None:
    """The cost per agent, and what of it is estimated, in the rows of the tokens table."""
    last = len(agents) - 2
    table = _table(
        "totals by agent: cost, and what of it is estimated",
        [
            "agent",
            "cost USD",
            "premium\nrequests",
            "estimated\nrequests",
            "estimated\ntokens",
            "estimated\nUSD",
        ],
    )
    for i, (name, a) in enumerate(agents):
        table.add_row(
            name,
            _n(a["cost_usd"], 4),
            _premium(a["premium_requests"]),
            str(a["estimated_requests"]),
            _n(a["estimated_tokens"]),
            _n(a["estimated_cost_usd"], 4),
            end_section=i == last,
        )
    console.print(table)


def _print_statistics(console: Any, data: dict[str, Any]) -> None:
    table = _table("per request", ["figure", "count", "mean", "p50", "p95", "p99", "max"])
    for figure, s in data["statistics"].items():
        d = 6 if figure == "cost_usd" else 0
        table.add_row(
            figure.replace("_tokens", "").replace("_", " "),
            str(s["count"]),
            _n(s["mean"], d or 1),
            _n(s["p50"], d),
            _n(s["p95"], d),
            _n(s["p99"], d),
            _n(s["max"], d),
        )
    console.print(table)


def _print_models(console: Any, data: dict[str, Any]) -> None:
    """Cost by model, with the unpriced models and their tokens (their cost is unknown)."""
    from rich.text import Text

    table = _table(
        "cost by model", ["model", "requests", "input", "output", "cost USD", "estimated\nrequests"]
    )
    unpriced = []
    for model, m in data["models"].items():
        cost = _n(m["cost_usd"], 4)
        if m["cost_usd"] is None and m["unpriced_requests"]:
            cost = "unpriced"  # tokens, no price (a model without tokens costs nothing known)
        if m["unpriced_requests"]:
            unpriced.append(shown(model))
            if m["cost_usd"] is not None:
                cost += "*"
        table.add_row(
            _cell(model),
            str(m["requests"]),
            _n(m["input_tokens"]),
            _n(m["output_tokens"]),
            cost,
            str(m["estimated_requests"]),
        )
    console.print(table)
    if unpriced:
        console.print(
            Text(
                f"no price known for {', '.join(unpriced)} (* partly): their cost is "
                "missing from the totals; add them to a price file named by "
                "OTEL_TOKENS_PRICES_FILE (USD per million tokens)."
            ),
            overflow="fold",
        )
    _print_estimated(console, data)


def _print_estimated(console: Any, data: dict[str, Any]) -> None:
    """Which models' requests are estimates; the ``include_usage`` advice only when some are
    OpenAI's (the calls that reported no usage are then streams without it)."""
    from rich.text import Text

    estimated = {
        shown(model): m["estimated_requests"]
        for model, m in data["models"].items()
        if m["estimated_requests"]
    }
    if not estimated:
        return
    counts = ", ".join(f"{model} {n}" for model, n in estimated.items())
    openai = any(
        m["estimated_requests"] and m["provider"] in _INCLUDE_USAGE_PROVIDERS
        for m in data["models"].values()
    )
    advice = (
        (
            "; OpenAI streams report it with stream_options.include_usage, which "
            "OTEL_TOKENS_OPENAI_INCLUDE_USAGE=true asks for"
        )
        if openai
        else ""
    )
    console.print(
        Text(
            f"usage missing, recorded as estimates: {counts} requests (successful calls "
            f"whose backend reported no usage{advice})."
        ),
        overflow="fold",
    )


def _print_failures(console: Any, data: dict[str, Any]) -> None:
    """Failed calls by agent, model and error type (none: nothing printed)."""
    from rich.text import Text

    if not data["failures"]:
        return
    table = _table(
        "failed calls (not counted as requests)",
        ["agent", "model", "error type", "calls", "last (UTC)"],
        left=("model", "error type"),
    )
    for f in data["failures"]:
        table.add_row(
            _cell(f["agent"]),
            _cell(f["model"]),
            _cell(f["error_type"]),
            str(f["calls"]),
            f["last"][5:16].replace("T", " "),
        )
    console.print(table)
    if any(f["error_type"] == NOT_RECORDED for f in data["failures"]):
        console.print(
            Text(
                "this ledger does not record error types (a file written before "
                "schema version 3, or rows a release before it wrote to a fleet "
                "database): its rows without any token figure are counted as failed "
                "calls."
            ),
            overflow="fold",
        )


def _print_time_and_top(console: Any, data: dict[str, Any]) -> None:
    from rich.text import Text

    table = _table(
        "cost by time (UTC)",
        ["from", "to", "requests", "failed", "tokens", "cost USD"],
        left=("to",),
    )
    for r in data["cost_by_time"]:
        table.add_row(
            r["start"][:16].replace("T", " "),
            r["end"][11:16],
            str(r["requests"]),
            str(r["failed"]),
            _n(r["total_tokens"]),
            _n(r["cost_usd"], 4),
        )
    console.print(table)
    table = _table(
        f"top {len(data['top_requests'])} requests by cost",
        ["time (UTC)", "agent", "model", "input", "output", "cost USD"],
        left=("agent", "model"),
    )
    for r in data["top_requests"]:
        table.add_row(
            r["time"][5:16].replace("T", " "),
            _cell(r["agent"]),
            _cell(r["model"]),
            _n(r["input_tokens"]),
            _n(r["output_tokens"]),
            _n(r["cost_usd"], 4),
        )
    console.print(table)
    if data["top_requests"]:
        ids = ", ".join(shown(r["request_id"]) for r in data["top_requests"])
        console.print(Text(f"their request ids, in that order: {ids}"), overflow="fold")


@click.command()
@click.option(
    "--db",
    "db",
    metavar="PATH|URL",
    envvar=["OTEL_TOKENS_LEDGER_PATH", "OTEL_TOKENS_LEDGER_URL"],
    help="The ledger's SQLite file, or a fleet ledger's postgresql://user@host:port/db "
    "URL (default: OTEL_TOKENS_LEDGER_PATH, then OTEL_TOKENS_LEDGER_URL).",
)
@click.option(
    "--since",
    metavar="WHEN",
    help="Only requests since WHEN: a duration ago (30m, 24h, 7d, 2w) or an ISO date.",
)
@click.option(
    "--top",
    "top_n",
    type=click.IntRange(1, 1000),
    default=10,
    show_default=True,
    help="How many of the most expensive requests to list.",
)
@click.option(
    "--by",
    "by",
    type=click.Choice(sorted(GROUPS)),
    help="Totals per user, tenant, conversation, agent, model or service (a fleet "
    "ledger's processes) instead.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def report(db: str | None, since: str | None, top_n: int, by: str | None, as_json: bool) -> None:
    """Totals, percentiles, cost by model and time, top requests of a persisted ledger."""
    if not db:
        raise click.UsageError(
            "no ledger: pass --db PATH|URL or set OTEL_TOKENS_LEDGER_PATH or OTEL_TOKENS_LEDGER_URL"
        )
    start = parse_since(since) if since else None
    data = build_report(db, start, top_n, by)
    if as_json:
        click.echo(json.dumps(json_ready(data), indent=2))
    elif by is not None:
        print_groups(data)
    else:
        print_report(data)


def print_groups(data: dict[str, Any]) -> None:
    """``--by``: one row per user, tenant or conversation (``-``: calls that did not say); a
    ``failed`` column when some calls failed."""
    console = _console()
    scope = f" since {data['since']}" if data["since"] else ""
    failed = any(g["failed"] for g in data["groups"].values())
    table = _table(
        f"totals by {data['by']}{scope}",
        [
            data["by"],
            "requests",
            *(["failed"] if failed else []),
            "input",
            "output",
            "cost USD",
            "estimated\ntokens",
        ],
    )
    for name, g in data["groups"].items():
        table.add_row(
            _cell(name),
            str(g["requests"]),
            *([str(g["failed"])] if failed else []),
            _n(g["input_tokens"]),
            _n(g["output_tokens"]),
            _n(g["cost_usd"], 4),
            _n(g["estimated_tokens"]),
        )
    console.print(table)
