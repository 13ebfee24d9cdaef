"""Bounded resources whatever the number of agents, and a ledger file complete at exit.

400 agents, each with its own ledger on one SQLite file, in a process limited to 256 file
descriptors: the host's own ``open()`` and ``socket()`` still work and otel_tokens holds a
handful. A process that recorded its calls and exited leaves a ``.db`` file that holds every
row alone (the write-ahead log folded in). A ledger restored from a large file reads its
totals by SQL aggregates and only its newest rows: the totals equal those of a full read."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest

from .conftest import clean_env

AGENTS = 400

WORKLOAD = """
import json, os, resource, socket, sys, tempfile
limit = int(sys.argv[2])
if limit:
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
import openai, otel_tokens
otel_tokens.configure(); otel_tokens.instrument()
client = openai.OpenAI(base_url=os.environ["FAKE_LLM_URL"], api_key="k", max_retries=0)
for i in range(int(sys.argv[1])):
    with otel_tokens.agent(f"agent-{i}"):
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
files = [open(os.devnull) for _ in range(20)]  # the host's own descriptors
sock = socket.socket()
print(json.dumps({"fds": len(os.listdir("/proc/self/fd")), "host_ok": True}))
"""


def _workload(llm, ledger, agents: int, limit: int) -> dict:
    env = clean_env(FAKE_LLM_URL=llm.url, OTEL_TOKENS_LEDGER_PATH=str(ledger), OTEL_METRICS_EXPORTER="none")
    out = subprocess.run([sys.executable, "-c", WORKLOAD, str(agents), str(limit)], env=env,
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_400_agents_under_a_256_descriptor_limit_leave_the_host_its_descriptors(llm, tmp_path):
    result = _workload(llm, tmp_path / "ledger.db", AGENTS, 256)
    assert result["host_ok"] and result["fds"] < 60, result  # the 20 files and socket included
    rows = sqlite3.connect(tmp_path / "ledger.db").execute(
        "SELECT COUNT(DISTINCT ledger), SUM(input_tokens) FROM otel_tokens_requests").fetchone()
    assert rows == (AGENTS, llm.input_total)


def test_the_ledger_file_alone_holds_every_row_after_exit(llm, tmp_path):
    _workload(llm, tmp_path / "ledger.db", 30, 0)
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(tmp_path / "ledger.db", copy / "ledger.db")  # the .db alone, no -wal or -shm
    rows = sqlite3.connect(copy / "ledger.db").execute(
        "SELECT COUNT(*), SUM(input_tokens) FROM otel_tokens_requests").fetchone()
    assert rows == (30, llm.input_total)
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), "otel-tokens"), "report",
                          "--db", str(copy / "ledger.db"), "--json"], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["totals"]["input_tokens"] == llm.input_total and len(report["agents"]) == 30


def test_a_restored_ledger_reads_its_totals_by_aggregate_and_only_its_newest_rows(tmp_path):
    from otel_tokens import UsageLedger
    from otel_tokens.usage import Usage

    path = tmp_path / "big.db"
    with UsageLedger("a", path=path) as ledger:
        for i in range(300):
            ledger.append(Usage(input_tokens=10 + i, output_tokens=i % 7, model=f"m{i % 3}"),
                          cost_usd=0.001 * (i % 5) if i % 4 else None)  # fmt: skip
        ledger.rollback_to_index(290)  # 10 rolled back: lifetime only
    full = UsageLedger("a", path=path)
    bounded = UsageLedger("a", path=path, max_history=25)
    try:
        assert bounded.cumulative == full.cumulative and bounded.lifetime == full.lifetime
        assert bounded.cost_by_model() == pytest.approx(full.cost_by_model())
        assert len(bounded) == 25 and bounded.evicted == 265 and len(full) == 290
        assert [r.input_tokens for r in bounded.recent(3)] == [r.input_tokens for r in full.recent(3)]
        bounded.append(Usage(input_tokens=5))
        assert bounded.cumulative.input_tokens == full.cumulative.input_tokens + 5
    finally:
        full.close()
        bounded.close()
