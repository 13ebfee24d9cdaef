"""``otel-tokens check`` lists the budgets in force (whose, limits, window, enforced or
alerting, the variable setting each) and the fleet ledger (no password shown) with whether it answers; a fleet database
that cannot be reached is a problem (exit 1)."""

from __future__ import annotations

import os
import socket

from ..fleet.conftest import new_database, pg_cluster, pg_server  # noqa: F401 - fixtures
from .conftest import clean_env, otel_tokens

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SECRET = "s3cr%40t-pw"  # "s3cr@t-pw" in the URL's own encoding


def _check(**env: str):
    return otel_tokens("check", env=clean_env(PYTHONPATH=ROOT, **env))  # this checkout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _budget_lines(out: str) -> list[str]:
    block = out.split("budgets:", 1)[1].split("\n", 1)[1]
    return [" ".join(line.split()) for line in block.splitlines() if line.startswith("  ")]


def test_check_lists_every_budget_enforced_or_alerting():
    out = _check(OTEL_TOKENS_BUDGET_USD="5", OTEL_TOKENS_BUDGET_WINDOW="600",
                 OTEL_TOKENS_AGENT_BUDGETS="planner:tokens=2000",
                 OTEL_TOKENS_TENANT_BUDGETS="acme:usd=500;*:usd=20",
                 OTEL_TOKENS_USER_BUDGETS="*:tokens=1000,window=60")  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    lines = _budget_lines(out.stdout)
    alerting = "alerting over this process's spend"
    assert lines[:5] == [f"agent * usd 5 per 600 s: {alerting} (OTEL_TOKENS_BUDGET_USD)",
                         f"agent planner tokens 2000 per 600 s: {alerting} "
                         "(OTEL_TOKENS_AGENT_BUDGETS)",
                         f"tenant acme usd 500 per 600 s: {alerting} (OTEL_TOKENS_TENANT_BUDGETS)",
                         f"tenant * usd 20 per 600 s: {alerting} (OTEL_TOKENS_TENANT_BUDGETS)",
                         f"user * tokens 1000 per 60 s: {alerting} (OTEL_TOKENS_USER_BUDGETS)"]  # fmt: skip
    assert "(alerting: an anomaly when crossed; OTEL_TOKENS_BUDGET_ENFORCE=true refuses calls)" \
        in out.stdout
    assert "OTEL_TOKENS_LEDGER_URL for the fleet" in out.stdout  # no fleet database


def test_check_says_an_enforced_tenant_budget_needs_a_fleet_database():
    out = _check(OTEL_TOKENS_TENANT_BUDGETS="acme:usd=500", OTEL_TOKENS_BUDGET_ENFORCE="true",
                 OTEL_TOKENS_AGENT_BUDGETS="planner:usd=1")  # fmt: skip
    lines = _budget_lines(out.stdout)
    assert lines[:2] == ["agent planner usd 1 per 3600 s: enforced over this process's spend "
                         "(OTEL_TOKENS_AGENT_BUDGETS)",
                         "tenant acme usd 500 per 3600 s: alerting over this process's spend "
                         "(enforced only with OTEL_TOKENS_LEDGER_URL) (OTEL_TOKENS_TENANT_BUDGETS)"]  # fmt: skip
    assert "warning: tenant and user budgets are enforced only with a fleet ledger" in out.stdout


def test_check_shows_a_reachable_fleet_ledger_without_its_password(pg_server):  # noqa: F811
    url = new_database(pg_server)  # trust authentication: the password is not checked
    given = url.replace("postgres@", f"postgres:{SECRET}@") + "?application_name=x"
    out = _check(OTEL_TOKENS_LEDGER_URL=given, OTEL_TOKENS_TENANT_BUDGETS="acme:usd=500",
                 OTEL_TOKENS_BUDGET_ENFORCE="true", OTEL_TOKENS_USER_BUDGETS="*:usd=5")
    assert out.returncode == 0, out.stdout + out.stderr
    shown = url.replace("postgres@", "postgres:***@") + "?application_name=x"
    assert f"fleet   {shown}: reachable" in out.stdout
    assert _budget_lines(out.stdout)[:2] == [
        "tenant acme usd 500 per 3600 s: enforced over the fleet's spend "
        "(OTEL_TOKENS_TENANT_BUDGETS)",
        "user * usd 5 per 3600 s: enforced over the fleet's spend (OTEL_TOKENS_USER_BUDGETS)"]
    assert "s3cr" not in out.stdout + out.stderr


def test_check_fails_when_the_fleet_ledger_cannot_be_reached():
    port = _free_port()
    out = _check(OTEL_TOKENS_LEDGER_URL=f"postgresql://bob:{SECRET}@127.0.0.1:{port}/fleet")
    assert out.returncode == 1
    shown = f"postgresql://bob:***@127.0.0.1:{port}/fleet"
    assert f"fleet   {shown}: NOT usable: unreachable (" in out.stdout
    assert f"the fleet ledger {shown} cannot be used" in out.stderr
    assert "s3cr" not in out.stdout + out.stderr
