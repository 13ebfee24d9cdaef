"""Abnormal usage, in process: per-agent budgets and spike detection.

Fleet-wide alerting is the Prometheus rules' job; this is the immediate guard inside one
process. A hit becomes an ``otel_tokens.anomaly`` span event, a count on
``otel_tokens.anomalies{kind}`` and a call to every registered callback. Only when the user
opts in (``enforce``) does a budget raise :class:`BudgetExceeded`, before the agent's next call
starts, so that a runaway agent can be stopped.

Settings (read by :mod:`otel_tokens.settings`; defaults for every agent; code settings win):
``OTEL_TOKENS_BUDGET_TOKENS``, ``OTEL_TOKENS_BUDGET_USD``, ``OTEL_TOKENS_BUDGET_WINDOW``
(seconds, default 3600), ``OTEL_TOKENS_BUDGET_ENFORCE`` (``true``/``false``),
``OTEL_TOKENS_AGENT_BUDGETS`` (per agent: ``planner:usd=5,tokens=200000;coder:usd=1``),
``OTEL_TOKENS_TENANT_BUDGETS``/``OTEL_TOKENS_USER_BUDGETS`` (without a fleet database: alerting
here over the process's own spend, named ``tenant:acme``/``user:ann``; with one,
:mod:`.fleet_budget` reserves them there, enforced or alerting),
``OTEL_TOKENS_SPIKE_FACTOR`` (k, default 3), ``OTEL_TOKENS_SPIKE_WARMUP`` (N, default 20),
``OTEL_TOKENS_SPIKE_WINDOW`` (requests in the rolling window, default 200).
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping

from ..errors import OtelTokensError

__all__ = ["Anomaly", "AnomalyGuard", "Budget", "BudgetExceeded", "SpikeRule"]

AnomalyKind = Literal["budget_exceeded", "token_spike", "cost_spike"]


@dataclass(frozen=True, slots=True)
class Budget:
    """Tokens and/or USD an agent may use per rolling window of ``window_seconds``."""

    tokens: int | None = None
    usd: float | None = None
    window_seconds: float = 3600.0
    enforce: bool = False

    def __post_init__(self) -> None:
        if self.tokens is not None and (
            isinstance(self.tokens, bool) or not isinstance(self.tokens, int) or self.tokens <= 0
        ):
            raise ValueError(f"budget tokens must be a positive integer, got {self.tokens!r}")
        if self.usd is not None and (
            isinstance(self.usd, bool)
            or not isinstance(self.usd, (int, float))
            or not math.isfinite(self.usd)
            or self.usd <= 0
        ):
            raise ValueError(f"budget usd must be a positive number, got {self.usd!r}")
        if not (isinstance(self.window_seconds, (int, float)) and self.window_seconds > 0):
            raise ValueError(f"budget window_seconds must be positive, got {self.window_seconds!r}")


@dataclass(frozen=True, slots=True)
class SpikeRule:
    """A request is a spike when it exceeds ``factor`` x the rolling p95 of the agent's last
    ``window`` requests, once ``warmup`` requests have been seen."""

    factor: float = 3.0
    warmup: int = 20
    window: int = 200

    def __post_init__(self) -> None:
        if not (isinstance(self.factor, (int, float)) and self.factor > 1):
            raise ValueError(f"spike factor must be a number above 1, got {self.factor!r}")
        if not (isinstance(self.warmup, int) and self.warmup >= 1):
            raise ValueError(f"spike warmup must be a positive integer, got {self.warmup!r}")
        if not (isinstance(self.window, int) and self.window >= self.warmup):
            raise ValueError(f"spike window must be an integer >= warmup, got {self.window!r}")


@dataclass(frozen=True, slots=True)
class Anomaly:
    """One detected anomaly, as passed to callbacks and put on the span event."""

    agent: str
    kind: AnomalyKind
    observed: float
    threshold: float
    model: str | None = None
    #: a tenant's or a user's budget: ``"tenant"`` or ``"user"`` (``agent`` then names it,
    #: ``tenant:acme``); None: an agent's budget, or a spike
    scope: str | None = None


class BudgetExceeded(OtelTokensError):
    """Raised (only when enforcement is opted in) before a call of an agent, tenant or user
    over budget; the message names whose budget it is."""

    def __init__(self, anomaly: Anomaly) -> None:
        self.anomaly = anomaly
        super().__init__(
            f"{_whose(anomaly)} is over its budget: {anomaly.observed:g} used or "
            f"about to be used against a limit of {anomaly.threshold:g}"
        )


def _whose(anomaly: Anomaly) -> str:
    """Whose budget it is, for people: ``agent 'bot'``, ``tenant 'acme'``, ``user 'ann'``."""
    if anomaly.scope is None:
        return f"agent {anomaly.agent!r}"
    return f"{anomaly.scope} {anomaly.agent.partition(':')[2]!r}"


class _Rolling:
    """Sorted last-N values for a cheap rolling percentile."""

    __slots__ = ("order", "sorted", "size")

    def __init__(self, size: int) -> None:
        self.order: deque[float] = deque()
        self.sorted: list[float] = []
        self.size = size

    def p95(self) -> float | None:
        from .ledger.stats import percentile  # not at start-up: it loads the ledger package

        return percentile(self.sorted, 95)

    def above(self, value: float, factor: float) -> bool:
        """Whether ``value`` may exceed ``factor`` x p95: False is sure (p95 is at least the
        value at rank floor(0.95 (n-1))), so the interpolated p95 is computed only for
        candidates."""
        values = self.sorted
        return bool(values) and value > factor * values[(len(values) - 1) * 95 // 100]

    def add(self, value: float) -> None:
        self.order.append(value)
        bisect.insort(self.sorted, value)
        if len(self.order) > self.size:
            old = self.order.popleft()
            del self.sorted[bisect.bisect_left(self.sorted, old)]


#: tenants and users whose spend is kept for their budgets (past it, those with nothing left in
#: their window are forgotten)
MAX_WHO_WINDOWS = 4096

#: agents whose spike statistics are kept (the most recently active; an agent back after
#: that warms up again): state per agent name must not grow for the life of the process
MAX_SPIKE_AGENTS = 1024


@dataclass
class _AgentWindow:
    spends: deque[tuple[float, int, float]] = field(default_factory=deque)
    tokens: int = 0
    usd: float = 0.0
    over: set[str] = field(default_factory=set)

    def expire(self, now: float, window: float) -> None:
        spends = self.spends
        while spends and spends[0][0] <= now - window:
            _, t, c = spends.popleft()
            self.tokens -= t
            self.usd -= c
        if not spends:
            self.usd = 0.0  # drop float residue


class AnomalyGuard:
    """Budgets and spike detection for every agent of the process; thread-safe."""

    def __init__(
        self,
        spike: SpikeRule | None = None,
        default_budget: Budget | None = None,
        budgets: dict[str, Budget] | None = None,
        tenants: Mapping[str, Budget] | None = None,
        users: Mapping[str, Budget] | None = None,
        fleet: bool = False,
    ) -> None:
        self.spike = spike or SpikeRule()
        self._default = default_budget
        self._budgets: dict[str, Budget | None] = dict(budgets or {})
        self._enforcing()
        self._windows: dict[str, _AgentWindow] = {}  # budgets: agents with spend in the window
        #: tenants' and users' budgets alerted on here ("*": every other one), over the
        #: process's own spend: none where a fleet database (``fleet``) holds them all
        self._who = {
            scope: {} if fleet else dict(given or {})
            for scope, given in (("tenant", tenants), ("user", users))
        }
        self.alerting_who = any(self._who.values())
        self._who_windows: dict[tuple[str, str], _AgentWindow] = {}
        # spikes: (tokens, cost) rolling values of the most recently active agents only
        self._spikes: OrderedDict[str, tuple[_Rolling, _Rolling]] = OrderedDict()
        self._callbacks: list[Callable[[Anomaly], None]] = []
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Any) -> AnomalyGuard:
        """Budgets and the spike rule as :mod:`otel_tokens.settings` read them
        (``OTEL_TOKENS_BUDGET_*``, ``OTEL_TOKENS_AGENT_BUDGETS``, ``OTEL_TOKENS_SPIKE_*``)."""
        return cls(
            spike=settings.spike,
            default_budget=settings.default_budget,
            budgets=dict(settings.agent_budgets),
            tenants=settings.tenant_budgets,
            users=settings.user_budgets,
            fleet=settings.ledger_url is not None,
        )

    # -- configuration --------------------------------------------------------------------
    @property
    def default_budget(self) -> Budget | None:
        """The budget of every agent without one of its own."""
        return self._default

    @default_budget.setter
    def default_budget(self, budget: Budget | None) -> None:
        with self._lock:
            self._default = budget
            self._enforcing()

    def set_budget(self, agent: str, budget: Budget | None) -> None:
        """Set (or with None, remove) the budget of one agent."""
        if budget is not None and not isinstance(budget, Budget):
            raise TypeError(f"budget must be a Budget or None, got {type(budget).__name__}")
        with self._lock:
            self._budgets[agent] = budget
            self._enforcing()

    def _enforcing(self) -> None:
        #: whether any budget is enforced (else :meth:`check_before` has nothing to check: the
        #: account step skips it, a call per call saved when none is, the common case)
        self.enforcing = any(
            budget is not None and budget.enforce
            for budget in (self._default, *self._budgets.values())
        )

    def budget_of(self, agent: str) -> Budget | None:
        """The budget in force for ``agent`` (its own, else the default)."""
        return self._budgets[agent] if agent in self._budgets else self._default

    def add_callback(self, callback: Callable[[Anomaly], None]) -> None:
        """Call ``callback(anomaly)`` on every anomaly (its exceptions are caught and counted)."""
        if not callable(callback):
            raise TypeError("callback must be callable")
        self._callbacks.append(callback)

    def remove_callback(self, callback: Callable[[Anomaly], None]) -> None:
        """Stop calling ``callback``."""
        self._callbacks.remove(callback)

    @property
    def callbacks(self) -> list[Callable[[Anomaly], None]]:
        """The registered callbacks."""
        return list(self._callbacks)

    # -- checks ---------------------------------------------------------------------------
    def check_before(self, agent: str, estimated_tokens: int | None) -> None:
        """Raise :class:`BudgetExceeded` if an enforced budget is spent, or would be by a call
        of ``estimated_tokens`` input tokens."""
        budget = self._budgets[agent] if agent in self._budgets else self._default
        if budget is None or not budget.enforce:
            return
        with self._lock:
            window = self._windows.get(agent)
            used_tokens, used_usd = 0, 0.0
            if window is not None:
                window.expire(time.monotonic(), budget.window_seconds)
                used_tokens, used_usd = window.tokens, window.usd
        expected = used_tokens + (estimated_tokens or 0)
        if budget.tokens is not None and (used_tokens >= budget.tokens or expected > budget.tokens):
            raise BudgetExceeded(Anomaly(agent, "budget_exceeded", expected, budget.tokens))
        if budget.usd is not None and used_usd >= budget.usd:
            raise BudgetExceeded(Anomaly(agent, "budget_exceeded", used_usd, budget.usd))

    def check_after(
        self,
        agent: str,
        tokens: int | None,
        cost_usd: float | None,
        model: str | None = None,
        tenant: str | None = None,
        user: str | None = None,
    ) -> list[Anomaly]:
        """Account one completed request (of ``tenant`` and ``user``, when known) and return
        the anomalies it triggers."""
        found: list[Anomaly] = []
        budgets = self._budgets
        budget = budgets[agent] if agent in budgets else self._default
        rule = self.spike
        with self._lock:
            rolling = self._spikes.get(agent)
            if rolling is None:
                rolling = self._spikes[agent] = (_Rolling(rule.window), _Rolling(rule.window))
                if len(self._spikes) > MAX_SPIKE_AGENTS:  # the least recently active goes
                    self._spikes.popitem(last=False)
            elif len(self._spikes) > 1:
                self._spikes.move_to_end(agent)
            for value, values, kind in (
                (tokens, rolling[0], "token_spike"),
                (cost_usd, rolling[1], "cost_spike"),
            ):
                if value is None:
                    continue
                if len(values.order) >= rule.warmup and values.above(value, rule.factor):
                    p95 = values.p95()
                    if p95 is not None and p95 > 0 and value > rule.factor * p95:
                        found.append(Anomaly(agent, kind, float(value), rule.factor * p95, model))  # type: ignore[arg-type]
                values.add(value)
            if budget is not None:
                window = self._windows.get(agent)
                if window is None:
                    window = self._windows[agent] = _AgentWindow()
                found.extend(_spend(window, agent, budget, tokens, cost_usd, model))
            if self.alerting_who and (tenant is not None or user is not None):
                found.extend(self._who_spend(tenant, user, tokens, cost_usd, model))
        return found

    def who_budget(self, scope: str, key: str) -> Budget | None:
        """The ``"tenant"`` or ``"user"`` budget alerted on here for ``key`` (None: none)."""
        named = self._who[scope]
        return named.get(key, named.get("*"))

    def _who_spend(
        self,
        tenant: str | None,
        user: str | None,
        tokens: int | None,
        cost_usd: float | None,
        model: str | None,
    ) -> list[Anomaly]:
        """Add one request to its tenant's and user's budget windows (under the lock)."""
        found: list[Anomaly] = []
        for scope, key in (("tenant", tenant), ("user", user)):
            budget = self.who_budget(scope, key) if key is not None else None
            if budget is None or key is None:
                continue
            window = self._who_windows.get((scope, key))
            if window is None:
                if len(self._who_windows) >= MAX_WHO_WINDOWS:
                    self._forget_idle()
                window = self._who_windows[(scope, key)] = _AgentWindow()
            found.extend(_spend(window, f"{scope}:{key}", budget, tokens, cost_usd, model, scope))
        return found

    def _forget_idle(self) -> None:
        """Drop the tenants' and users' windows with nothing left in them (under the lock)."""
        now = time.monotonic()
        for (scope, key), window in self._who_windows.items():
            budget = self.who_budget(scope, key)
            window.expire(now, budget.window_seconds if budget is not None else 0.0)
        self._who_windows = {k: w for k, w in self._who_windows.items() if w.spends}


def _spend(
    window: _AgentWindow,
    name: str,
    budget: Budget,
    tokens: int | None,
    cost_usd: float | None,
    model: str | None,
    scope: str | None = None,
) -> list[Anomaly]:
    """Add one request to ``window`` (under its guard's lock); the budget's crossings, once
    each until the spend is back under it."""
    found: list[Anomaly] = []
    now = time.monotonic()
    window.expire(now, budget.window_seconds)
    window.spends.append((now, tokens or 0, cost_usd or 0.0))
    window.tokens += tokens or 0
    window.usd += cost_usd or 0.0
    for resource, used, limit in (
        ("tokens", window.tokens, budget.tokens),
        ("usd", window.usd, budget.usd),
    ):
        if limit is None:
            continue
        if used > limit:
            if resource not in window.over:  # once per crossing, not every call
                window.over.add(resource)
                found.append(
                    Anomaly(name, "budget_exceeded", float(used), float(limit), model, scope)
                )
        else:
            window.over.discard(resource)
    return found
