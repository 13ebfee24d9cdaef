"""The fleet ledger through real processes: the real openai client against a fake LLM server,
every process writing one PostgreSQL database; the database stopped and started mid-run; the
spool of an unreachable database replayed; report totals equal to what the server answered."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ..process.conftest import clean_env, wait_for
from .conftest import TenantLLM

APPS = Path(__file__).resolve().parent / "apps"
ROOT_DIR = Path(__file__).resolve().parents[2]


def fleet_env(**extra: str) -> dict[str, str]:
    """A clean environment whose processes import this checkout's otel_tokens and the apps."""
    environ = clean_env(**extra)
    environ["PYTHONPATH"] = os.pathsep.join((str(APPS), str(ROOT_DIR)))
    return environ


def _workers(n: int, llm: TenantLLM, url: str, spool: Path, **env: str) -> list[subprocess.Popen]:
    environ = fleet_env(FAKE_LLM_URL=llm.url, OTEL_TOKENS_LEDGER_URL=url,
                        OTEL_TOKENS_LEDGER_SPOOL=str(spool), OTEL_METRICS_EXPORTER="none",
                        OTEL_TOKENS_EXIT_TIMEOUT="5", **env)  # fmt: skip
    # the fake server stands for OpenAI behind a private gateway: priced as OpenAI (a server
    # on 127.0.0.1 is otherwise self-hosted, recorded with no price)
    environ["OTEL_TOKENS_PROVIDER_URLS"] = f"{llm.url}=openai"
    return [subprocess.Popen([sys.executable, str(APPS / "fleet_app.py")], env={
        **environ, "OTEL_SERVICE_NAME": f"svc-{i}"}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True) for i in range(n)]  # fmt: skip


def _finish(workers: list[subprocess.Popen], timeout: float = 120) -> list[str]:
    outputs = []
    for worker in workers:
        out, err = worker.communicate(timeout=timeout)
        assert worker.returncode == 0, err
        outputs.append(out + err)
    return outputs


def _totals(url: str) -> tuple[int, int, dict[str, int], int, int]:
    import psycopg

    with psycopg.connect(url) as conn:
        count, tokens, ids, services = conn.execute(
            "SELECT COUNT(*), SUM(input_tokens), COUNT(DISTINCT row_id), COUNT(DISTINCT service) "
            "FROM otel_tokens_requests").fetchone()
        tenants = dict(conn.execute("SELECT tenant_id, SUM(input_tokens) FROM "
                                    "otel_tokens_requests GROUP BY tenant_id").fetchall())
    return count, tokens or 0, {k: int(v) for k, v in tenants.items()}, ids, services


def _report(url: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "otel_tokens.cli", "report", "--db", url,
                          "--json", *args], check=False, capture_output=True, text=True, timeout=60,
                         env=fleet_env())  # fmt: skip
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_four_processes_write_one_ledger(tenant_llm, ledger_db, tmp_path):
    """4 processes x 4 threads x 10 calls: every call a row, once; totals per tenant exact."""
    workers = _workers(4, tenant_llm, ledger_db, tmp_path / "spool", THREADS="4", CALLS="10")
    outputs = _finish(workers)
    assert all("calls=40" in out for out in outputs)
    assert tenant_llm.calls == 160
    count, tokens, tenants, ids, services = _totals(ledger_db)
    assert (count, ids, services) == (160, 160, 4)
    assert tokens == tenant_llm.input_total
    assert tenants == dict(tenant_llm.by_tenant)
    assert not list((tmp_path / "spool").glob("*/*")), "nothing spooled or left: database up"

    report = _report(ledger_db)
    assert report["totals"]["requests"] == 160
    assert report["totals"]["input_tokens"] == tenant_llm.input_total
    assert report["totals"]["output_tokens"] == 7 * 160
    by_tenant = _report(ledger_db, "--by", "tenant")["groups"]
    assert {k: g["input_tokens"] for k, g in by_tenant.items()} == dict(tenant_llm.by_tenant)
    assert {k: g["requests"] for k, g in by_tenant.items()} == dict(tenant_llm.calls_by_tenant)
    assert _report(ledger_db, "--since", "1h")["totals"]["requests"] == 160
    assert _report(ledger_db, "--since", "2999-01-01")["totals"]["requests"] == 0
    assert len(_report(ledger_db, "--top", "3")["top_requests"]) == 3
    assert {k: g["requests"] for k, g in _report(ledger_db, "--by", "agent")["groups"].items()} == {
        "worker": 160}
    assert list(_report(ledger_db, "--by", "model")["groups"]) == ["gpt-4o-mini"]
    by_service = _report(ledger_db, "--by", "service")["groups"]
    assert sorted(by_service) == [f"svc-{i}" for i in range(4)]
    assert all(g["requests"] == 40 for g in by_service.values())


