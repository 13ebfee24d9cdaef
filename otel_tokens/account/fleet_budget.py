"""Budgets shared by every process of a fleet: reserved and settled in PostgreSQL.

With ``OTEL_TOKENS_LEDGER_URL`` set, each enforced budget that applies to a call (its agent's,
``OTEL_TOKENS_BUDGET_*``/``OTEL_TOKENS_AGENT_BUDGETS``; its tenant's and user's,
``OTEL_TOKENS_TENANT_BUDGETS``/``OTEL_TOKENS_USER_BUDGETS``) is checked against the spend of
the whole fleet: before the call starts it reserves its projected maximum (the input estimate
plus the request's own ``max_tokens``, else ``OTEL_TOKENS_BUDGET_RESERVE_OUTPUT_TOKENS``, output
tokens, at the model's price) in one transaction holding an advisory lock per budget, so
concurrent callers in any process cannot both take the last room; a reservation that does not
fit raises :class:`BudgetExceeded`. When the call ends the reservation is settled to the actual
cost and tokens. The window rolls: only reservations of the last ``window_seconds`` (database
clock) count. If the database cannot be reached the process's own budgets are what is enforced:
an agent's by :class:`AnomalyGuard` (always checked), a tenant's and a user's by
:class:`LocalWindows` (the same limits and windows over this process's own spend, which it
keeps while the database is up too); one log line, a ``budget_fleet`` fault, and no attempt
for the next few seconds.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections import deque
from collections.abc import Mapping
from typing import Any

from .. import faults
from .anomalies import Anomaly, Budget, BudgetExceeded

__all__ = ["FleetBudgets", "LocalWindows", "Reservation"]

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS otel_tokens_budget_reservations (
        id UUID NOT NULL,
        scope TEXT NOT NULL,
        key TEXT NOT NULL,
        ts DOUBLE PRECISION NOT NULL,
        usd DOUBLE PRECISION NOT NULL,
        tokens BIGINT NOT NULL,
        settled BOOLEAN NOT NULL DEFAULT false,
        PRIMARY KEY (id, scope)
    )""",
    ("CREATE INDEX IF NOT EXISTS otel_tokens_budget_reservations_window "
     "ON otel_tokens_budget_reservations (scope, key, ts)"),
)
DOWN_FOR = 5.0  # seconds without an attempt after the database failed
PRUNE_EVERY = 200  # settlements between deletions of reservations past every window


MAX_LOCAL_WINDOWS = 4096  # tenants and users whose own spend is kept (idle ones dropped past it)


class Reservation:
    """What a call reserved: its id and the budgets it holds room in; ``held``: its entries in
    this process's own windows when the database could not be reached (None: in the database)."""

    __slots__ = ("held", "id", "scopes", "tokens", "usd")

    def __init__(self, scopes: list[tuple[str, str, Budget]], usd: float, tokens: int) -> None:
        self.id, self.scopes, self.usd, self.tokens = str(uuid.uuid4()), scopes, usd, tokens
        self.held: list[list[Any]] | None = None


class _Window:
    """One budget's spend in this process: entries ``[monotonic time, usd, tokens, live,
    window]`` of the last ``seconds``."""

    __slots__ = ("entries", "seconds", "tokens", "usd")

    def __init__(self, seconds: float) -> None:
        self.entries: deque[list[Any]] = deque()
        self.seconds = seconds
        self.usd, self.tokens = 0.0, 0

    def expire(self, now: float) -> None:
        entries, seconds = self.entries, self.seconds
        while entries and entries[0][0] <= now - seconds:
            entry = entries.popleft()
            entry[3] = False
            self.usd -= entry[1]
            self.tokens -= entry[2]
        if not entries:
            self.usd, self.tokens = 0.0, 0  # no float residue


