"""A tenant's or a user's budget is never silent: without ``OTEL_TOKENS_BUDGET_ENFORCE`` (or,
for an enforced one, without a fleet database to enforce it) it raises its anomaly when the
spend crosses it (the process's own without a ledger URL, the fleet's with one), named
``tenant:acme``/``user:ann``, on the span event, on the ``otel_tokens.anomalies`` count (with
``tenant.id``/``user.id``) and to callbacks; once per crossing. Calls are never refused by it."""

from __future__ import annotations

import pytest

import otel_tokens
from otel_tokens import AnomalyGuard, Usage
from otel_tokens.settings import read

from ..telemetry.conftest import make_telemetry

UNPRICED = "no-such-model"  # tokens only


def _telemetry(**env: str):
    return make_telemetry(guard=AnomalyGuard.from_settings(read(env)))


def _calls(t, n: int, tenant: str, user: str, tokens: int = 100) -> None:
    with otel_tokens.agent("bot", tenant=tenant, user=user):
        for _ in range(n):
            call = t.handler.start(operation="chat", provider="openai", request_model=UNPRICED)
            call.stop(Usage(input_tokens=tokens, output_tokens=0))


def _events(t) -> list[tuple]:
    names = ("budget", "kind", "observed", "threshold")
    return [tuple(e.attributes.get(f"otel_tokens.anomaly.{name}") for name in names)
            for s in t.finished() for e in s.events if e.name == "otel_tokens.anomaly"]  # fmt: skip


def _counts(t) -> dict[tuple, int]:
    return {(p.attributes.get("tenant.id"), p.attributes.get("user.id"),
             p.attributes["otel_tokens.anomaly.kind"]): p.value
            for p in t.points("otel_tokens.anomalies")}  # fmt: skip


def _scopes(t) -> list[tuple]:
    """Each anomaly count's budget scope and the name there (agent: the calling agent)."""
    return sorted((p.attributes.get("otel_tokens.anomaly.scope"), p.attributes.get("tenant.id"),
                   p.attributes.get("user.id"), p.attributes["gen_ai.agent.name"])
                  for p in t.points("otel_tokens.anomalies"))  # fmt: skip


def test_a_tenant_and_a_user_budget_alert_without_enforcement():
    """The README's ``OTEL_TOKENS_TENANT_BUDGETS`` without enforcement and without a ledger
    URL: over the process's own spend."""
    env = {"OTEL_TOKENS_TENANT_BUDGETS": "acme:tokens=250;*:tokens=10000",
           "OTEL_TOKENS_USER_BUDGETS": "*:tokens=450"}  # fmt: skip
    t = _telemetry(**env)
    seen: list = []
    t.handler.guard.add_callback(seen.append)
    _calls(t, 5, "acme", "ann")  # 500 tokens: acme over at the 3rd call, ann at the 5th
    _calls(t, 2, "beta", "bob")  # under both of theirs
    assert _events(t) == [("tenant:acme", "budget_exceeded", 300.0, 250.0),
                          ("user:ann", "budget_exceeded", 500.0, 450.0)]  # fmt: skip
    assert [(a.agent, a.scope) for a in seen] == [("tenant:acme", "tenant"), ("user:ann", "user")]
    assert _counts(t) == {("acme", None, "budget_exceeded"): 1, (None, "ann", "budget_exceeded"): 1}
    # the series say whose budget it is: the tenant's and the user's, the agent beside them
    assert _scopes(t) == [("tenant", "acme", None, "bot"), ("user", None, "ann", "bot")]
    assert len(t.finished()) == 7  # every call made


def test_an_enforced_tenant_budget_without_a_fleet_database_alerts():
    """Enforced tenant and user budgets are the fleet database's to enforce; without one they
    are not silent: they raise their anomaly (and ``check`` says so)."""
    t = _telemetry(OTEL_TOKENS_TENANT_BUDGETS="acme:tokens=150", OTEL_TOKENS_BUDGET_ENFORCE="true")
    _calls(t, 2, "acme", "ann")
    assert _events(t) == [("tenant:acme", "budget_exceeded", 200.0, 150.0)]