def test_database_stopped_and_started_mid_run(tenant_llm, own_ledger_db, tmp_path):
    """The server goes down for ~2 s while 4 processes call: no call fails or waits on it,
    and every row reaches the database exactly once once it is back."""
    cluster, url = own_ledger_db
    workers = _workers(4, tenant_llm, url, tmp_path / "spool", THREADS="2", CALLS="40",
                       PAUSE="0.2")  # fmt: skip
    try:
        assert wait_for(lambda: tenant_llm.calls >= 60, timeout=60)
        cluster.stop()
        stopped_at = tenant_llm.calls
        time.sleep(2)
        answered_while_down = tenant_llm.calls - stopped_at
        cluster.start()
        back_at = tenant_llm.calls
    finally:
        outputs = _finish(workers)
    assert answered_while_down > 0, "the calls went on while the database was down"
    assert back_at < 300, "the database was back before the end of the run"
    assert all("calls=80" in out for out in outputs)
    spooled = sorted(p.name for p in (tmp_path / "spool").glob("*"))
    assert wait_for(lambda: _totals(url)[0] >= 320, timeout=30), (_totals(url), spooled, outputs)
    count, tokens, tenants, ids, _ = _totals(url)
    assert (count, ids) == (320, 320)
    assert tokens == tenant_llm.input_total
    assert tenants == dict(tenant_llm.by_tenant)


def test_spool_replayed_when_the_database_is_back(tenant_llm, own_ledger_db, tmp_path):
    """A process whose database is unreachable spools its rows and fails no call; the next
    process for that database, once it is back, replays them, each once."""
    cluster, ledger_db = own_ledger_db
    spool = tmp_path / "spool"
    cluster.stop()
    try:
        _finish(_workers(2, tenant_llm, ledger_db, spool, THREADS="3", CALLS="5"))
    finally:
        cluster.start()
    assert tenant_llm.calls == 30
    batches = list(spool.glob("*/*.rows"))
    assert batches
    assert sum(len(p.read_text().splitlines()) for p in batches) == 30
    assert not list(spool.glob("*/*.journal*")), "an exit leaves no journal behind"
    first_truth = tenant_llm.input_total

    _finish(_workers(1, tenant_llm, ledger_db, spool, THREADS="1", CALLS="1"))
    assert not list(spool.glob("*/*.rows")) and not list(spool.glob("*/*.claimed*"))
    count, tokens, _, ids, _ = _totals(ledger_db)
    assert (count, ids) == (31, 31)
    assert tokens == tenant_llm.input_total > first_truth


def test_a_retried_batch_is_stored_once(ledger_db, tmp_path):
    """A batch written again (a commit whose answer timed out, a spool replayed twice) adds
    nothing: rows are keyed by their own ids."""
    from otel_tokens.account.ledger.postgres import FleetWriter
    from otel_tokens.account.ledger.spool import Spool
    from otel_tokens.usage import Usage

    writer = FleetWriter(ledger_db, Spool(tmp_path, 10**6), service="t")
    for i in range(5):
        writer.put("a", None, time.time(), Usage(input_tokens=10 + i, output_tokens=1,
                                                 model="m", source="reported"), 0.5, 0, 0, None)
    writer.flush(10)
    rows = [list(r) for r in writer._queue]  # empty: all written
    assert rows == [] and writer.written == 5
    import psycopg

    with psycopg.connect(ledger_db) as conn:
        stored = conn.execute("SELECT * FROM otel_tokens_requests").fetchall()
        columns = [d.name for d in conn.execute("SELECT * FROM otel_tokens_requests LIMIT 0").description]
    again = [tuple(row[columns.index(c)] for c in writer_columns()) for row in stored]
    conn = writer._connection()
    writer._insert(conn, again)
    writer._insert(conn, again[:2])
    assert _totals(ledger_db)[0] == 5
    assert _totals(ledger_db)[1] == sum(10 + i for i in range(5))


def writer_columns() -> tuple[str, ...]:
    from otel_tokens.account.ledger.postgres import COLUMNS

    return COLUMNS


def test_schema_created_once_by_processes_starting_together(ledger_db):
    """Eight connections set the schema up at the same moment: no error, one version row."""
    from otel_tokens.account.ledger.postgres import connect
    from otel_tokens.account.pg_schema import SCHEMA_VERSION, ensure_schema

    errors = []

    def set_up() -> None:
        try:
            with connect(ledger_db) as conn:
                ensure_schema(conn)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=set_up) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    import psycopg

    with psycopg.connect(ledger_db) as conn:
        stored = conn.execute("SELECT value FROM otel_tokens_meta").fetchall()
    assert stored == [(str(SCHEMA_VERSION),)]


