"""Fleet budgets against a database that hangs, crawls or holds one budget's lock, on a real
PostgreSQL: a budgeted call waits at most the deadline (``OTEL_TOKENS_BUDGET_DB_TIMEOUT``), then
the process's own budgets; unrelated budgets are never queued behind a hung call; a reservation
the database takes after its caller gave up is settled all the same; a forked child uses
connections of its own."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import threading
import time

import pytest

from .cluster import Cluster

psycopg = pytest.importorskip("psycopg")

DEADLINE = 0.3  # the default OTEL_TOKENS_BUDGET_DB_TIMEOUT
BOUND = 2.0  # what a budgeted call may take at most here (a noisy 2-core machine)


def _budgets(url: str, agents=("bot",), timeout: float = DEADLINE):
    from otel_tokens.account.anomalies import Budget
    from otel_tokens.account.fleet_budget import FleetBudgets

    budget = Budget(usd=1000.0, window_seconds=600, enforce=True)
    return FleetBudgets(url, {a: budget for a in agents}, None, {"acme": budget}, {},
                        timeout=timeout)  # fmt: skip


def _cluster_pids(cluster: Cluster) -> list[int]:
    """The postmaster and every process it started (backends, checkpointer, walwriter...)."""
    with open(os.path.join(cluster.data, "postmaster.pid")) as f:
        postmaster = int(f.readline())
    found = [postmaster]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == postmaster:
                found.append(int(entry))
    return found


@contextlib.contextmanager
def frozen(cluster: Cluster, seconds: float):
    """Every process of the cluster stopped (SIGSTOP: its kernel still ACKs TCP) for
    ``seconds``, resumed by a timer (a caller blocked on it cannot hold the test for ever)."""
    pids = _cluster_pids(cluster)

    def resume() -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    timer = threading.Timer(seconds, resume)
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        resume()


class SlowProxy:
    """A TCP proxy on 127.0.0.1 to ``port`` that waits :attr:`delay` seconds before it
    forwards each chunk, either way."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.delay = 0.0
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                time.sleep(self.delay)
                sink.sendall(chunk)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.server.close()
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.close()


def _calls(fleet, seconds: float, threads: int = 4) -> list[tuple[float, bool]]:
    """``threads`` callers reserving and settling for ``seconds``: (seconds each call's
    reservation took, whether the database held it)."""
    took: list[tuple[float, bool]] = []
    end = time.monotonic() + seconds

    def work() -> None:
        while time.monotonic() < end:
            start = time.monotonic()
            reservation = fleet.reserve("bot", "acme", None, 0.01, 10)
            took.append((time.monotonic() - start, reservation.held is None))
            fleet.settle(reservation, 0.005, 5)
            time.sleep(0.05)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return took


def _placed(fleet) -> bool:
    """Whether one call's reservation is held by the database again."""
    return all(placed for _, placed in _calls(fleet, 0.01, threads=1))


def _unsettled(url: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT count(*) FROM otel_tokens_budget_reservations "
                            "WHERE NOT settled").fetchone()[0]  # fmt: skip


