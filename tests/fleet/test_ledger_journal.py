"""Rows outlive the process that recorded them: each row is journaled in the spool folder
before it is queued, so a bare ``os.fork()`` child ending with ``os._exit`` and a process
killed with SIGKILL (the database down) lose none; a later process of the host, or the parent,
writes them, each once. A journal that cannot be written is a fault, never the host's."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from ..process.conftest import wait_for
from .test_ledger import APPS, _finish, _totals, _workers, fleet_env


@pytest.mark.parametrize("parent_exit", ["normal", "_exit"])
def test_bare_fork_children_ending_with_os_exit_keep_their_rows(parent_exit, tenant_llm,
                                                                ledger_db, tmp_path):  # fmt: skip
    """4 bare fork children record 16 rows each and end with os._exit(0) at once: all 64 reach
    PostgreSQL, written by the parent (normal exit) or, when the parent ends with os._exit
    too, by the next process of the host."""
    spool = tmp_path / "spool"
    env = fleet_env(OTEL_TOKENS_LEDGER_URL=ledger_db, OTEL_TOKENS_LEDGER_SPOOL=str(spool),
                    OTEL_TOKENS_EXIT_TIMEOUT="5", CHILDREN="4", ROWS="16",
                    PARENT_EXIT=parent_exit)  # fmt: skip
    out = subprocess.run([sys.executable, str(APPS / "fork_exit_app.py")], env=env, check=False,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0 and "recorded" in out.stdout, out.stderr
    expected, tokens = 2 + 64, 1 + 64 * 10 + 100
    if parent_exit == "_exit":
        _finish(_workers(1, tenant_llm, ledger_db, spool, THREADS="1", CALLS="1"))
        expected, tokens = expected + 1, tokens + tenant_llm.input_total
    count, stored_tokens, _, ids, _ = _totals(ledger_db)
    assert (count, ids, stored_tokens) == (expected, expected, tokens)
    assert not list(spool.glob("*/*")), "no journal or spooled batch left"


def test_sigkill_with_the_database_down_loses_no_row(tenant_llm, own_ledger_db, tmp_path):
    """A process records 90 calls while the database is down and is killed (SIGKILL) at once:
    once the database is back, the next process of the host writes all 90, each once."""
    cluster, url = own_ledger_db
    spool = tmp_path / "spool"
    env = fleet_env(FAKE_LLM_URL=tenant_llm.url, OTEL_TOKENS_LEDGER_URL=url, THREADS="3",
                    CALLS="30", OTEL_TOKENS_LEDGER_SPOOL=str(spool), OTEL_METRICS_EXPORTER="none",
                    OTEL_TOKENS_PROVIDER_URLS=f"{tenant_llm.url}=openai")  # fmt: skip
    cluster.stop()
    try:
        proc = subprocess.Popen([sys.executable, str(APPS / "kill_app.py")], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)  # fmt: skip
        try:
            assert proc.stdout.readline().strip() == "recorded=90"
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=30)
    finally:
        cluster.start()
    assert proc.returncode == -signal.SIGKILL
    assert tenant_llm.calls == 90
    _finish(_workers(1, tenant_llm, url, spool, THREADS="1", CALLS="1"))
    count, tokens, tenants, ids, _ = _totals(url)
    assert (count, ids) == (91, 91)
    assert tokens == tenant_llm.input_total
    assert tenants == dict(tenant_llm.by_tenant)
    assert not list(spool.glob("*/*")), "no journal or spooled batch left"


def test_a_journal_that_cannot_be_written_is_a_fault_not_the_hosts(ledger_db, tmp_path):
    """The spool folder cannot be made (a file stands at its path): every put() returns, the
    journal failure is a counted ``ledger_fleet_journal`` fault, and the rows are still written
    to the database from memory."""
    from otel_tokens import faults
    from otel_tokens.account.ledger.postgres import FleetWriter
    from otel_tokens.account.ledger.spool import Spool
    from otel_tokens.usage import Usage

    (tmp_path / "file").write_text("")
    before = faults.sink().counts.get("ledger_fleet_journal", 0)
    writer = FleetWriter(ledger_db, Spool(tmp_path / "file" / "spool", 10**6), service="t")
    started = time.monotonic()
    for i in range(50):
        writer.put("a", f"r{i}", time.time(), Usage(input_tokens=1, output_tokens=1, model="m"),
                   0.1, 0, 0, None)  # fmt: skip
    assert time.monotonic() - started < 5
    assert writer.flush(15)
    assert wait_for(lambda: _totals(ledger_db)[0] == 50, timeout=15)
    assert writer._journal.failures >= 1
    assert faults.sink().counts["ledger_fleet_journal"] > before


def test_a_journal_left_by_an_earlier_process_with_this_pid_is_written(ledger_db, tmp_path):
    """A restarted container's process often gets the pid of the one before it: the journal
    and the claimed batch that one left (same pid, another process) are still written, once."""
    import json
    import os

    from otel_tokens.account.ledger.postgres import COLUMNS, FleetWriter
    from otel_tokens.account.ledger.spool import Spool
    from otel_tokens.usage import Usage

    spool = tmp_path / "spool"
    spool.mkdir()
    for i, name in enumerate((f"0001-1-aa.journal-{os.getpid()}.0badf00d",
                              f"0002-1-bb.claimed-{os.getpid()}")):  # fmt: skip
        row = dict.fromkeys(COLUMNS)
        row.update(row_id=f"00000000-0000-4000-8000-00000000000{i}", ledger="a", ts=1.0,
                   request_id=f"earlier-{i}", source="reported", active=1,
                   input_tokens=5)  # fmt: skip
        (spool / name).write_text(json.dumps(list(row.values())) + "\n")
    writer = FleetWriter(ledger_db, Spool(spool, 10**6), service="t")
    writer.put("a", "mine", time.time(), Usage(input_tokens=1, output_tokens=1, model="m"), 0.1,
               0, 0, None)  # fmt: skip
    assert writer.flush(15)
    assert _totals(ledger_db)[:2] == (3, 11)
    assert list(spool.iterdir()) == []