def test_a_forked_child_writes_its_own_rows_on_its_own_connection(ledger_db, tmp_path):
    environ = fleet_env(OTEL_TOKENS_LEDGER_URL=ledger_db, OTEL_TOKENS_EXIT_TIMEOUT="5",
                        OTEL_TOKENS_LEDGER_SPOOL=str(tmp_path / "spool"))  # fmt: skip
    out = subprocess.run([sys.executable, str(APPS / "fork_app.py")], env=environ, check=False,
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "fault" not in out.stderr, out.stderr
    count, tokens, _, ids, _ = _totals(ledger_db)
    assert (count, ids) == (15, 15)
    assert tokens == 5 * 1 + 7 * 10 + 3 * 100


def _roll(llm: TenantLLM, url: str, tmp_path: Path, **env: str) -> str:
    environ = fleet_env(FAKE_LLM_URL=llm.url, OTEL_TOKENS_LEDGER_URL=url, CALLS="10",
                        ROLL_TO="6", OTEL_TOKENS_LEDGER_SPOOL=str(tmp_path / "spool"),
                        OTEL_METRICS_EXPORTER="none", OTEL_TOKENS_EXIT_TIMEOUT="5",
                        OTEL_TOKENS_PROVIDER_URLS=f"{llm.url}=openai", **env)  # fmt: skip
    out = subprocess.run([sys.executable, str(APPS / "rollback_app.py")], env=environ,
                         check=False, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "removed=4 input=" + str(sum(100 + i for i in range(6, 10))) in out.stdout, out.stdout
    return out.stdout + out.stderr


@pytest.mark.parametrize("file", [False, True], ids=["memory", "sqlite"])
def test_a_rollback_shows_in_the_fleet_report(file, tenant_llm, ledger_db, tmp_path):
    """A process makes 10 calls and rolls its ledger back to the 6th: the fleet report counts
    the 6 kept (every row stays stored, the 4 undone ones inactive, as in SQLite), whether
    the ledger lives in memory or in a SQLite file it reads back first."""
    env = {"OTEL_TOKENS_LEDGER_PATH": str(tmp_path / "ledger.db")} if file else {}
    _roll(tenant_llm, ledger_db, tmp_path, **env)
    kept = [100 + i for i in range(6)]
    report = _report(ledger_db)
    assert report["totals"]["requests"] == 6
    assert report["totals"]["input_tokens"] == sum(kept)
    by_tenant = _report(ledger_db, "--by", "tenant")["groups"]
    assert {k: g["input_tokens"] for k, g in by_tenant.items()} == {
        "tenant-0": sum(kept[0::2]), "tenant-1": sum(kept[1::2])}
    import psycopg

    with psycopg.connect(ledger_db) as conn:
        assert conn.execute("SELECT active, COUNT(*) FROM otel_tokens_requests GROUP BY active "
                            "ORDER BY active").fetchall() == [(0, 4), (1, 6)]
        assert conn.execute("SELECT COUNT(*) FROM otel_tokens_rollbacks").fetchone() == (4,)
    if file:  # the SQLite file says the same
        sqlite = _report(str(tmp_path / "ledger.db"))
        assert sqlite["totals"]["input_tokens"] == sum(kept)


def test_a_rollback_while_the_database_is_down_is_replayed_once(tenant_llm, own_ledger_db,
                                                               tmp_path):
    """Rows and the rollback of a process whose database is down are spooled in order and
    replayed by the next process: the undone rows stored inactive, once."""
    cluster, ledger_db = own_ledger_db
    cluster.stop()
    try:
        out = _roll(tenant_llm, ledger_db, tmp_path)
    finally:
        cluster.start()
    assert "ledger_fleet fault" in out
    spool = tmp_path / "spool"
    lines = [line for p in sorted(spool.glob("*/*.rows")) for line in p.read_text().splitlines()]
    assert len(lines) == 11 and lines[-1].startswith('["rollback"')
    _finish(_workers(1, tenant_llm, ledger_db, spool, THREADS="1", CALLS="1"))
    assert not list(spool.glob("*/*.rows"))
    report = _report(ledger_db)
    assert report["totals"]["requests"] == 7
    assert report["totals"]["input_tokens"] == sum(100 + i for i in range(6)) + 110


def test_a_rollback_written_before_its_rows_still_undoes_them(ledger_db, tmp_path):
    """A rollback that reaches the database before the rows it undoes (another process
    replaying an older spool batch): the rows are stored inactive; applied twice, no change."""
    from otel_tokens.account.ledger.postgres import ROLLBACK, FleetWriter
    from otel_tokens.account.ledger.spool import Spool
    from otel_tokens.usage import Usage

    writer = FleetWriter(ledger_db, Spool(tmp_path, 10**6), service="t")
    conn = writer._connection()
    undo = (ROLLBACK, writer.host, "a", [["r1", 1.5], ["r2", 2.5]])
    writer._apply(conn, [undo])
    for i, ts in enumerate((1.5, 2.5, 3.5)):
        writer.put("a", f"r{i + 1}", ts, Usage(input_tokens=10, output_tokens=1, model="m"),
                   0.5, 0, 0, None)  # fmt: skip
    writer.flush(10)
    writer._apply(conn, [undo])
    import psycopg

    with psycopg.connect(ledger_db) as db:
        assert db.execute("SELECT request_id, active FROM otel_tokens_requests ORDER BY ts"
                          ).fetchall() == [("r1", 0), ("r2", 0), ("r3", 1)]