class LocalWindows:
    """This process's own spend per tenant and per user budget, over the same rolling windows:
    what is enforced (reserve, then settle, as in the database) while the database is down."""

    def __init__(self) -> None:
        self._windows: dict[tuple[str, str], _Window] = {}
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def _window(self, scope: str, key: str, budget: Budget, now: float) -> _Window:
        window = self._windows.get((scope, key))
        if window is None:
            if len(self._windows) >= MAX_LOCAL_WINDOWS:  # forget those with nothing left
                for old in self._windows.values():
                    old.expire(now)
                self._windows = {k: w for k, w in self._windows.items() if w.entries}
            window = self._windows[(scope, key)] = _Window(budget.window_seconds)
        window.seconds = budget.window_seconds
        window.expire(now)
        return window

    def hold(self, scopes: list[tuple[str, str, Budget]], usd: float,
             tokens: int) -> Anomaly | list[list[Any]]:  # fmt: skip
        """Room for ``usd``/``tokens`` in every budget of ``scopes``: the entries holding it,
        or the :class:`Anomaly` of the first budget without room (nothing held then)."""
        with self._locked():
            now = time.monotonic()
            windows = [(scope, key, budget, self._window(scope, key, budget, now))
                       for scope, key, budget in scopes]  # fmt: skip
            for scope, key, budget, window in windows:
                for used, limit in ((window.usd + usd, budget.usd),
                                    (window.tokens + tokens, budget.tokens)):  # fmt: skip
                    if limit is not None and used > limit:
                        return Anomaly(f"{scope}:{key}", "budget_exceeded", float(used),
                                       float(limit), scope=scope)  # fmt: skip
            return [self._add(window, now, usd, tokens) for _, _, _, window in windows]

    def add(self, scopes: list[tuple[str, str, Budget]], usd: float, tokens: int) -> None:
        """Count spend the database took (kept for when it cannot be reached)."""
        with self._locked():
            now = time.monotonic()
            for scope, key, budget in scopes:
                self._add(self._window(scope, key, budget, now), now, usd, tokens)

    def settle(self, held: list[list[Any]], usd: float, tokens: int) -> None:
        """Replace what ``held`` entries reserved by the actual figures."""
        with self._locked():
            for entry in held:
                if entry[3]:  # still in its window
                    window = entry[4]
                    window.usd += usd - entry[1]
                    window.tokens += tokens - entry[2]
                entry[1], entry[2] = usd, tokens

    @staticmethod
    def _add(window: _Window, now: float, usd: float, tokens: int) -> list[Any]:
        entry = [now, usd, tokens, True, window]
        window.entries.append(entry)
        window.usd += usd
        window.tokens += tokens
        return entry

    def _locked(self) -> threading.Lock:
        if self._pid != os.getpid():  # a forked child: a lock of its own
            self._lock, self._pid = threading.Lock(), os.getpid()
        return self._lock


