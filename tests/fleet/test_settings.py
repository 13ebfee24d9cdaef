"""The fleet settings (no database needed): the ledger URL, spool, queue and the per-tenant and
per-user budgets read like the agent budgets; an unusable value is one problem, not a crash."""

from __future__ import annotations

from otel_tokens.account.anomalies import Budget
from otel_tokens.account.fleet_budget import FleetBudgets
from otel_tokens.settings import read


def test_fleet_settings_read():
    found = read({"OTEL_TOKENS_LEDGER_URL": "postgresql://u@db:5432/ledger",
                  "OTEL_TOKENS_LEDGER_SPOOL": "/var/spool/x", "OTEL_TOKENS_LEDGER_SPOOL_MAX_MB": "9",
                  "OTEL_TOKENS_LEDGER_QUEUE": "50", "OTEL_TOKENS_BUDGET_ENFORCE": "true",
                  "OTEL_TOKENS_BUDGET_WINDOW": "60",
                  "OTEL_TOKENS_TENANT_BUDGETS": "acme:usd=500;*:usd=20,window=86400",
                  "OTEL_TOKENS_USER_BUDGETS": "*:tokens=1000",
                  "OTEL_TOKENS_BUDGET_RESERVE_OUTPUT_TOKENS": "256"})  # fmt: skip
    assert found.problems == ()
    assert (found.ledger_url, found.ledger_spool_dir) == ("postgresql://u@db:5432/ledger", "/var/spool/x")
    assert (found.ledger_spool_max_mb, found.ledger_queue) == (9, 50)
    assert found.tenant_budgets == {"acme": Budget(usd=500.0, window_seconds=60, enforce=True),
                                    "*": Budget(usd=20.0, window_seconds=86400, enforce=True)}
    assert found.user_budgets == {"*": Budget(tokens=1000, window_seconds=60, enforce=True)}
    assert found.budget_reserve_output_tokens == 256
    fleet = FleetBudgets.from_settings(found)
    assert [(s, k) for s, k, _ in fleet.applying("bot", "acme", "ann")] == [
        ("tenant", "acme"), ("user", "ann")]
    assert fleet.applying("bot", "other", None)[0][2].usd == 20.0
    assert FleetBudgets.from_settings(read({})) is None


def test_unusable_fleet_settings_are_problems():
    found = read({"OTEL_TOKENS_LEDGER_URL": "mysql://x", "OTEL_TOKENS_TENANT_BUDGETS": "acme:usd=-1;b",
                  "OTEL_TOKENS_LEDGER_QUEUE": "0"})  # fmt: skip
    assert found.ledger_url is None and found.tenant_budgets == {} and found.ledger_queue == 10_000
    assert [p.name for p in found.problems] == [
        "OTEL_TOKENS_LEDGER_URL", "OTEL_TOKENS_LEDGER_QUEUE", "OTEL_TOKENS_TENANT_BUDGETS",
        "OTEL_TOKENS_TENANT_BUDGETS"]


def test_the_handler_hands_the_account_step_the_fleet_budgets_of_its_settings():
    """The handler builds the fleet budgets from the settings it is given, as it builds the
    pricer, and the Accountant reserves in those (it reads no settings of its own)."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider

    from otel_tokens.handler import Handler

    found = read({"OTEL_TOKENS_LEDGER_URL": "postgresql://u@127.0.0.1:1/ledger",
                  "OTEL_TOKENS_AGENT_BUDGETS": "bot:usd=2"})  # alert-only: no connection made
    fleet = Handler(TracerProvider(), MeterProvider(), settings=found).accountant.fleet
    assert isinstance(fleet, FleetBudgets) and fleet.url == "postgresql://u@127.0.0.1:1/ledger"
    assert fleet.rules["agent"][0] == {"bot": Budget(usd=2.0, window_seconds=3600.0)}
    assert Handler(TracerProvider(), MeterProvider(), settings=read({})).accountant.fleet is None
