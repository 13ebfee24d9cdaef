"""A tenant's or a user's budget is never silent: without ``OTEL_TOKENS_BUDGET_ENFORCE`` (or,
for an enforced one, without a fleet database to enforce it) it raises its anomaly when the
process's spend crosses it, named ``tenant:acme``/``user:ann``, on the span event, on the
``otel_tokens.anomalies`` count (with ``tenant.id``/``user.id``) and to callbacks; once per
crossing. Calls are never refused by it."""

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


@pytest.mark.parametrize("ledger", [None, "postgresql://nobody@127.0.0.1:1/none"])
def test_a_tenant_and_a_user_budget_alert_without_enforcement(ledger):
    """The README's ``OTEL_TOKENS_TENANT_BUDGETS`` without enforcement, with and without a
    ledger URL (alert-only budgets are counted over the process's own spend either way)."""
    env = {"OTEL_TOKENS_TENANT_BUDGETS": "acme:tokens=250;*:tokens=10000",
           "OTEL_TOKENS_USER_BUDGETS": "*:tokens=450"}  # fmt: skip
    if ledger:
        env["OTEL_TOKENS_LEDGER_URL"] = ledger
    t = _telemetry(**env)
    seen: list = []
    t.handler.guard.add_callback(seen.append)
    _calls(t, 5, "acme", "ann")  # 500 tokens: acme over at the 3rd call, ann at the 5th
    _calls(t, 2, "beta", "bob")  # under both of theirs
    assert _events(t) == [("tenant:acme", "budget_exceeded", 300.0, 250.0),
                          ("user:ann", "budget_exceeded", 500.0, 450.0)]  # fmt: skip
    assert [(a.agent, a.scope) for a in seen] == [("tenant:acme", "tenant"), ("user:ann", "user")]
    assert _counts(t) == {("acme", None, "budget_exceeded"): 1, (None, "ann", "budget_exceeded"): 1}
    assert len(t.finished()) == 7  # every call made


def test_an_enforced_tenant_budget_without_a_fleet_database_alerts():
    """Enforced tenant and user budgets are the fleet database's to enforce; without one they
    are not silent: they raise their anomaly (and ``check`` says so)."""
    t = _telemetry(OTEL_TOKENS_TENANT_BUDGETS="acme:tokens=150", OTEL_TOKENS_BUDGET_ENFORCE="true")
    _calls(t, 2, "acme", "ann")
    assert _events(t) == [("tenant:acme", "budget_exceeded", 200.0, 150.0)]


def test_an_enforced_tenant_budget_with_a_fleet_database_is_left_to_it():
    """With a ledger URL an enforced tenant budget is reserved in the database (refusing,
    tests/fleet/test_budget.py): not alerted on a second time here."""
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