def _until(predicate, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def test_calls_during_a_15_s_freeze_wait_at_most_the_deadline(own_ledger_db, capsys):
    """PostgreSQL stopped (SIGSTOP) for 15 s under 4 callers: no call waits more than the
    deadline (before: the first one waited the whole freeze); one fault; back in the database
    after; the reservation the database took late is settled, nothing left unsettled."""
    cluster, url = own_ledger_db
    fleet = _budgets(url)
    before = _calls(fleet, 1.0)
    assert sum(placed for _, placed in before) > len(before) / 2 and fleet.faults == 0
    with frozen(cluster, 15.0):
        during = _calls(fleet, 14.5)
    slowest = max(t for t, _ in during)
    print(f"\nfreeze: {len(during)} calls, slowest {slowest * 1000:.0f} ms, "
          f"{sum(t > DEADLINE / 2 for t, _ in during)} paid the deadline")  # fmt: skip
    assert slowest < BOUND, slowest
    assert len(during) > 100  # the calls went on, on the process's own budgets
    assert not any(placed for _, placed in during)
    assert fleet.faults == 1
    assert _until(lambda: _placed(fleet), 15)
    assert fleet.flush(10)
    assert _until(lambda: _unsettled(url) == 0, 10), "a reservation taken late was not settled"


def test_calls_behind_a_2_s_per_packet_proxy_wait_at_most_the_deadline(pg_cluster, ledger_db):
    """Every packet to and from the database delayed 2 s: no call waits more than the
    deadline (before: ~38 s each, indefinitely); the probe does not call a database this slow
    back, so callers do not pay the deadline again; back in the database once it is fast."""
    port = int(ledger_db.rsplit(":", 1)[1].split("/", 1)[0])
    proxy = SlowProxy(port)
    try:
        fleet = _budgets(ledger_db.replace(f":{port}/", f":{proxy.port}/"))
        assert _until(lambda: _placed(fleet), 10) and fleet.faults == 0
        proxy.delay = 2.0
        slow = _calls(fleet, 10.0)
        slowest = max(t for t, _ in slow)
        paid = sum(t > DEADLINE / 2 for t, _ in slow)
        print(f"\nslow proxy: {len(slow)} calls, slowest {slowest * 1000:.0f} ms, {paid} paid "
              "the deadline")  # fmt: skip
        assert slowest < BOUND, slowest
        assert paid <= 8, paid  # those under way when it was found slow, not one per probe
        assert fleet.faults == 1
        proxy.delay = 0.0
        assert _until(lambda: _placed(fleet), 30)
    finally:
        proxy.close()


def test_four_budgets_are_not_queued_behind_one_hung_call(ledger_db):
    """Agent a's budget lock held by another session: a's reservation hangs in the database
    (until the deadline, 2 s here); b, c and d, each with its own budget, are reserved in the
    database meanwhile, each in well under a second (before: all behind a's, ~5 s); a's
    reservation, taken when the lock is released, is settled."""
    fleet = _budgets(ledger_db, agents=("a", "b", "c", "d"), timeout=2.0)
    fleet.settle(fleet.reserve("a", None, None, 0.01, 1), 0.01, 1)  # the schema is there
    took: dict[str, tuple[float, bool]] = {}

    def call(agent: str) -> None:
        start = time.monotonic()
        reservation = fleet.reserve(agent, None, None, 0.01, 10)
        took[agent] = (time.monotonic() - start, reservation.held is None)
        fleet.settle(reservation, 0.002, 2)

    with psycopg.connect(ledger_db, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(hashtext('agent'), hashtext('a'))")
        hung = threading.Thread(target=call, args=("a",))
        hung.start()
        time.sleep(0.3)  # a's reservation waits on the lock
        others = [threading.Thread(target=call, args=(agent,)) for agent in "bcd"]
        for thread in others:
            thread.start()
        for thread in others:
            thread.join()
        hung.join()
        holder.execute("SELECT pg_advisory_unlock_all()")
    print(f"\n{ {agent: round(t, 3) for agent, (t, _) in took.items()} }")
    for agent in "bcd":
        assert took[agent][0] < 1.0 and took[agent][1], took
    assert 1.5 < took["a"][0] < 2 + BOUND and not took["a"][1], took
    assert fleet.flush(10)
    assert _until(lambda: _unsettled(ledger_db) == 0, 10)


def test_a_forked_child_uses_connections_of_its_own(ledger_db):
    """A child forked after the parent reserved reserves through workers of its own; the
    parent's connections are neither used nor closed by it: the parent goes on after."""
    fleet = _budgets(ledger_db, timeout=5.0)  # a child's first worker connects within it
    first = fleet.reserve("bot", "acme", None, 0.01, 1)
    assert first.held is None
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            child = fleet.reserve("bot", "acme", None, 0.01, 1)
            fleet.settle(child, 0.01, 1)
            code = 0 if child.held is None and fleet.flush(5) and fleet.faults == 0 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    fleet.settle(first, 0.01, 1)
    again = fleet.reserve("bot", "acme", None, 0.01, 1)
    assert again.held is None and fleet.faults == 0
    fleet.settle(again, 0.01, 1)
    assert fleet.flush(5) and _unsettled(ledger_db) == 0
    assert fleet.used("agent", "bot", 600) == (pytest.approx(0.03), 3)


def test_a_server_that_never_answers_is_found_down_once(tmp_path):
    """A port that accepts connections and never answers (a partitioned or stopped host: the
    connect timeout is 3 s): no call waits more than the deadline, one fault, and once it is
    found down no call waits at all while the background probe keeps trying."""
    silent = socket.create_server(("127.0.0.1", 0))  # listening, never accepting
    try:
        fleet = _budgets(f"postgresql://postgres@127.0.0.1:{silent.getsockname()[1]}/x")
        first = _calls(fleet, 4.0, threads=2)
        later = _calls(fleet, 3.0, threads=2)
    finally:
        silent.close()
    slowest = max(t for t, _ in first + later)
    print(f"\nsilent server: slowest {slowest * 1000:.0f} ms, "
          f"{sum(t > DEADLINE / 2 for t, _ in first)} paid the deadline")  # fmt: skip
    assert slowest < BOUND, slowest
    assert fleet.faults == 1
    assert max(t for t, _ in later) < DEADLINE / 2  # found down: nobody waits for it
    assert not any(placed for _, placed in first + later)


CALLER = """
import os, sys, time
import otel_tokens

otel_tokens.configure()
otel_tokens.instrument()
import openai

client = openai.OpenAI(base_url=os.environ["FAKE_LLM_URL"], api_key="k", max_retries=0)
took = []

def call():
    start = time.monotonic()
    with otel_tokens.agent("worker", tenant="acme", user="ann"):
        client.chat.completions.create(model="gpt-4o-mini", max_tokens=10, user="acme",
                                       messages=[{"role": "user", "content": "hello"}])
    took.append(time.monotonic() - start)

for _ in range(20):
    call()
print("warm", flush=True)
sys.stdin.readline()  # the database is stopped now
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    call()
print(f"calls={len(took) - 20} slowest={max(took[20:]):.3f}", flush=True)
"""


def test_an_instrumented_call_in_a_real_process_during_a_freeze(own_ledger_db, tenant_llm):
    """The real openai client in a process of its own under an enforced tenant budget, the
    database stopped for 15 s while it calls: every call made, none slower than the bound
    (before: the first call of the freeze took the whole of it); one fault line."""
    import subprocess
    import sys

    from ..process.conftest import clean_env
    from .test_budget import ROOT

    cluster, url = own_ledger_db
    env = clean_env(FAKE_LLM_URL=tenant_llm.url, OTEL_TOKENS_LEDGER_URL=url,
                    OTEL_TOKENS_BUDGET_ENFORCE="true", OTEL_TOKENS_TENANT_BUDGETS="*:usd=100",
                    OTEL_METRICS_EXPORTER="none", OTEL_TOKENS_EXIT_TIMEOUT="1")  # fmt: skip
    env["PYTHONPATH"] = ROOT  # this checkout's package
    env["OTEL_TOKENS_PROVIDER_URLS"] = f"{tenant_llm.url}=openai"
    worker = subprocess.Popen([sys.executable, "-c", CALLER, "14"], env=env, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)  # fmt: skip
    try:
        assert worker.stdout.readline().strip() == "warm"
        with frozen(cluster, 15.0):
            worker.stdin.write("go\n")
            worker.stdin.flush()
            out, err = worker.communicate(timeout=120)
    finally:
        worker.kill()
    assert worker.returncode == 0, err
    calls, slowest = re.search(r"calls=(\d+) slowest=(\S+)", out).groups()
    print(f"\nreal process, freeze: {calls} calls, slowest {float(slowest) * 1000:.0f} ms")
    assert float(slowest) < BOUND and int(calls) > 50, out
    assert err.count("otel_tokens: budget_fleet fault (") == 1, err
