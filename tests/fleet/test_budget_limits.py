"""Fleet budgets through real processes, the real openai client and a real PostgreSQL: a call
reserves its own ``max_tokens`` (not the 4096 default) and exactly the projected figures; tenant
and user budgets fall back to the process's own windows when the database cannot be reached."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from contextlib import closing

import pytest

from ..process.conftest import clean_env, free_port, wait_for
from .conftest import TenantLLM
from .test_ledger import APPS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROMPT = [{"role": "user", "content": "hello"}]


class HeldLLM(TenantLLM):
    """A TenantLLM whose answers wait until :attr:`release` is set (a reservation is then
    open in the database and can be read)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        super().__init__()

    def _answer(self, path: str, body: dict):
        self.release.wait(60)
        return super()._answer(path, body)

    def close(self) -> None:
        self.release.set()  # no answer left waiting
        super().close()


@pytest.fixture
def held_llm():
    with closing(HeldLLM()) as server:
        yield server


def _start(llm: TenantLLM, url: str, tmp_path, **env: str) -> subprocess.Popen:
    environ = clean_env(FAKE_LLM_URL=llm.url, OTEL_TOKENS_LEDGER_URL=url,
                        OTEL_TOKENS_LEDGER_SPOOL=str(tmp_path / "spool"),
                        OTEL_METRICS_EXPORTER="none", OTEL_TOKENS_BUDGET_ENFORCE="true",
                        OTEL_TOKENS_EXIT_TIMEOUT="5", THREADS="1", **env)  # fmt: skip
    environ["PYTHONPATH"] = os.pathsep.join((str(APPS), ROOT))  # this checkout's package
    environ["OTEL_TOKENS_PROVIDER_URLS"] = f"{llm.url}=openai"  # priced as OpenAI
    return subprocess.Popen([sys.executable, str(APPS / "budget_app.py")], env=environ,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def _run(llm: TenantLLM, url: str, tmp_path, **env: str) -> str:
    worker = _start(llm, url, tmp_path, **env)
    out, err = worker.communicate(timeout=180)
    assert worker.returncode == 0, err
    return out + err


def _price(input_tokens: int, output_tokens: int) -> float:
    from otel_tokens.account.pricing import Pricer
    from otel_tokens.usage import Usage

    usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens, model="gpt-4o-mini")
    return Pricer().price(usage, "openai", "gpt-4o-mini").cost_usd


def _input_estimate(max_tokens: int | None) -> int:
    """What the worker's estimator says of its request (the same estimator, a fresh one)."""
    from otel_tokens.account.estimate import Estimator, warm_up
    from otel_tokens.request import Request

    warm_up()  # the exact tokenizer, as the worker loads it before its calls

    request = Request("openai_chat", "gpt-4o-mini", PROMPT, max_output_tokens=max_tokens)
    return Estimator().estimate(request, provider="openai").estimate.input_tokens


def _refusal(out: str) -> tuple[str, float, float]:
    found = re.search(r"refusal budget=(\S+) observed=(\S+) limit=(\S+)", out)
    assert found, out
    return found[1], float(found[2]), float(found[3])


def test_a_call_reserves_its_own_max_tokens(held_llm, ledger_db, tmp_path):
    """While the call runs, the tenant's and the user's reservation in the database are the
    input estimate plus the request's max_tokens, at gpt-4o-mini's price; settled after."""
    import psycopg

    worker = _start(held_llm, ledger_db, tmp_path, CALLS="1", MAX_TOKENS="50",
                    OTEL_TOKENS_TENANT_BUDGETS="*:usd=1", OTEL_TOKENS_USER_BUDGETS="*:usd=1")

    def reserved() -> list[tuple]:
        try:
            with psycopg.connect(ledger_db) as conn:
                return conn.execute("SELECT scope, key, usd, tokens, settled FROM "
                                    "otel_tokens_budget_reservations ORDER BY scope").fetchall()
        except psycopg.Error:
            return []  # the worker has not created the table yet

    try:
        assert wait_for(lambda: len(reserved()) == 2, timeout=60)
        rows = reserved()
    finally:
        held_llm.release.set()
        out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0 and "calls=1 refused=0" in out, err
    estimate = _input_estimate(50)
    assert 0 < estimate < 50
    projected = _price(estimate, 50)
    assert [r[:2] for r in rows] == [("tenant", "acme"), ("user", "ann")]
    for _, _, usd, tokens, settled in rows:
        assert (tokens, settled) == (estimate + 50, False)
        assert usd == pytest.approx(projected, rel=1e-12)
    with psycopg.connect(ledger_db) as conn:  # settled to what the server answered
        final = conn.execute("SELECT DISTINCT usd, tokens, settled FROM "
                             "otel_tokens_budget_reservations").fetchall()
    assert final == [(pytest.approx(_price(100, 7), rel=1e-12), 107, True)]


