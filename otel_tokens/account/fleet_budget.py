"""Budgets shared by every process of a fleet: reserved and settled in PostgreSQL.

With ``OTEL_TOKENS_LEDGER_URL`` set, each enforced budget that applies to a call (its agent's,
``OTEL_TOKENS_BUDGET_*``/``OTEL_TOKENS_AGENT_BUDGETS``; its tenant's and user's,
``OTEL_TOKENS_TENANT_BUDGETS``/``OTEL_TOKENS_USER_BUDGETS``) is checked against the spend of
the whole fleet: before the call starts it reserves its projected maximum (the input estimate
plus the request's own ``max_tokens``, else ``OTEL_TOKENS_BUDGET_RESERVE_OUTPUT_TOKENS``, output
tokens, at the model's price) in one transaction holding an advisory lock per budget, so
concurrent callers in any process cannot both take the last room; a reservation that does not
fit raises :class:`BudgetExceeded`. When the call ends the reservation is settled to the actual
cost and tokens, in the background. The window rolls: only reservations of the last
``window_seconds`` (database clock) count. A caller waits for the database at most
``OTEL_TOKENS_BUDGET_DB_TIMEOUT`` (hung, slow, partitioned or down alike); past it, or if the
database cannot be reached, the process's own budgets are what is enforced: an agent's by
:class:`AnomalyGuard` (always checked), a tenant's and a user's by :class:`LocalWindows` (the
same limits and windows over this process's own spend, which it keeps while the database is up
too); one log line, a ``budget_fleet`` fault, and no caller waits again until a background
probe finds the database answering within that deadline. A reservation the database took after
its caller gave up is settled all the same.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .. import faults
from . import budget_db
from .anomalies import Anomaly, Budget, BudgetExceeded
from .ledger.postgres import unusable
from .pg_schema import ensure_schema

__all__ = ["FleetBudgets", "LocalWindows", "Reservation", "Scope", "Verdict", "WindowEntry"]

PROBE_EVERY = 1.0  # seconds between probes of a database found down (callers never wait)
DB_TIMEOUT = 0.3  # seconds a caller waits for a reservation at most (OTEL_TOKENS_BUDGET_DB_TIMEOUT)
#: TCP keepalives and a bound on unacknowledged data: a worker stuck on a partitioned server's
#: connection is freed by the kernel (a stopped server's kernel still answers: the callers'
#: deadline is what bounds them)
KEEPALIVE = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
    "tcp_user_timeout": 10_000,
}
PRUNE_EVERY = 200  # settlements between deletions of reservations past every window


MAX_LOCAL_WINDOWS = 4096  # tenants and users whose own spend is kept (idle ones dropped past it)


class Scope(NamedTuple):
    """One budget a call is counted in: its scope (agent, tenant, user), its key there, and
    its limits."""

    scope: str
    key: str
    budget: Budget

    def over_limit(self, usd: float, tokens: int) -> Anomaly | None:
        """The :class:`Anomaly` of this budget once its spend is ``usd``/``tokens`` (the USD
        limit checked first), or None while within both limits."""
        for used, limit in ((usd, self.budget.usd), (tokens, self.budget.tokens)):
            if limit is not None and used > limit:
                if self.scope == "agent":  # named as AnomalyGuard names an agent's
                    return Anomaly(self.key, "budget_exceeded", float(used), float(limit))
                return Anomaly(
                    f"{self.scope}:{self.key}",
                    "budget_exceeded",
                    float(used),
                    float(limit),
                    scope=self.scope,
                )
        return None


@dataclass
class Verdict:
    """What a reservation found: ``refused``, the :class:`Anomaly` of the first enforced
    budget without room (then nothing was taken); else it was taken, and ``alerts`` are the
    alert-only budgets it takes past their limit."""

    refused: Anomaly | None = None
    alerts: list[Anomaly] = field(default_factory=list)


class Reservation:
    """What a call reserved: its id and the budgets it holds room in; ``held``: its entries in
    this process's own windows when the database could not be reached in time (None: in the
    database); ``placed``: the database took it (maybe after its caller gave up); ``final``:
    the figures it was settled to."""

    __slots__ = ("alerts", "final", "held", "id", "placed", "scopes", "tokens", "usd")

    def __init__(self, scopes: list[Scope], usd: float, tokens: int) -> None:
        self.id, self.scopes, self.usd, self.tokens = str(uuid.uuid4()), scopes, usd, tokens
        self.held: list[WindowEntry] | None = None
        self.placed = False
        self.final: tuple[float, int] | None = None
        self.alerts: list[Anomaly] = []  # alert-only budgets it crosses (first crossings)


class _Window:
    """One budget's spend in this process: its entries of the last ``seconds``, and their
    sums."""

    __slots__ = ("entries", "seconds", "tokens", "usd")

    def __init__(self, seconds: float) -> None:
        self.entries: deque[WindowEntry] = deque()
        self.seconds = seconds
        self.usd, self.tokens = 0.0, 0

    def add(self, at: float, usd: float, tokens: int) -> WindowEntry:
        """Count ``usd``/``tokens`` spent at monotonic time ``at``: the new entry."""
        entry = WindowEntry(at=at, usd=usd, tokens=tokens, window=self)
        self.entries.append(entry)
        self.usd += usd
        self.tokens += tokens
        return entry

    def expire(self, now: float) -> None:
        """Drop the entries older than the window (no longer counted)."""
        entries, seconds = self.entries, self.seconds
        while entries and entries[0].at <= now - seconds:
            entry = entries.popleft()
            entry.live = False
            self.usd -= entry.usd
            self.tokens -= entry.tokens
        if not entries:
            self.usd, self.tokens = 0.0, 0  # no float residue


@dataclass(eq=False, slots=True)
class WindowEntry:
    """One reservation in one of this process's windows: when (monotonic), what it counts
    there, and whether it still does (``live``: not yet past the window)."""

    at: float
    usd: float
    tokens: int
    window: _Window
    live: bool = True


class LocalWindows:
    """This process's own spend per tenant and per user budget, over the same rolling windows:
    what is enforced (reserve, then settle, as in the database) while the database is down."""

    def __init__(self) -> None:
        self._windows: dict[tuple[str, str], _Window] = {}
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def _window(self, scope: Scope, now: float) -> _Window:
        window = self._windows.get((scope.scope, scope.key))
        if window is None:
            if len(self._windows) >= MAX_LOCAL_WINDOWS:  # forget those with nothing left
                for old in self._windows.values():
                    old.expire(now)
                self._windows = {k: w for k, w in self._windows.items() if w.entries}
            window = self._windows[(scope.scope, scope.key)] = _Window(scope.budget.window_seconds)
        window.seconds = scope.budget.window_seconds
        window.expire(now)
        return window

    def hold(
        self, scopes: list[Scope], usd: float, tokens: int
    ) -> tuple[Verdict, list[WindowEntry]]:
        """Room for ``usd``/``tokens`` in every budget of ``scopes``: the verdict, and the
        entries holding it (none when refused; an alert-only budget without room is held all
        the same, its anomaly in the verdict's alerts)."""
        verdict = Verdict()
        with self._locked():
            now = time.monotonic()
            windows = [(scope, self._window(scope, now)) for scope in scopes]
            for scope, window in windows:
                anomaly = scope.over_limit(window.usd + usd, window.tokens + tokens)
                if anomaly is not None and scope.budget.enforce:
                    return Verdict(refused=anomaly), []
                if anomaly is not None:
                    verdict.alerts.append(anomaly)
            return verdict, [window.add(now, usd, tokens) for _, window in windows]

    def add(self, scopes: list[Scope], usd: float, tokens: int) -> None:
        """Count spend the database took (kept for when it cannot be reached)."""
        with self._locked():
            now = time.monotonic()
            for scope in scopes:
                self._window(scope, now).add(now, usd, tokens)

    def settle(self, held: list[WindowEntry], usd: float, tokens: int) -> None:
        """Replace what ``held`` entries reserved by the actual figures."""
        with self._locked():
            for entry in held:
                if entry.live:  # still in its window
                    entry.window.usd += usd - entry.usd
                    entry.window.tokens += tokens - entry.tokens
                entry.usd, entry.tokens = usd, tokens

    def _locked(self) -> threading.Lock:
        if self._pid != os.getpid():  # a forked child: a lock of its own
            self._lock, self._pid = threading.Lock(), os.getpid()
        return self._lock


class FleetBudgets:
    """The fleet's enforced budgets in one database; thread-safe, fork-aware. No lock of this
    process is held across a round trip: each reservation runs on a worker of its own
    (:class:`~.budget_db.Workers`), under the database's advisory lock of each budget."""

    def __init__(
        self,
        url: str,
        agents: Mapping[str, Budget],
        default: Budget | None,
        tenants: Mapping[str, Budget],
        users: Mapping[str, Budget],
        reserve_output_tokens: int = 4096,
        timeout: float = DB_TIMEOUT,
        conservative: bool = False,
    ) -> None:
        self.url = url
        self.rules = {
            "agent": (dict(agents), default),
            "tenant": (dict(tenants), tenants.get("*")),
            "user": (dict(users), users.get("*")),
        }
        self.reserve_output_tokens = reserve_output_tokens
        self.conservative = conservative  # reserve an incomplete estimate's upper bound
        self.timeout = timeout  # seconds a caller waits for the database at most
        self.local = LocalWindows()  # tenants' and users' budgets while the database is down
        self.faults = 0
        self._settled = 0
        self._schema_ready = False  # created or found by a connection of this process
        self._fresh()

    def _fresh(self) -> None:
        """State of this process's own (at start, and in a forked child)."""
        self._pid = os.getpid()
        self._state = threading.Lock()  # never held across a round trip
        self._workers = budget_db.Workers(self._connection, self._failed)
        self._settler = budget_db.Settler(self._connection, self._settle_batch, self._failed)
        self._down = False
        self._probe_at = 0.0
        self._probing = False
        self._over: set[tuple[str | None, str]] = set()  # alert-only budgets found over
        if any(
            b.enforce or scope != "agent"
            for scope, (named, default) in self.rules.items()
            for b in (*named.values(), default)
            if b is not None
        ):
            self._workers.post(_round_trip, _ignored)  # a connection ready for the first call

    def _own(self) -> None:
        if self._pid != os.getpid():  # a forked child: never the parent's threads or connections
            with budget_db.fork_lock():
                if self._pid != os.getpid():
                    budget_db.inherited.extend(self._workers.connections)
                    budget_db.inherited.append(self._settler.conn)
                    self._fresh()

    @classmethod
    def from_settings(cls, settings: Any) -> FleetBudgets | None:
        """The fleet budgets the settings ask for (None without a ledger URL)."""
        if settings.ledger_url is None:
            return None
        budget_db.exit_timeout = settings.exit_timeout
        return cls(
            settings.ledger_url,
            settings.agent_budgets,
            settings.default_budget,
            settings.tenant_budgets,
            settings.user_budgets,
            settings.budget_reserve_output_tokens,
            settings.budget_db_timeout,
            settings.budget_reserve == "conservative",
        )

    def applying(self, agent: str, tenant: str | None, user: str | None) -> list[Scope]:
        """The fleet budgets of a call, in lock order: the enforced ones, and its tenant's
        and user's alert-only ones (an agent's alert-only budget is :class:`AnomalyGuard`'s,
        over the process's own spend)."""
        found = []
        for scope, key in (("agent", agent), ("tenant", tenant), ("user", user)):
            if key is None:
                continue
            named, default = self.rules[scope]
            budget = named.get(key, default)
            if budget is not None and (budget.enforce or scope != "agent"):
                found.append(Scope(scope=scope, key=key, budget=budget))
        return sorted(found, key=lambda s: (s.scope, s.key))

    # -- reserve and settle ------------------------------------------------------------------
    def reserve(
        self, agent: str, tenant: str | None, user: str | None, usd: float | None, tokens: int
    ) -> Reservation | None:
        """Reserve ``usd``/``tokens`` in every budget of the call; raises
        :class:`BudgetExceeded` when an enforced one has no room (an alert-only one without
        room: its anomaly in :attr:`Reservation.alerts`, once per crossing); None when none
        applies. Waits for the database at most :attr:`timeout` seconds (not at all while it
        is found down); then the process's own budgets are enforced: the agent's by
        :class:`AnomalyGuard`, the tenant's and user's here, in :class:`LocalWindows`."""
        scopes = self.applying(agent, tenant, user)
        if not scopes:
            return None
        self._own()
        reservation = Reservation(scopes, usd or 0.0, tokens)
        verdict = self._call(self._reserve, reservation)
        if verdict is None:  # the database did not answer in time: this process's own windows
            verdict = self._hold_locally(reservation)
        if verdict.refused is not None:
            raise BudgetExceeded(verdict.refused)
        reservation.alerts = self._crossings(scopes, verdict.alerts)
        return reservation

    def _hold_locally(self, reservation: Reservation) -> Verdict:
        """The reservation in this process's own windows of its tenant's and user's budgets
        (an agent's is :class:`AnomalyGuard`'s); held, it is settled there too (and in the
        database, which may still take it, late)."""
        own = [s for s in reservation.scopes if s.scope != "agent"]
        verdict, held = self.local.hold(own, reservation.usd, reservation.tokens)
        if verdict.refused is None:
            reservation.held = held
        return verdict

    def _crossings(self, scopes: list[Scope], alerts: list[Anomaly]) -> list[Anomaly]:
        """Of ``alerts``, those of budgets not already over in this process's last look (an
        alert-only budget alerts once per crossing, not on every call while over it)."""
        over = {(a.scope, a.agent) for a in alerts}
        with self._state:
            for scope in scopes:
                named = (scope.scope, f"{scope.scope}:{scope.key}")
                if not scope.budget.enforce and named not in over:
                    self._over.discard(named)
            new = [a for a in alerts if (a.scope, a.agent) not in self._over]
            if len(self._over) > MAX_LOCAL_WINDOWS:
                self._over.clear()
            self._over.update(over)
        return new

    def _reserve(self, conn: Any, reservation: Reservation) -> Verdict:
        """On a worker: the reservation in one transaction, each budget under its advisory
        lock (nothing taken when an enforced one has no room)."""
        verdict = Verdict()
        with conn.transaction():
            now = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()[0]
            for scope in reservation.scopes:
                used_usd, used_tokens = _locked_spend(conn, scope, now)
                anomaly = scope.over_limit(
                    used_usd + reservation.usd, used_tokens + reservation.tokens
                )
                if anomaly is not None and scope.budget.enforce:
                    return Verdict(refused=anomaly)
                if anomaly is not None:
                    verdict.alerts.append(anomaly)
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO otel_tokens_budget_reservations (id, scope, key, ts, usd, tokens) "
                    "VALUES (%s, %s, %s, %s, %s, %s)",
                    [
                        (reservation.id, s.scope, s.key, now, reservation.usd, reservation.tokens)
                        for s in reservation.scopes
                    ],
                )
        self._placed(reservation)
        return verdict

    def _placed(self, reservation: Reservation) -> None:
        """The reservation is in the database: settled there by whichever comes second, the
        call's end or this (a caller that gave up waiting may have ended already)."""
        with self._state:
            reservation.placed = True
            final = reservation.final
        if final is not None:
            self._settler.put((reservation, *final))

    def settle(self, reservation: Reservation, usd: float | None, tokens: int | None) -> None:
        """Replace the reservation by the call's actual cost and tokens (an unknown one keeps
        what was reserved: never less than the truth); this process's own windows of the
        tenant and user count it too (what is enforced if the database goes down). The
        database's part is queued: written in the background, never waited for."""
        usd = reservation.usd if usd is None else usd
        tokens = reservation.tokens if tokens is None else tokens
        self._own()
        with self._state:
            reservation.final = (usd, tokens)
            placed = reservation.placed
        if placed:
            self._settler.put((reservation, usd, tokens))
        if reservation.held is not None:
            self.local.settle(reservation.held, usd, tokens)
            return
        own = [s for s in reservation.scopes if s.scope != "agent"]
        if own:
            self.local.add(own, usd, tokens)

    def _settle_batch(self, conn: Any, batch: list[tuple[Reservation, float, int]]) -> None:
        """On the settling thread: settlements in one transaction; now and then, reservations
        older than twice the longest window are deleted."""
        with conn.transaction(), conn.cursor() as cur:
            cur.executemany(
                "UPDATE otel_tokens_budget_reservations SET usd=%s, tokens=%s, "
                "settled=true WHERE id=%s",
                [(usd, tokens, r.id) for r, usd, tokens in batch],
            )
        before, self._settled = self._settled, self._settled + len(batch)
        if before // PRUNE_EVERY != self._settled // PRUNE_EVERY:
            longest = max(s.budget.window_seconds for r, _, _ in batch for s in r.scopes)
            conn.execute(
                "DELETE FROM otel_tokens_budget_reservations WHERE ts < "
                "extract(epoch FROM clock_timestamp()) - %s",
                (longest * 2,),
            )

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait up to ``timeout`` seconds for the queued settlements to be written."""
        return self._settler.flush(timeout)

    def used(self, scope: str, key: str, window: float) -> tuple[float, int]:
        """(USD, tokens) the fleet reserved or spent in ``scope``/``key`` over ``window``."""
        from .ledger.postgres import connect

        with connect(self.url) as conn:
            row = conn.execute(
                "SELECT COALESCE(SUM(usd), 0), COALESCE(SUM(tokens), 0) FROM "
                "otel_tokens_budget_reservations WHERE scope=%s AND key=%s AND "
                "ts > extract(epoch FROM clock_timestamp()) - %s",
                (scope, key, window),
            ).fetchone()
        return float(row[0]), int(row[1])

    # -- the database: bounded waits, down and back ------------------------------------------
    def _call(self, work: Any, *args: Any) -> Any:
        """``work(conn, *args)`` on a worker within :attr:`timeout`; None when the database
        is down, slow or hung (counted and logged once per outage; while it is down no caller
        waits: a background probe finds when it is back)."""
        if self._down:
            self._probe()
            return None
        try:
            return self._workers.run(self.timeout, work, *args)
        except budget_db.Connecting:
            return None  # a fresh worker still connecting: this caller alone goes on without it
        except Exception as exc:  # noqa: BLE001 - hung, slow or down alike
            self._failed(exc)
            return None

    def _failed(self, exc: BaseException) -> None:
        with self._state:
            if self._down:
                return
            self._down, self._probe_at = True, time.monotonic() + PROBE_EVERY
        self.faults += 1
        faults.report(
            "budget_fleet",
            exc,
            f"{unusable('fleet budgets', exc)}; enforcing this "
            "process's own budgets until it is back",
        )

    def _probe(self) -> None:
        """At most one probe at a time, every :data:`PROBE_EVERY` seconds, on a worker."""
        with self._state:
            if self._probing or time.monotonic() < self._probe_at:
                return
            self._probing, self._probe_at = True, time.monotonic() + PROBE_EVERY
        self._workers.post(_round_trip, self._probed)

    def _probed(self, outcome: tuple[bool, Any]) -> None:
        """Back only when a round trip took less than a caller would wait (a slow database
        stays down: callers would only pay the deadline again)."""
        ok, took = outcome
        with self._state:
            self._probing = False
            if ok and took < self.timeout:
                self._down = False

    def _connection(self) -> Any:
        """A new connection, the database's schema current (:mod:`.pg_schema`: the first
        connection of this process creates or migrates it, under a lock across the fleet)."""
        import psycopg

        from .ledger.postgres import CONNECT_TIMEOUT, STATEMENT_TIMEOUT_MS

        conn = psycopg.connect(
            self.url,
            connect_timeout=CONNECT_TIMEOUT,
            autocommit=True,
            **KEEPALIVE,
            options=f"-c statement_timeout={STATEMENT_TIMEOUT_MS}",
        )
        try:
            if not self._schema_ready:
                ensure_schema(conn)
                self._schema_ready = True
        except BaseException:
            conn.close()
            raise
        return conn


def _locked_spend(conn: Any, scope: Scope, now: float) -> tuple[float, int]:
    """(USD, tokens) reserved in ``scope``'s budget over its window up to ``now`` (database
    clock), its advisory lock taken first (held until the transaction ends)."""
    conn.execute(
        "SELECT pg_advisory_xact_lock(hashtext(%s), hashtext(%s))", (scope.scope, scope.key)
    )
    usd, tokens = conn.execute(
        "SELECT COALESCE(SUM(usd), 0), COALESCE(SUM(tokens), 0) FROM "
        "otel_tokens_budget_reservations WHERE scope=%s AND key=%s AND ts > %s",
        (scope.scope, scope.key, now - scope.budget.window_seconds),
    ).fetchone()
    return float(usd), int(tokens)


def _ignored(outcome: tuple[bool, Any]) -> None:
    """What a warm-up gives: nothing to do (a failure is the first caller's to find)."""


def _round_trip(conn: Any) -> float:
    """Seconds one round trip to the database takes."""
    start = time.monotonic()
    conn.execute("SELECT 1").fetchone()
    return time.monotonic() - start


# -- what the account step asks of the fleet budgets (settle.py) -------------------------------
def reserve(
    fleet: FleetBudgets, pricer: Any, call: Any, tracking: Any, agent: str
) -> Reservation | None:
    """Reserve the call's projected maximum: its input estimate (an incomplete estimate's
    learnt upper bound when the settings ask for the conservative reservation) plus the
    request's own output limit (``max_tokens``; ``reserve_output_tokens`` when it gives
    none), at the request model's price (USD unknown for an unpriced model: tokens only)."""
    from ..usage import Usage

    if not fleet.applying(agent, tracking.tenant, tracking.user):
        return None  # no fleet budget: nothing to price nor reserve
    estimate = tracking.estimate
    input_tokens = (estimate.input_tokens or 0) if estimate is not None else 0
    bound = getattr(tracking.request_estimate, "input_max", None)
    if fleet.conservative and bound is not None:
        input_tokens = max(input_tokens, bound)
    limit = call.request.max_output_tokens if call.request is not None else None
    output_tokens = fleet.reserve_output_tokens if limit is None else limit
    usd = None
    if call.request_model:
        try:
            projected = Usage(
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                model=call.request_model,
                provider=call.provider,
            )
            usd = pricer.price(projected, call.provider, call.request_model).cost_usd
        except Exception as exc:
            faults.report("pricing", exc)
    return fleet.reserve(agent, tracking.tenant, tracking.user, usd, input_tokens + output_tokens)


def settle_reservation(
    fleet: FleetBudgets, reservation: Reservation, usage: Any, price: Any, failed: bool
) -> None:
    """Settle to the call's actual figures; a call that failed with no usage spent nothing
    (any other unknown keeps its reservation)."""
    tokens, cost = usage.total_tokens, price.cost_usd
    if failed and tokens is None and cost is None:
        tokens, cost = 0, 0.0
    fleet.settle(reservation, cost, tokens)
