"""A spool belongs to its database: rows spooled while database A was down are written into A
when it is back, never into B by a process of the host writing B. And the spool folder is used
only when it is a real folder of this user (a symlink planted at its path is not followed)."""

from __future__ import annotations

import os
import stat
import time

import pytest

from .conftest import new_database
from .test_ledger import _finish, _totals, _workers


def test_rows_spooled_for_one_database_never_land_in_another(tenant_llm, pg_server, tmp_path):
    """A process for database A (not there yet: it cannot be written) spools its rows; a
    process for B, with the same spool folder, writes only its own; once A exists, the next
    process for A writes A's spooled rows there, each once."""
    import psycopg

    spool = tmp_path / "spool"
    b_url = new_database(pg_server)
    a_name = f"otel_tokens_test_a_{os.getpid()}_{time.monotonic_ns()}"
    a_url = pg_server.rsplit("/", 1)[0] + "/" + a_name
    _finish(_workers(1, tenant_llm, a_url, spool, THREADS="2", CALLS="5"))
    assert sum(len(p.read_text().splitlines()) for p in spool.rglob("*.rows")) == 10
    _finish(_workers(1, tenant_llm, b_url, spool, THREADS="1", CALLS="3"))
    assert _totals(b_url)[0] == 3, "B holds its own rows only"
    assert sum(len(p.read_text().splitlines()) for p in spool.rglob("*.rows")) == 10

    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{a_name}"')
    _finish(_workers(1, tenant_llm, a_url, spool, THREADS="1", CALLS="1"))
    count, _, _, ids, _ = _totals(a_url)
    assert (count, ids) == (11, 11)
    assert _totals(b_url)[0] == 3
    assert not list(spool.rglob("*.rows"))


def test_a_database_is_named_by_user_host_port_and_name_only():
    """The spool folder of a URL: the same for spellings of one database (password, default
    port, host case, options), another for another user, host, port or database; never
    holding the password."""
    from otel_tokens.account.ledger.spool import database_folder, database_name

    same = ["postgresql://app:s3cret@DB.example:5432/ledger",
            "postgres://app@db.example/ledger?sslmode=require",
            "postgresql://app:other%40pw@db.example:5432/ledger?connect_timeout=2",
            "postgresql://x@other/ledger?host=db.example&user=app&port=5432"]  # fmt: skip
    assert {database_name(url) for url in same} == {"app@db.example:5432/ledger"}
    assert len({database_folder("/s", url) for url in same}) == 1
    others = ["postgresql://app@db.example:5432/ledger2", "postgresql://app2@db.example/ledger",
              "postgresql://app@db.example:5433/ledger", "postgresql://app@db2.example/ledger",
              "postgresql://app@h1:1,h2:2/ledger", "postgresql://app@[::1]/ledger"]  # fmt: skip
    folders = {database_folder("/s", url) for url in [same[0], *others]}
    assert len(folders) == 1 + len(others)
    assert all("s3cret" not in str(f) for f in folders)
    assert database_name("postgresql://app@[::1]/ledger") == "app@[::1]:5432/ledger"


def _down_writer(url: str, base):  # type: ignore[no-untyped-def]
    """The process's writer for ``url`` (unreachable) spooling in ``base``, as the host builds
    it, after 3 rows and a flush."""
    from otel_tokens.account.ledger.postgres import fleet_writer

    return fleet_writer(url, str(base), 10**6, 1000, "t", 10)


def _put_three(writer) -> None:  # type: ignore[no-untyped-def]
    from otel_tokens.usage import Usage

    for i in range(3):
        writer.put("a", f"r{i}", time.time(), Usage(input_tokens=1, output_tokens=1, model="m"),
                   0.1, 0, 0, None)  # fmt: skip
    writer.flush(10)


@pytest.mark.parametrize("planted", ["base", "database"])
def test_a_symlink_planted_at_the_spool_folder_is_not_followed(planted, tmp_path):
    """Another user's symlink at the spool folder's path (the base folder, or a database's
    folder in it): nothing is written where it points; the rows are counted lost with a fault;
    no call raises."""
    from otel_tokens import faults

    url = f"postgresql://postgres@127.0.0.1:1/symlink_{planted}_{time.monotonic_ns()}"
    target = tmp_path / "attacker"
    target.mkdir()
    base = tmp_path / "cache" / "ledger-spool"
    base.parent.mkdir()
    if planted == "base":
        base.symlink_to(target)
        writer = _down_writer(url, base)
    else:
        writer = _down_writer(url, base)
        base.mkdir()
        writer.spool.folder.symlink_to(target)
    before = faults.sink().counts.get("ledger_fleet_spool", 0)
    _put_three(writer)
    assert list(target.iterdir()) == [], "nothing written through the symlink"
    assert writer.lost == 3
    assert faults.sink().counts.get("ledger_fleet_spool", 0) > before


def test_the_spool_folder_is_made_private(tmp_path):
    """A new spool folder (and its database folder) is made 0o700; rows spooled there."""
    url = f"postgresql://postgres@127.0.0.1:1/private_{time.monotonic_ns()}"
    writer = _down_writer(url, tmp_path / "cache" / "ledger-spool")
    _put_three(writer)
    assert writer.lost == 0
    for folder in (tmp_path / "cache" / "ledger-spool", writer.spool.folder):
        assert stat.S_IMODE(os.lstat(folder).st_mode) == 0o700
    assert sum(len(p.read_text().splitlines()) for p in writer.spool.folder.glob("*.rows")) == 3


def test_a_batch_half_written_by_a_killed_process_is_cleared(tmp_path):
    """A process killed while writing a batch leaves its temporary file (its rows are still in
    its journal, replayed from there): the next look at the spool removes it; a living
    writer's is left alone."""
    import subprocess
    import sys

    from otel_tokens.account.ledger.spool import Spool

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    spool = Spool(tmp_path / "spool", 1 << 20)
    spool.usable(create=True)
    gone = spool.folder / f".{time.time_ns():020d}-{int(dead.stdout)}-0a1b2c3d.rows.tmp"
    living = spool.folder / f".{time.time_ns():020d}-{os.getppid()}-0a1b2c3d.rows.tmp"
    for path in (gone, living):
        path.write_bytes(b'["half a row"')
    assert not spool.pending()
    assert not gone.exists() and living.exists()
