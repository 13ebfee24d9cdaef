"""The chargeback dashboard on the fleet ledger: the committed JSON is what grafana/ledger.py
generates and survives Grafana's schema round trip; every panel's SQL, its macros expanded as
Grafana's PostgreSQL datasource does, runs on a real PostgreSQL filled by real processes and
gives what the fake LLM answered (tokens, requests per tenant) and the rows' cost to the cent."""

from __future__ import annotations

import importlib.util
import json
import time
from decimal import Decimal

import pytest

from .test_ledger import ROOT_DIR, _finish, _workers

sdk = pytest.importorskip("grafana_foundation_sdk", reason="pip install 'grafana-foundation-sdk==1769699379!11.6.0'")
from grafana_foundation_sdk.cog import plugins  # noqa: E402
from grafana_foundation_sdk.cog.encoder import JSONEncoder  # noqa: E402
from grafana_foundation_sdk.models import dashboard as dm  # noqa: E402

_spec = importlib.util.spec_from_file_location("grafana_ledger", ROOT_DIR / "grafana" / "ledger.py")
generate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(generate)


def _dashboard() -> dict:
    return json.loads(generate.OUT.read_text())


def test_the_generator_makes_exactly_the_committed_file():
    assert generate.OUT.read_text() == generate.render(), "stale: run python grafana/ledger.py"
    assert generate.main(["--check"]) == 0


def test_the_dashboard_survives_the_schema_round_trip():
    plugins.register_default_plugins()
    data = _dashboard()
    assert json.loads(json.dumps(dm.Dashboard.from_json(data), cls=JSONEncoder)) == data


def expand(sql: str, start: float, end: float) -> str:
    """Grafana's PostgreSQL macros used by the dashboard, for the range [start, end)."""
    return sql.replace("$__unixEpochFrom()", str(int(start))).replace("$__unixEpochTo()", str(int(end)))


def test_every_panel_query_gives_the_truth(tenant_llm, ledger_db, tmp_path):
    import psycopg

    llm = tenant_llm
    start = time.time() - 1
    _finish(_workers(2, llm, ledger_db, tmp_path / "spool", THREADS="3", CALLS="8"))
    end = time.time() + 2
    with psycopg.connect(ledger_db) as conn:
        cost_by_tenant = dict(conn.execute(
            "SELECT tenant_id, SUM(cost_usd) FROM otel_tokens_requests GROUP BY 1").fetchall())
        results = {p["title"]: conn.execute(expand(p["targets"][0]["rawSql"], start, end)).fetchall()
                   for p in _dashboard()["panels"]}  # fmt: skip
        outside = conn.execute(expand(generate.TOTAL_SQL, start - 7200, start - 3600)).fetchone()
    assert results["Spend over the range"][0][1:] == (llm.input_total, 7 * llm.calls, llm.calls)
    total = sum(cost_by_tenant.values())
    assert abs(results["Spend over the range"][0][0] - Decimal(total)) < Decimal("0.000001")
    assert total > 0
    tenants = {row[0]: row[1:] for row in results["Spend and tokens by tenant"]}
    assert set(tenants) == set(llm.by_tenant)
    for tenant, (cost, input_tokens, output_tokens, requests) in tenants.items():
        assert input_tokens == llm.by_tenant[tenant]
        assert requests == llm.calls_by_tenant[tenant] and output_tokens == 7 * requests
        assert abs(cost - Decimal(cost_by_tenant[tenant])) < Decimal("0.000001")
    assert {row[0]: row[4] for row in results["Spend and tokens by agent"]} == {"worker": llm.calls}
    assert {row[0]: row[4] for row in results["Spend and tokens by model"]} == {"gpt-4o-mini": llm.calls}
    assert sum(row[4] for row in results["Spend and tokens by user"]) == llm.calls
    assert outside == (None, None, None, 0), "rows outside the range are left out"