def test_with_a_fleet_database_tenant_budgets_are_left_to_it():
    """With a ledger URL tenants' and users' budgets are reserved in the database (refusing,
    tests/fleet/test_budget.py, or alerting, below): not alerted on a second time here."""
    guard = AnomalyGuard.from_settings(read({
        "OTEL_TOKENS_TENANT_BUDGETS": "acme:tokens=150", "OTEL_TOKENS_BUDGET_ENFORCE": "true",
        "OTEL_TOKENS_LEDGER_URL": "postgresql://nobody@127.0.0.1:1/none"}))  # fmt: skip
    assert not guard.alerting_who
    assert guard.check_after("bot", 1000, None, None, "acme", "ann") == []


def test_idle_tenants_are_forgotten_past_the_bound(monkeypatch):
    """Spend is kept per tenant and user up to a bound; past it those with nothing left in
    their window are dropped (no growth with the number of names)."""
    from otel_tokens.account import anomalies
    from otel_tokens.account.anomalies import Budget

    monkeypatch.setattr(anomalies, "MAX_WHO_WINDOWS", 3)
    guard = AnomalyGuard(tenants={"*": Budget(tokens=10, window_seconds=0.01)})
    import time

    for name in ("a", "b", "c"):
        guard.check_after("bot", 1, None, None, name)
    time.sleep(0.02)
    guard.check_after("bot", 1, None, None, "d")
    assert list(guard._who_windows) == [("tenant", "d")]


def test_an_alert_only_tenant_budget_counts_the_fleets_spend(ledger_db):
    """With a ledger URL an alert-only tenant budget is reserved in the database like an
    enforced one: the second process's call that takes the fleet over it is made (nothing
    refused), and raises the anomaly once; while the database is down, the process's own
    windows alert."""
    from otel_tokens.account.anomalies import Budget
    from otel_tokens.account.fleet_budget import FleetBudgets

    alerting = {"acme": Budget(usd=1.0, window_seconds=600)}
    one, two = (FleetBudgets(ledger_db, {}, None, alerting, {}) for _ in range(2))
    first = one.reserve("bot", "acme", None, 0.6, 10)
    assert first.held is None and first.alerts == []
    one.settle(first, 0.6, 10)
    assert one.flush()
    second = two.reserve("bot", "acme", None, 0.6, 10)  # 0.6 spent by the other + 0.6
    assert second.held is None
    assert [(a.agent, a.scope, a.observed, a.threshold) for a in second.alerts] == [
        ("tenant:acme", "tenant", pytest.approx(1.2), 1.0)]
    assert two.reserve("bot", "acme", None, 0.1, 1).alerts == []  # still over: said once
    assert two.reserve("bot", "beta", None, 5.0, 1) is None  # no budget for beta
    assert one.faults == two.faults == 0


def test_alert_only_fleet_budgets_reach_the_anomaly_metric(ledger_db, monkeypatch, tmp_path):
    """Through the account step and the recorder, with a ledger URL: the call that takes the
    fleet's spend of tenant acme over its alert-only budget carries the anomaly (span event,
    count with tenant.id, callbacks)."""
    from otel_tokens import settings

    for name, value in {"OTEL_TOKENS_LEDGER_URL": ledger_db,
                        "OTEL_TOKENS_LEDGER_SPOOL": str(tmp_path),
                        "OTEL_TOKENS_TENANT_BUDGETS": "acme:tokens=250",
                        "OTEL_TOKENS_BUDGET_RESERVE_OUTPUT_TOKENS": "100"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    try:
        t = make_telemetry(guard=AnomalyGuard.from_settings(settings.reload()))
        seen: list = []
        t.handler.guard.add_callback(seen.append)
        _calls(t, 4, "acme", "ann")  # reserved 100 each: 300 > 250 at the 3rd
    finally:
        monkeypatch.undo()
        settings.reload()
    assert _events(t) == [("tenant:acme", "budget_exceeded", 300.0, 250.0)]
    assert [(a.agent, a.scope) for a in seen] == [("tenant:acme", "tenant")]
    assert _counts(t) == {("acme", None, "budget_exceeded"): 1}
    import psycopg

    with psycopg.connect(ledger_db) as conn:  # the fleet's reservations, not the process's
        assert conn.execute("SELECT count(*) FROM otel_tokens_budget_reservations "
                            "WHERE scope='tenant' AND key='acme'").fetchone()[0] == 4
