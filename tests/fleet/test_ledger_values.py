"""No value stops the fleet ledger: a NUL or a lone surrogate in a user, tenant, agent or
conversation value (from a caller, or from a request's baggage header), a count past BIGINT, a
cost of inf, nan or 10**400 are stored (escaped, or NULL for a number) and the rest of the
batch with them; a row the database still refuses is set aside alone with a fault; a spooled
batch that cannot be read is moved aside, never replayed before every batch."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from .conftest import TenantLLM
from .test_ledger import APPS, _finish, _totals, _workers, fleet_env


def _rows(url: str, query: str) -> list[tuple]:
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute(query).fetchall()


def _writer(url: str, folder):  # type: ignore[no-untyped-def]
    from otel_tokens.account.ledger.postgres import FleetWriter
    from otel_tokens.account.ledger.spool import Spool

    return FleetWriter(url, Spool(folder, 10**7), service="t")


def _usage(tokens: object = 10, **fields: object) -> SimpleNamespace:
    """What the writer reads of a Usage, any value allowed (it must survive anything)."""
    usage = {"input_tokens": tokens, "output_tokens": 1, "cache_read_tokens": None,
             "cache_write_tokens": None, "reasoning_tokens": None, "premium_requests": None,
             "model": "m", "provider": None, "source": "reported"}
    return SimpleNamespace(**{**usage, **fields})


def test_escaped_texts_read_back_exactly():
    """stored_text holds no NUL and encodes to UTF-8; original_text gives every value back,
    including ones that already look like escapes; plain values are stored as they are."""
    from otel_tokens.account.ledger.postgres import original_text, stored_text

    assert stored_text("acme") == "acme" and stored_text("C:\\Users\\é") == "C:\\Users\\é"
    assert stored_text("evil\x00x") == "evil\\x00x"
    assert stored_text("t-\udcff") == "t-\\udcff"
    pieces = ["\\", "x", "0", "u", "d", "c", "8", "f", "\x00", "\udc80", "\ud83d", "a", "é"]
    rng = random.Random(44)
    for _ in range(20_000):
        value = "".join(rng.choice(pieces) for _ in range(rng.randrange(10)))
        stored = stored_text(value)
        assert "\x00" not in stored
        stored.encode("utf-8")
        assert original_text(stored) == value, repr(value)


def test_poisoned_values_from_real_calls_are_stored_and_block_nothing(
        tenant_llm: TenantLLM, ledger_db, tmp_path):  # fmt: skip
    """A process whose calls carry a NUL (baggage ``user.id=evil%00x``, an agent name, a
    conversation) and lone surrogates (a tenant from undecodable bytes): every row is stored,
    the values escaped and read back exactly; nothing is spooled, and the next process's rows
    are written too."""
    spool = tmp_path / "spool"
    env = fleet_env(FAKE_LLM_URL=tenant_llm.url, OTEL_TOKENS_LEDGER_URL=ledger_db, CALLS="12",
                    OTEL_TOKENS_LEDGER_SPOOL=str(spool), OTEL_METRICS_EXPORTER="none",
                    OTEL_TOKENS_EXIT_TIMEOUT="5",
                    OTEL_TOKENS_PROVIDER_URLS=f"{tenant_llm.url}=openai")  # fmt: skip
    out = subprocess.run([sys.executable, str(APPS / "poison_app.py")], env=env, check=False,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "calls=12" in out.stdout and "unreachable" not in out.stderr, out.stdout + out.stderr
    assert "ledger_fleet_value fault" in out.stderr, out.stderr
    rows = _rows(ledger_db, "SELECT ledger, user_id, tenant_id, conversation_id "
                            "FROM otel_tokens_requests")  # fmt: skip
    assert len(rows) == 12
    from otel_tokens.account.ledger.postgres import original_text

    originals = {tuple(None if v is None else original_text(v) for v in row) for row in rows}
    assert originals == {("plain", None, "t-plain", None),
                         ("plain", "evil\x00x", "t-baggage", None),
                         ("bot\x00x", "u\\x00", "t-\udcff\udcfe", "c\x00\udcff")}  # fmt: skip
    assert ("plain", "evil\\x00x", "t-baggage", None) in rows
    assert not list(spool.glob("*/*.rows")) and not list(spool.glob("*/*.failed"))

    _finish(_workers(1, tenant_llm, ledger_db, spool, THREADS="2", CALLS="5"))
    assert _totals(ledger_db)[0] == 22
    assert _totals(ledger_db)[1] == tenant_llm.input_total


@pytest.mark.parametrize("cost", [float("inf"), float("nan"), 10**400, "1.5", 1e308])
def test_a_poisoned_number_stops_no_batch(cost, ledger_db, tmp_path):
    """A cost of inf, nan, 10**400 (or not a number) and token counts past BIGINT (or not
    counts) in one row of a batch: every row is stored, those values NULL, the rest as given;
    1e308 is a finite float and kept."""
    writer = _writer(ledger_db, tmp_path / "spool")
    for i in range(4):
        writer.put("a", f"ok-{i}", time.time(), _usage(), 0.5, 0, 0, ("u", "t", None))
    writer.put("a", "poisoned", time.time(), _usage(), cost, 0, 0, ("u", "t", None))
    writer.put("a", "huge", time.time(), _usage(10**20, cache_read_tokens=True), 0.1, 0, 0, None)
    assert writer.flush(15)
    stored = dict(_rows(ledger_db, "SELECT request_id, cost_usd FROM otel_tokens_requests"))
    assert len(stored) == 6 and stored["ok-0"] == 0.5
    assert stored["poisoned"] == (1e308 if cost == 1e308 else None)
    assert _rows(ledger_db, "SELECT input_tokens, cache_read_tokens FROM otel_tokens_requests "
                            "WHERE request_id='huge'") == [(None, None)]  # fmt: skip
    assert writer.rejected == 0 and not list((tmp_path / "spool").glob("*.rows"))


def test_a_row_the_database_refuses_is_set_aside_alone(ledger_db, tmp_path):
    """A spooled batch holding rows no cleaning can save (a row id that is not a UUID, a row
    of the wrong width, a NULL timestamp), between good rows: the good ones are written, the
    bad ones set aside in a .failed file with a ``ledger_fleet_rejected`` fault, and the
    writer goes on writing new rows (the batch is not replayed before each of them)."""
    from otel_tokens import faults

    before = faults.sink().counts.get("ledger_fleet_rejected", 0)
    writer = _writer(ledger_db, tmp_path / "spool")
    good = [_spooled_row(f"00000000-0000-4000-8000-00000000000{i}", f"good-{i}") for i in range(3)]
    no_ts = _spooled_row("00000000-0000-4000-8000-0000000000ff", "no-ts")
    no_ts[3] = None
    bad = [_spooled_row("not-a-uuid", "bad-id"), _spooled_row(None, "short")[:-2], no_ts]
    (tmp_path / "spool").mkdir()
    batch = [good[0], bad[0], good[1], bad[1], bad[2], good[2]]
    text = "".join(json.dumps(row) + "\n" for row in batch)
    (tmp_path / "spool" / "00000000000000000001-1-aa.rows").write_text(text)
    for i in range(3):
        writer.put("a", f"new-{i}", time.time(), _usage(), 0.5, 0, 0, None)
    assert writer.flush(15)
    ids = sorted(r[0] for r in _rows(ledger_db, "SELECT request_id FROM otel_tokens_requests"))
    assert ids == ["good-0", "good-1", "good-2", "new-0", "new-1", "new-2"]
    failed = list((tmp_path / "spool").glob("*.failed"))
    assert sum(len(p.read_text().splitlines()) for p in failed) == 3
    assert not list((tmp_path / "spool").glob("*.rows"))
    assert writer.rejected == 3
    assert faults.sink().counts["ledger_fleet_rejected"] - before == 3

    writer.put("a", "later", time.time(), _usage(), 0.5, 0, 0, None)
    assert writer.flush(15) and len(_rows(ledger_db, "SELECT 1 FROM otel_tokens_requests")) == 7


def test_an_unreadable_spooled_batch_is_moved_aside(ledger_db, tmp_path):
    """A spooled batch that cannot be read (here a symlink planted in the folder, which is not
    followed) is renamed .failed with a fault, once; the writer's own rows are written."""
    spool = tmp_path / "spool"
    spool.mkdir()
    (tmp_path / "secret").write_text("[]\n")
    (spool / "00000000000000000001-1-aa.rows").symlink_to(tmp_path / "secret")
    writer = _writer(ledger_db, spool)
    writer.put("a", "mine", time.time(), _usage(), 0.5, 0, 0, None)
    assert writer.flush(15)
    assert [r[0] for r in _rows(ledger_db, "SELECT request_id FROM otel_tokens_requests")] == [
        "mine"]
    assert [p.name for p in spool.iterdir()] == ["00000000000000000001-1-aa.failed"]


