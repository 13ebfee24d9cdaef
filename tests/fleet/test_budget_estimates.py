"""Issue 48: a fleet reservation holds the input estimate, not an incomplete estimate's
learnt upper bound, unless ``OTEL_TOKENS_BUDGET_RESERVE=conservative`` asks for the bound
(a real PostgreSQL; the estimate and its bound from the real estimator)."""

from __future__ import annotations

import time

from otel_tokens.account.anomalies import Budget
from otel_tokens.account.estimate import Estimator
from otel_tokens.account.fleet_budget import FleetBudgets, reserve
from otel_tokens.account.pricing import Pricer
from otel_tokens.call import Call
from otel_tokens.request import Request
from otel_tokens.settings import read
from otel_tokens.tracking import Tracking

SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
REQUEST = Request("anthropic_messages", "claude-sonnet-4-5",
                  [{"role": "user", "content": "Which release fixed the cache bug?"}],
                  tools=[SEARCH], max_output_tokens=100)  # fmt: skip


def _bounded_call() -> tuple[Call, Tracking]:
    """A call whose estimate is incomplete (web search) with a learnt bound: one earlier
    search returned 20,000 tokens."""
    estimator = Estimator()
    earlier = estimator.estimate(REQUEST, provider="anthropic")
    estimator.observe(earlier, earlier.estimate.input_tokens + 20_000)
    made = estimator.estimate(REQUEST, provider="anthropic")
    assert not made.complete and made.input_max > 10 * made.estimate.input_tokens
    tracking = Tracking(estimate=made.estimate)
    call = Call(tracking, "chat", "anthropic", REQUEST.model, False, time.monotonic(),
                request=REQUEST)  # fmt: skip
    tracking.request_estimate = made
    tracking.tenant = "acme"
    return call, tracking


def _fleet(url: str, conservative: bool) -> FleetBudgets:
    budget = Budget(tokens=1_000_000, window_seconds=3600, enforce=True)
    return FleetBudgets(url, {}, None, {"acme": budget}, {}, conservative=conservative)


def test_a_reservation_holds_the_estimate_not_the_bound(ledger_db):
    call, tracking = _bounded_call()
    held = reserve(_fleet(ledger_db, False), Pricer(), call, tracking, "bot")
    assert held.tokens == tracking.estimate.input_tokens + 100


def test_the_conservative_setting_reserves_the_bound(ledger_db):
    call, tracking = _bounded_call()
    held = reserve(_fleet(ledger_db, True), Pricer(), call, tracking, "bot")
    assert held.tokens == tracking.request_estimate.input_max + 100


def test_the_reserve_setting_reads_one_of_two_words():
    assert read({}).budget_reserve == "estimate"
    found = read({"OTEL_TOKENS_LEDGER_URL": "postgresql://u@db/x",
                  "OTEL_TOKENS_BUDGET_RESERVE": "Conservative"})  # fmt: skip
    assert found.budget_reserve == "conservative" and FleetBudgets.from_settings(found).conservative
    bad = read({"OTEL_TOKENS_BUDGET_RESERVE": "max"})
    assert bad.budget_reserve == "estimate"
    assert [p.name for p in bad.problems] == ["OTEL_TOKENS_BUDGET_RESERVE"]