def test_a_small_max_tokens_fits_where_the_default_does_not(tenant_llm, ledger_db, tmp_path):
    """Under a $0.002 tenant budget a call reserving the default 4096 output tokens (~$0.0025)
    is refused before it starts; the same call with max_tokens=10 is made; max_tokens=5000, or
    a max_tokens that is not a token count (the default then), is refused."""
    budget = {"OTEL_TOKENS_TENANT_BUDGETS": "*:usd=0.002"}
    out = _run(tenant_llm, ledger_db, tmp_path, CALLS="3", MAX_TOKENS="10", **budget)
    assert "calls=3 refused=0 errors=[]" in out, out
    assert tenant_llm.calls == 3
    spent = sum(_price(100 + i, 7) for i in range(3))
    for limit, output in ((None, 4096), ("5000", 5000), ("ten", 4096)):
        env = {"MAX_TOKENS": limit} if limit is not None else {}
        out = _run(tenant_llm, ledger_db, tmp_path, CALLS="3", **env, **budget)
        assert "calls=0 refused=1 errors=[]" in out, out
        name, observed, threshold = _refusal(out)
        assert (name, threshold) == ("tenant:acme", 0.002)
        assert observed == pytest.approx(spent + _price(_input_estimate(None), output), rel=1e-9)
    assert tenant_llm.calls == 3, "a refused call never reached the server"


@pytest.mark.parametrize("scope", ["tenant", "user"])
def test_unreachable_database_falls_back_to_own_tenant_and_user_budgets(scope, tenant_llm,
                                                                        tmp_path):  # fmt: skip
    """No database: the process's own window of the tenant's (user's) budget refuses the first
    call whose projected maximum does not fit beside what this process spent; one log line."""
    down = f"postgresql://postgres@127.0.0.1:{free_port()}/nothing"
    limit = 0.0025
    setting = {"tenant": "OTEL_TOKENS_TENANT_BUDGETS", "user": "OTEL_TOKENS_USER_BUDGETS"}[scope]
    out = _run(tenant_llm, down, tmp_path, CALLS="1000", MAX_TOKENS="100",
               **{setting: f"*:usd={limit}"})  # fmt: skip
    assert "refused=1 errors=[]" in out, out
    assert out.count("otel_tokens: budget_fleet fault (") == 1, out
    calls = int(re.search(r"calls=(\d+)", out)[1])
    assert calls == tenant_llm.calls
    spent = sum(_price(100 + i, 7) for i in range(calls))
    name, observed, threshold = _refusal(out)
    assert (name, threshold) == (f"{scope}:{'acme' if scope == 'tenant' else 'ann'}", limit)
    # what the refused call asked: its input estimate (calibrated by then on the calls made)
    # and its 100 output tokens; the calls before it fitted
    projected = observed - spent
    assert _price(0, 100) < projected < _price(100, 100)
    assert spent + projected > limit >= spent - _price(100 + calls - 1, 7) + _price(0, 100)
    assert calls > 50