def _spooled_row(row_id: str | None, request_id: str) -> list:
    """A row as a spool file holds it (COLUMNS order)."""
    return [row_id, "a", request_id, time.time(), "m", None, "reported", 10, 1, None, None, None,
            0.5, None, None, None, 1, None, None, None, "t", "h"]


def test_a_value_too_big_for_its_index_is_set_aside_alone(ledger_db, tmp_path):
    """A 10 kB tenant of random text (too big for the tenant index) among good rows: that row
    is set aside with a fault, kept exactly in the .failed file; a 1 MB user (no index) is
    stored; every other row is written."""
    import secrets

    writer = _writer(ledger_db, tmp_path / "spool")
    huge_tenant, huge_user = secrets.token_hex(5000), secrets.token_hex(500_000)
    for i, who in enumerate([("u", "t", None), ("u", huge_tenant, None), (huge_user, "t", None),
                             ("u", "t", None)]):  # fmt: skip
        writer.put("a", f"r{i}", time.time(), _usage(), 0.5, 0, 0, who)
    assert writer.flush(30)
    assert sorted(r[0] for r in _rows(ledger_db, "SELECT request_id FROM otel_tokens_requests")
                  ) == ["r0", "r2", "r3"]  # fmt: skip
    assert _rows(ledger_db, "SELECT length(user_id) FROM otel_tokens_requests "
                            "WHERE request_id='r2'") == [(1_000_000,)]  # fmt: skip
    failed = [json.loads(text) for p in (tmp_path / "spool").glob("*.failed")
              for text in p.read_text().splitlines()]  # fmt: skip
    assert [(row[2], row[18]) for row in failed] == [("r1", huge_tenant)]
    assert writer.rejected == 1