class FleetBudgets:
    """The fleet's enforced budgets in one database; thread-safe, fork-aware."""

    def __init__(self, url: str, agents: Mapping[str, Budget], default: Budget | None,
                 tenants: Mapping[str, Budget], users: Mapping[str, Budget],
                 reserve_output_tokens: int = 4096, timeout=None) -> None:  # fmt: skip
        self.url = url
        self.rules = {"agent": (dict(agents), default), "tenant": (dict(tenants), tenants.get("*")),
                      "user": (dict(users), users.get("*"))}  # fmt: skip
        self.reserve_output_tokens = reserve_output_tokens
        self.local = LocalWindows()  # tenants' and users' budgets while the database is down
        self._lock = threading.Lock()
        self._conn: Any = None
        self._pid = os.getpid()
        self._down_until = 0.0
        self._settled = 0
        self.faults = 0

    @classmethod
    def from_settings(cls, settings: Any) -> FleetBudgets | None:
        """The fleet budgets the settings ask for (None without a ledger URL)."""
        if settings.ledger_url is None:
            return None
        return cls(settings.ledger_url, settings.agent_budgets, settings.default_budget,
                   settings.tenant_budgets, settings.user_budgets,
                   settings.budget_reserve_output_tokens)  # fmt: skip

    def applying(self, agent: str, tenant: str | None, user: str | None) -> list[tuple[str, str, Budget]]:
        """The enforced budgets of a call, as (scope, key, budget), in lock order."""
        found = []
        for scope, key in (("agent", agent), ("tenant", tenant), ("user", user)):
            if key is None:
                continue
            named, default = self.rules[scope]
            budget = named.get(key, default)
            if budget is not None and budget.enforce:
                found.append((scope, key, budget))
        return sorted(found, key=lambda s: (s[0], s[1]))

    # -- reserve and settle ------------------------------------------------------------------
    def reserve(self, agent: str, tenant: str | None, user: str | None, usd: float | None,
                tokens: int) -> Reservation | None:  # fmt: skip
        """Reserve ``usd``/``tokens`` in every enforced budget of the call; raises
        :class:`BudgetExceeded` when one has no room; None when none applies. When the
        database cannot be reached the process's own budgets are enforced: the agent's by
        :class:`AnomalyGuard`, the tenant's and user's here, in :class:`LocalWindows`."""
        scopes = self.applying(agent, tenant, user)
        if not scopes:
            return None
        reservation = Reservation(scopes, usd or 0.0, tokens)
        refused = self._guarded(self._reserve, reservation)
        if isinstance(refused, Anomaly):
            raise BudgetExceeded(refused)
        if refused is False:
            return reservation
        own = [s for s in scopes if s[0] != "agent"]
        if not own:
            return None
        held = self.local.hold(own, reservation.usd, tokens)
        if isinstance(held, Anomaly):
            raise BudgetExceeded(held)
        reservation.held = held
        return reservation

    def _reserve(self, conn: Any, reservation: Reservation) -> Anomaly | bool:
        with conn.transaction():
            now = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()[0]
            for scope, key, budget in reservation.scopes:
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s), hashtext(%s))", (scope, key))
                used_usd, used_tokens = conn.execute(
                    "SELECT COALESCE(SUM(usd), 0), COALESCE(SUM(tokens), 0) FROM "
                    "otel_tokens_budget_reservations WHERE scope=%s AND key=%s AND ts > %s",
                    (scope, key, now - budget.window_seconds)).fetchone()  # fmt: skip
                for used, asked, limit in ((float(used_usd), reservation.usd, budget.usd),
                                           (int(used_tokens), reservation.tokens, budget.tokens)):
                    if limit is not None and used + asked > limit:
                        return Anomaly(f"{scope}:{key}" if scope != "agent" else key,
                                       "budget_exceeded", float(used + asked), float(limit),
                                       scope=scope if scope != "agent" else None)
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO otel_tokens_budget_reservations (id, scope, key, ts, usd, tokens) "
                    "VALUES (%s, %s, %s, %s, %s, %s)",
                    [(reservation.id, scope, key, now, reservation.usd, reservation.tokens)
                     for scope, key, _ in reservation.scopes])  # fmt: skip
        return False

    def settle(self, reservation: Reservation, usd: float | None, tokens: int | None) -> None:
        """Replace the reservation by the call's actual cost and tokens (an unknown one keeps
        what was reserved: never less than the truth); this process's own windows of the
        tenant and user count it too (what is enforced if the database goes down)."""
        usd = reservation.usd if usd is None else usd
        tokens = reservation.tokens if tokens is None else tokens
        if reservation.held is not None:
            self.local.settle(reservation.held, usd, tokens)
            return
        self._guarded(self._settle, reservation, usd, tokens)
        own = [s for s in reservation.scopes if s[0] != "agent"]
        if own:
            self.local.add(own, usd, tokens)

    def _settle(self, conn: Any, reservation: Reservation, usd: float, tokens: int) -> None:
        with conn.transaction():
            conn.execute("UPDATE otel_tokens_budget_reservations SET usd=%s, tokens=%s, "
                         "settled=true WHERE id=%s", (usd, tokens, reservation.id))
        self._settled += 1
        if self._settled % PRUNE_EVERY == 0:
            longest = max(b.window_seconds for _, _, b in reservation.scopes)
            conn.execute("DELETE FROM otel_tokens_budget_reservations WHERE ts < "
                         "extract(epoch FROM clock_timestamp()) - %s", (longest * 2,))  # fmt: skip
            conn.commit()

    def flush(self, timeout=0):
        return True

    def used(self, scope: str, key: str, window: float) -> tuple[float, int]:
        """(USD, tokens) the fleet reserved or spent in ``scope``/``key`` over ``window``."""
        from .ledger.postgres import connect

        with connect(self.url) as conn:
            row = conn.execute(
                "SELECT COALESCE(SUM(usd), 0), COALESCE(SUM(tokens), 0) FROM "
                "otel_tokens_budget_reservations WHERE scope=%s AND key=%s AND "
                "ts > extract(epoch FROM clock_timestamp()) - %s", (scope, key, window)).fetchone()
        return float(row[0]), int(row[1])

    # -- the connection ----------------------------------------------------------------------
    def _guarded(self, work: Any, *args: Any) -> Any:
        """``work(conn, *args)`` on this process's connection; None when the database is down
        (counted and logged once; no new attempt for :data:`DOWN_FOR` seconds)."""
        if time.monotonic() < self._down_until:
            return None
        if self._pid != os.getpid():  # a forked child: never the parent's connection
            self._conn, self._pid, self._lock = None, os.getpid(), threading.Lock()
        with self._lock:
            try:
                return work(self._connection(), *args)
            except Exception as exc:
                self._conn = None
                self._down_until = time.monotonic() + DOWN_FOR
                self.faults += 1
                faults.report("budget_fleet", exc, "fleet budgets unreachable; enforcing this "
                              "process's own budgets until it is back")  # fmt: skip
                return None

    def _connection(self) -> Any:
        if self._conn is None or self._conn.closed:
            from .ledger.postgres import connect

            conn = connect(self.url)
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (0x6F74_6F6B_6275_6467,))
                for statement in _SCHEMA:
                    conn.execute(statement)
            self._conn = conn
        return self._conn


