"""``otel-tokens report`` on a ledger in WAL mode that sits on a read-only filesystem (a backup
or snapshot volume): SQLite cannot create its shared-memory file there, so the report reads a
private copy, write-ahead log included, and leaves the original untouched.

The read-only volume is a real one: a read-only bind mount in a private mount namespace
(``unshare -m``), the report run inside it as a subprocess.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess

import pytest

from otel_tokens import Usage
from otel_tokens.account.ledger import UsageLedger

from .conftest import clean_env, command


def _read_only_mounts(source, target) -> str:
    """A shell prefix that mounts ``source`` read-only at ``target`` (or a skip saying why)."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed: no private read-only mount to test on")
    prefix = f"mount --bind {source} {target} && mount -o remount,bind,ro {target}"
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f"{prefix} && ! touch {target}/probe"],
                           capture_output=True, text=True, check=False)  # fmt: skip
    if probe.returncode != 0:
        pytest.skip(f"cannot make a read-only mount here (needs root): {probe.stderr.strip()[:200]}")
    return prefix


def _report(prefix: str, db) -> dict:
    inner = " ".join(shlex.quote(a) for a in [*command(), "report", "--db", str(db), "--json"])
    proc = subprocess.run(["unshare", "-m", "sh", "-c", f"{prefix} && {inner}"], capture_output=True,
                          text=True, env=clean_env(), timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_report_reads_a_wal_ledger_on_a_read_only_volume(tmp_path):
    source, mount = tmp_path / "volume", tmp_path / "ro"
    source.mkdir()
    mount.mkdir()
    prefix = _read_only_mounts(source, mount)
    ledger = UsageLedger("bot", path=source / "u.db")
    ledger.append(Usage(input_tokens=1000, output_tokens=50, model="gpt-4o", provider="openai"), cost_usd=0.003)
    ledger.flush()
    ledger.close()
    data = _report(prefix, mount / "u.db")
    assert data["totals"]["requests"] == 1 and data["totals"]["input_tokens"] == 1000
    assert sorted(p.name for p in source.iterdir()) == ["u.db"]  # nothing written beside it


def test_rows_still_in_the_write_ahead_log_count(tmp_path):
    """A snapshot taken while a process was writing: some rows are only in ``u.db-wal``."""
    live, source, mount = tmp_path / "live", tmp_path / "volume", tmp_path / "ro"
    for folder in (live, source, mount):
        folder.mkdir()
    prefix = _read_only_mounts(source, mount)
    ledger = UsageLedger("bot", path=live / "u.db")
    for _ in range(3):
        ledger.append(Usage(input_tokens=500, output_tokens=20, model="gpt-4o", provider="openai"), cost_usd=0.001)
    ledger.flush()
    assert (live / "u.db-wal").stat().st_size > 0  # the rows are not checkpointed yet
    for name in ("u.db", "u.db-wal"):
        shutil.copyfile(live / name, source / name)  # the snapshot
    ledger.close()
    data = _report(prefix, mount / "u.db")
    assert data["totals"]["requests"] == 3 and data["totals"]["input_tokens"] == 1500