def test_tenant_budget_counts_own_spend_from_before_the_database_went_down(own_ledger_db):
    """What this process spent while the database was up is what its own window starts from
    when the database stops: reservations then held and settled in the process."""
    from otel_tokens.account.anomalies import Budget, BudgetExceeded
    from otel_tokens.account.fleet_budget import FleetBudgets

    cluster, url = own_ledger_db
    budget = Budget(usd=1.0, window_seconds=60, enforce=True)
    fleet = FleetBudgets(url, {}, None, {"acme": budget}, {"*": budget})
    first = fleet.reserve("bot", "acme", "ann", 0.5, 10)
    assert first is not None and first.held is None  # in the database
    fleet.settle(first, 0.4, 5)
    cluster.stop()
    try:
        held = fleet.reserve("bot", "acme", "ann", 0.5, 10)  # 0.4 + 0.5 fits
        assert held is not None and len(held.held) == 2
        with pytest.raises(BudgetExceeded) as refused:
            fleet.reserve("bot", "acme", "ann", 0.2, 10)  # 0.4 + 0.5 held + 0.2 does not
        assert refused.value.anomaly.agent == "tenant:acme"
        assert refused.value.anomaly.observed == pytest.approx(1.1)
        fleet.settle(held, 0.1, 3)  # 0.4 + 0.1 spent
        assert fleet.reserve("bot", "acme", "ann", 0.45, 10) is not None
        with pytest.raises(BudgetExceeded):
            fleet.reserve("bot", "other", "ann", 0.1, 10)  # ann's own budget: 0.95 + 0.1
        assert fleet.reserve("bot", "other", "bob", 0.9, 10) is not None
        assert fleet.faults == 1  # logged and counted once; no new attempt for a while
    finally:
        cluster.start()
    time.sleep(0.1)


def test_own_windows_roll_and_forget_idle_budgets(monkeypatch):
    """The process's own windows: held room is settled to the actual, spend older than the
    window no longer counts, and past the bound budgets with nothing left are forgotten."""
    from otel_tokens.account import fleet_budget
    from otel_tokens.account.anomalies import Budget
    from otel_tokens.account.fleet_budget import Scope

    monkeypatch.setattr(fleet_budget, "MAX_LOCAL_WINDOWS", 2)
    own = fleet_budget.LocalWindows()
    short = Budget(tokens=100, window_seconds=0.3, enforce=True)
    ann = [Scope("user", "ann", short)]
    verdict, held = own.hold(ann, 0.0, 80)
    assert verdict.refused is None and [entry.tokens for entry in held] == [80]
    verdict, refused = own.hold(ann, 0.0, 30)  # 80 + 30 > 100
    assert verdict.refused.observed == 110 and refused == []
    own.settle(held, 0.0, 50)
    assert own.hold(ann, 0.0, 30)[0].refused is None  # 50 + 30
    time.sleep(0.35)
    assert own.hold(ann, 0.0, 100)[0].refused is None  # rolled
    own.add([Scope("user", "bob", short)], 0.0, 1)
    time.sleep(0.35)
    own.add([Scope("user", "cy", short)], 0.0, 1)  # the third: ann's and bob's expired, forgotten
    assert list(own._windows) == [("user", "cy")]


def test_a_budget_past_its_limit_is_named_as_the_guard_names_it():
    """One check for the database's reservation and this process's windows: an agent's budget
    is named by the agent (no scope), a tenant's ``tenant:acme``; USD before tokens."""
    from otel_tokens.account.anomalies import Budget
    from otel_tokens.account.fleet_budget import Scope

    both = Budget(usd=1.0, tokens=100, window_seconds=60, enforce=True)
    assert Scope("agent", "bot", both).over_limit(1.0, 100) is None
    agent = Scope("agent", "bot", both).over_limit(2.0, 200)
    assert (agent.agent, agent.scope, agent.observed, agent.threshold) == ("bot", None, 2.0, 1.0)
    tenant = Scope("tenant", "acme", both).over_limit(0.5, 101)
    assert (tenant.agent, tenant.scope, tenant.observed, tenant.threshold) == (
        "tenant:acme", "tenant", 101.0, 100.0)  # fmt: skip