# -- the account step's hooks (settle.py) ----------------------------------------------------
def reserve(fleet: FleetBudgets, pricer: Any, call: Any, agent: str) -> Reservation | None:
    """Reserve the call's projected maximum: its input estimate plus the request's own output
    limit (``max_tokens``; ``reserve_output_tokens`` when it gives none), at the request
    model's price (USD unknown for an unpriced model: tokens only)."""
    from ..usage import Usage

    if not fleet.applying(agent, call.tenant, call.user):
        return None  # no enforced budget: nothing to price nor reserve
    estimate = call.estimate
    input_tokens = (estimate.input_tokens or 0) if estimate is not None else 0
    limit = call.request.max_output_tokens if call.request is not None else None
    output_tokens = fleet.reserve_output_tokens if limit is None else limit
    usd = None
    if call.request_model:
        try:
            projected = Usage(input_tokens=input_tokens, output_tokens=output_tokens,
                              model=call.request_model, provider=call.provider)  # fmt: skip
            usd = pricer.price(projected, call.provider, call.request_model).cost_usd
        except Exception as exc:
            faults.report("pricing", exc)
    return fleet.reserve(agent, call.tenant, call.user, usd, input_tokens + output_tokens)


def settle_reservation(fleet: FleetBudgets, reservation: Reservation, usage: Any, price: Any,
                       failed: bool) -> None:  # fmt: skip
    """Settle to the call's actual figures; a call that failed with no usage spent nothing
    (any other unknown keeps its reservation)."""
    tokens, cost = usage.total_tokens, price.cost_usd
    if failed and tokens is None and cost is None:
        tokens, cost = 0, 0.0
    fleet.settle(reservation, cost, tokens)
