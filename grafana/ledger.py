"""Generate grafana/ledger/otel-tokens-ledger.json: chargeback on the fleet ledger (PostgreSQL).

    python grafana/ledger.py          # write the JSON file
    python grafana/ledger.py --check  # exit 1 if the committed file differs

Built with grafana-foundation-sdk (pinned as for generate.py); its panels query the ledger
table ``otel_tokens_requests`` through Grafana's PostgreSQL datasource (``grafana-postgresql-
datasource``): spend, tokens and requests per tenant, user, agent and model over the range,
exact to the cent (sums of the rows, not rates). tests/fleet runs every query on a real
PostgreSQL filled by real processes and compares it with what the fake LLM answered.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Any

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import stat, table
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as dm

OUT = pathlib.Path(__file__).with_name("ledger") / "otel-tokens-ledger.json"
DATASOURCE = dm.DataSourceRef(type_val="grafana-postgresql-datasource", uid="${datasource}")
#: the rows of the dashboard's time range (Grafana expands the macros to epoch seconds)
RANGE = "active = 1 AND ts >= $__unixEpochFrom() AND ts < $__unixEpochTo()"
#: cost summed as numeric (no float accumulation over millions of rows; shown to the cent)
FIGURES = ("SUM(cost_usd::numeric) AS \"cost USD\", SUM(input_tokens) AS \"input tokens\", "
           "SUM(output_tokens) AS \"output tokens\", COUNT(*) AS requests")
#: ``--by``-like groupings: panel title -> ledger column
GROUPS = {"tenant": "tenant_id", "user": "user_id", "agent": "ledger", "model": "model"}


class SqlQuery:
    """A raw SQL target of the PostgreSQL datasource (the SDK has no builder for it)."""

    def __init__(self, ref: str, sql: str, fmt: str = "table") -> None:
        self.ref, self.sql, self.fmt = ref, sql, fmt

    def build(self) -> SqlQuery:
        return self

    def to_json(self) -> dict[str, Any]:
        return {"refId": self.ref, "datasource": DATASOURCE.to_json(), "rawSql": self.sql,
                "rawQuery": True, "editorMode": "code", "format": self.fmt}  # fmt: skip


def grouped_sql(column: str) -> str:
    """Spend, tokens and requests per value of ``column`` (``-``: calls that did not say)."""
    return (f"SELECT COALESCE({column}, '-') AS \"{column}\", {FIGURES} FROM otel_tokens_requests "
            f"WHERE {RANGE} GROUP BY 1 ORDER BY 2 DESC NULLS LAST")


TOTAL_SQL = f"SELECT {FIGURES} FROM otel_tokens_requests WHERE {RANGE}"


def ledger() -> db.Dashboard:
    board = (db.Dashboard("otel_tokens: chargeback (fleet ledger)").uid("otel-tokens-ledger")
             .tags(["otel_tokens", "genai", "chargeback"]).refresh("5m").time("now-30d", "now")
             .timezone("browser").editable()
             .with_variable(db.DatasourceVariable("datasource")
                            .label("PostgreSQL ledger").type("grafana-postgresql-datasource")))  # fmt: skip
    total = (stat.Panel().title("Spend over the range").description(
        "Sum of the ledger's rows in the time range, every process of the fleet: exact, to the "
        "cent.").datasource(DATASOURCE).unit("currencyUSD").decimals(2).height(4).span(24)
        .with_target(SqlQuery("A", TOTAL_SQL)))  # fmt: skip
    board = board.with_panel(total.id(1))
    for panel_id, (name, column) in enumerate(GROUPS.items(), start=2):
        panel = (table.Panel().title(f"Spend and tokens by {name}").description(
            f"Per {name} over the time range (rows of every process; '-': calls that did not "
            f"say).").datasource(DATASOURCE).height(9).span(12)
            .with_target(SqlQuery("A", grouped_sql(column))))  # fmt: skip
        board = board.with_panel(panel.id(panel_id))
    return board


def render() -> str:
    return json.dumps(ledger().build(), cls=JSONEncoder, indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate the otel_tokens ledger dashboard.")
    parser.add_argument("--check", action="store_true", help="fail if the committed file is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print("stale (run python grafana/ledger.py):", OUT.name, file=sys.stderr)
            return 1
        return 0
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
