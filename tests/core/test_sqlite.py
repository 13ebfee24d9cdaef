"""SQLite persistence: round trip, restart, rollbacks, corrupt and locked files, SIGKILL."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from otel_tokens import LedgerPersistenceError, Usage, UsageLedger


def u(inp, out=1, **kw):
    return Usage(input_tokens=inp, output_tokens=out, **kw)


def test_round_trip_restores_history_and_totals(tmp_path):
    db = tmp_path / "ledger.sqlite3"
    with UsageLedger("planner", path=db) as led:
        led.append(u(100, 10, cache_read_tokens=40, model="gpt-4o", provider="openai",
                     premium_requests=0.5), cost_usd=0.25, request_id="a",
                   trace_id=0xABC, span_id=0xDEF)  # fmt: skip
        led.append(u(200, None, source="parsed_text"), request_id="b", timestamp=1234.5)
        before = [r.to_dict() for r in led.history()]
        cumulative, lifetime = led.cumulative, led.lifetime
    with UsageLedger("planner", path=db) as again:
        assert [r.to_dict() for r in again.history()] == before
        assert again.cumulative == cumulative and again.lifetime == lifetime
        assert again.cost_by_model() == {"gpt-4o": 0.25}
    with UsageLedger("coder", path=db) as other:  # another agent in the same file
        assert len(other) == 0 and other.lifetime.requests == 0


def test_rollbacks_persist_and_lifetime_is_restored(tmp_path):
    db = tmp_path / "ledger.sqlite3"
    with UsageLedger(path=db) as led:
        for n in range(5):
            led.append(u(n + 1), request_id=f"r{n}")
        led.rollback_to_index(3)
        led.append(u(100), request_id="late")
    with UsageLedger(path=db) as again:
        assert [r.request_id for r in again.history()] == ["r0", "r1", "r2", "late"]
        assert again.cumulative.input_tokens == 106
        assert again.lifetime.input_tokens == 115  # the rolled-back 4 and 5 still count here
        assert again.lifetime.requests == 6
        again.rollback_to_request_id("r1")  # rows loaded from the file roll back too
    with UsageLedger(path=db) as third:
        assert [r.request_id for r in third.history()] == ["r0"]
        assert third.lifetime.input_tokens == 115


def test_bounded_history_on_open_keeps_totals(tmp_path):
    db = tmp_path / "ledger.sqlite3"
    with UsageLedger(path=db) as led:
        for n in range(10):
            led.append(u(n), timestamp=float(n))
    with UsageLedger(path=db, max_history=3) as small:
        assert len(small) == 3 and small.evicted == 7
        assert small.cumulative.input_tokens == 45


def test_corrupt_file_is_a_clear_error(tmp_path):
    db = tmp_path / "ledger.sqlite3"
    db.write_bytes(b"this is not a database, it is a text file\n" * 100)
    with pytest.raises(LedgerPersistenceError) as info:
        UsageLedger(path=db)
    assert str(db) in str(info.value)
    assert "not an SQLite database" in str(info.value)


def test_foreign_schema_version_is_a_clear_error(tmp_path):
    db = tmp_path / "ledger.sqlite3"
    UsageLedger(path=db).close()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE otel_tokens_meta SET value='99' WHERE key='schema_version'")
    with pytest.raises(LedgerPersistenceError, match="schema version 99"):
        UsageLedger(path=db)


def test_locked_file_keeps_the_record_and_writes_it_later(tmp_path):
    db = tmp_path / "ledger.sqlite3"
    led = UsageLedger(path=db, busy_timeout=0.05)
    led.append(u(1), request_id="before")
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    with pytest.raises(LedgerPersistenceError, match="locked"):
        led.append(u(2), request_id="during")
    assert [r.request_id for r in led.history()] == ["before", "during"]
    assert led.pending_writes == 1
    with pytest.raises(LedgerPersistenceError):
        led.rollback_to_request_id("before")  # queued too, while the lock is held
    blocker.execute("ROLLBACK")
    blocker.close()
    led.append(u(3), request_id="after")
    assert led.pending_writes == 0
    led.close()
    with UsageLedger(path=db) as again:
        assert [r.request_id for r in again.history()] == ["after"]
        assert again.lifetime.input_tokens == 6


def test_unwritable_location_is_a_clear_error(tmp_path):
    with pytest.raises(LedgerPersistenceError, match="cannot open"):
        UsageLedger(path=tmp_path / "missing-dir" / "ledger.sqlite3")


_WRITER = textwrap.dedent(
    """
    import sys
    from otel_tokens import Usage, UsageLedger
    led = UsageLedger("killed", path=sys.argv[1])
    n = 0
    while True:
        led.append(Usage(input_tokens=n, output_tokens=1), request_id=f"r{n}")
        sys.stdout.write(f"{n}\\n")
        sys.stdout.flush()
        n += 1
    """
)


def test_sigkill_while_appending_loses_no_committed_record(tmp_path):
    db = tmp_path / "ledger.sqlite3"
    child = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(db)], stdout=subprocess.PIPE, text=True
    )
    acknowledged = -1
    deadline = time.monotonic() + 60
    assert child.stdout is not None
    while acknowledged < 300 and time.monotonic() < deadline:
        line = child.stdout.readline()
        if not line:
            break
        acknowledged = int(line)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert child.returncode == -signal.SIGKILL
    assert acknowledged >= 300, "the writer did not get going"
    with UsageLedger("killed", path=db) as led:
        ids = [r.request_id for r in led.history()]
    # every append that returned is there, in order, with nothing missing in between
    assert len(ids) >= acknowledged + 1
    assert ids == [f"r{n}" for n in range(len(ids))]
