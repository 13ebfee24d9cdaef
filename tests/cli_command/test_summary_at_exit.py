"""The at-exit summary (``OTEL_TOKENS_SUMMARY_AT_EXIT``, the ``otel-tokens run`` default when
telemetry has nowhere else to go): a real script making real openai calls against a local server
answering in OpenAI's shape prints, on stderr at its end, a table whose figures are the server's
truth; a forked child prints its own calls only; untrusted agent names are shown escaped."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
import threading
from collections import defaultdict
from pathlib import Path

import pytest

from otel_tokens.cli.report import shown
from otel_tokens.emit.cardinality import bounded_length

from ..local_server import LocalServer

ROOT = Path(__file__).resolve().parents[2]
PRICE = {"input": 1.5, "output": 6.0}  # USD per million tokens, from the test's price file

SCRIPT = r"""
import os, sys, multiprocessing, openai, otel_tokens
otel_tokens.configure()  # at the top: a spawned worker runs it too (importing this module)
otel_tokens.instrument()

def call(agent, model="summary-model"):
    client = openai.OpenAI(api_key="x", base_url=sys.argv[1], max_retries=0)  # per process
    with otel_tokens.agent(agent):
        try:
            client.chat.completions.create(model=model, messages=[{"role": "user", "content": agent}])
        except openai.RateLimitError:
            pass

EVIL = "evil\x00\x1b]0;owned\x07\x1b[2J" + "x" * 10_000

def work(i):
    call(EVIL if i == 0 else f"worker{i % 2}")
    return os.getpid()

def main(mode):
    if mode == "calls":
        for agent in ("planner", "planner", "coder", "planner"):
            call(agent)
        call("coder", model="refused-model")
        call(EVIL)
    elif mode == "fork":
        call("parent")
        call("parent")
        with multiprocessing.get_context("fork").Pool(1) as pool:
            pool.map(abs, [1, 2])  # a worker that makes no call
        pid = os.fork()
        if pid == 0:
            call("child")
            sys.exit(0)  # a normal exit: atexit runs in the child
        os.waitpid(pid, 0)
        if os.fork() == 0:
            sys.exit(0)  # a child that made no call
        os.wait()
    elif mode == "late":  # a child that makes its call after the parent has ended
        call("parent")
        r, w = os.pipe()
        if os.fork() == 0:
            os.close(w)
            os.read(r, 1)  # end of file: the parent has ended
            call("late")
            sys.exit(0)
        os.close(r)
    elif mode == "many":  # more agents than the table shows one by one
        for i in range(30):
            call(f"agent{i:02d}")
    elif mode == "recycled-pool":  # workers that end after one task each
        with multiprocessing.get_context("fork").Pool(2, maxtasksperchild=1) as pool:
            pool.map(work, range(1, 13), chunksize=1)
            pool.close()
            pool.join()
        left = os.environ["OTEL_TOKENS_SUMMARY_DIR"]
        print("files", sorted(n for n in os.listdir(left) if not n.endswith(".part")), flush=True)
    elif mode.endswith("-pool"):
        pools(multiprocessing.get_context(mode[: -len("-pool")]))
    print("script done", os.getpid(), flush=True)

def pools(context):
    # calls in the workers only: a pool that ends in terminate() (its workers SIGTERMed),
    # then one closed and joined (its workers end on their own)
    big, small = (3, 2) if context.get_start_method() == "fork" else (2, 1)  # spawn: slower
    with context.Pool(big) as pool:
        pids = pool.map(work, range(6), chunksize=1)
    pool = context.Pool(small)
    pids += pool.map(work, range(6, 10), chunksize=1)
    pool.close()
    pool.join()
    called, never = context.Queue(), context.Event()
    busy = context.Process(target=work_then_wait, args=(10, called, never))
    busy.start()
    pids.append(called.get())
    busy.terminate()  # SIGTERM, for certain while the worker waits
    busy.join()
    print("workers", len(set(pids)), "terminated", busy.exitcode, flush=True)

def work_then_wait(i, called, never):
    called.put(work(i))
    never.wait()

if __name__ == "__main__":
    main(sys.argv[2])
"""


class Truth:
    """A local OpenAI-shaped server: usage 100+n / 7+n per call; 429 for ``refused-model``;
    per agent (the message's content) and model what it answered."""

    def __init__(self) -> None:
        self.n = itertools.count()
        self.lock = threading.Lock()
        self.rows: dict = defaultdict(lambda: {"requests": 0, "failed": 0, "input": 0, "output": 0})
        self.server = LocalServer(self.answer)

    def answer(self, path: str, body: dict) -> tuple[int, str, bytes, dict[str, str]]:
        model, agent = body["model"], body["messages"][0]["content"]
        with self.lock:
            row = self.rows[(agent, model)]
            row["requests"] += 1
            if model == "refused-model":
                row["failed"] += 1
                error = {"error": {"message": "slow down", "type": "rate_limit_error"}}
                return 429, "application/json", json.dumps(error).encode(), {}
            n = next(self.n)
            row["input"] += 100 + n
            row["output"] += 7 + n
        usage = {"prompt_tokens": 100 + n, "completion_tokens": 7 + n, "total_tokens": 107 + 2 * n}
        payload = {"id": f"c{n}", "object": "chat.completion", "created": 0, "model": model,
                   "choices": [{"index": 0, "finish_reason": "stop",
                                "message": {"role": "assistant", "content": "hi"}}],
                   "usage": usage}  # fmt: skip
        return 200, "application/json", json.dumps(payload).encode(), {}


@pytest.fixture
def truth():
    server = Truth()
    yield server
    server.server.close()


def env(tmp_path: Path, url: str, **extra: str) -> dict[str, str]:
    prices = tmp_path / "prices.toml"
    prices.write_text(f'[models."summary-model"]\ninput = {PRICE["input"]}\n'
                      f'output = {PRICE["output"]}\n')  # fmt: skip
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("OTEL_", "COLUMNS", "LINES")) and k != "PYTHONPATH"}  # fmt: skip
    return {**base, "PYTHONPATH": str(ROOT), "OTEL_TRACES_EXPORTER": "none",
            "OTEL_TOKENS_PRICES_FILE": str(prices),
            "OTEL_TOKENS_PROVIDER_URLS": f"{url}=openai", **extra}  # fmt: skip


def run(tmp_path: Path, truth: Truth, mode: str, prefix: tuple[str, ...] = (),
        **extra: str) -> subprocess.CompletedProcess:  # fmt: skip
    script = tmp_path / "short_script.py"
    script.write_text(SCRIPT)
    url = truth.server.url + "/v1"
    temp = tmp_path / "temp"  # where the summary's directory is made
    temp.mkdir(exist_ok=True)
    done = subprocess.run([*prefix, sys.executable, str(script), url, mode], capture_output=True,
                          env=env(tmp_path, url, TMPDIR=str(temp), **extra), timeout=120,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert b"script done" in done.stdout
    assert list(temp.glob("otel_tokens-summary-*")) == []  # removed, also when nothing was left
    return done


ROW = re.compile(r"^\s*(\S+)\s+(\S+)\s+(\d+)\s+(\d+)\s+([\d,]+|-)\s+([\d,]+|-)\s+([\d.,]+|-)\s*$")


def tables(stderr: bytes) -> dict[int, dict[tuple[str, str], tuple]]:
    """Every printed table, by pid: (agent, model) -> (requests, failed, input, output, cost)."""
    found: dict[int, dict] = {}
    current = None
    for line in stderr.decode().splitlines():
        title = re.search(r"the calls of (?:this process \()?pid (\d+)", line)
        if title:
            current = found.setdefault(int(title.group(1)), {})
        elif current is not None and (m := ROW.match(line)) and m.group(1) != "TOTAL":
            figures = [None if v == "-" else v.replace(",", "") for v in m.groups()[2:]]
            current[(m.group(1), m.group(2))] = (int(figures[0]), int(figures[1]),
                                                 *(None if v is None else int(v) for v in figures[2:4]),
                                                 figures[4])  # fmt: skip
    return found


def expected(row: dict) -> tuple:
    if row["failed"] == row["requests"]:
        return row["requests"], row["failed"], None, None, None
    cost = (row["input"] * PRICE["input"] + row["output"] * PRICE["output"]) / 1e6
    return row["requests"], row["failed"], row["input"], row["output"], f"{cost:.4f}"


def test_a_short_script_prints_its_calls_at_exit_and_they_are_the_truth(tmp_path, truth):
    done = run(tmp_path, truth, "calls", OTEL_TOKENS_SUMMARY_AT_EXIT="1")
    printed = tables(done.stderr)
    assert len(printed) == 1, done.stderr.decode()
    rows = next(iter(printed.values()))
    for agent in ("planner", "coder"):
        assert rows[(agent, "summary-model")] == expected(truth.rows[(agent, "summary-model")])
    assert rows[("coder", "refused-model")] == (1, 1, None, None, None)
    # the untrusted name: shown escaped, never a terminal control sequence or a NUL
    assert b"\x1b" not in done.stderr and b"\x00" not in done.stderr and b"\x07" not in done.stderr
    shown = "".join(line[:23].strip() for line in done.stderr.decode().splitlines())  # folded
    assert '"evil\\x00\\x1b]0;owned\\x07\\x1b[2Jxxx' in shown
    assert "TOTAL" in done.stderr.decode()
    # no call made, or the summary not asked for: nothing printed
    assert run(tmp_path, truth, "none", OTEL_TOKENS_SUMMARY_AT_EXIT="1").stderr == b""
    assert tables(run(tmp_path, truth, "calls").stderr) == {}


MORE = re.compile(r"^\s*\((\d+) more\)\s+(\d+)\s+(\d+)\s+([\d,]+)\s+([\d,]+)\s+([\d.]+)\s*$",
                  re.MULTILINE)  # fmt: skip


def test_many_agents_show_the_costliest_and_the_rest_as_one_row(tmp_path, truth):
    """30 agents: the 19 costliest row by row, the other 11 summed in one "(11 more)" row,
    the total still every call's."""
    done = run(tmp_path, truth, "many", OTEL_TOKENS_SUMMARY_AT_EXIT="1")
    stderr = done.stderr.decode()
    rows = tables(done.stderr)[top_pid(done)]
    truths = {agent: row for (agent, _), row in truth.rows.items()}
    costliest = sorted(truths, key=lambda a: truths[a]["input"])[-19:]  # cost grows with n
    named = sorted(agent for agent, _ in rows if not agent.startswith("("))  # not "(11 more)"
    assert named == sorted(costliest), stderr
    rest = [truths[a] for a in truths if a not in costliest]
    inputs, outputs = sum(r["input"] for r in rest), sum(r["output"] for r in rest)
    cost = (inputs * PRICE["input"] + outputs * PRICE["output"]) / 1e6
    assert MORE.findall(stderr.replace(",", "")) == [("11", "11", "0", str(inputs), str(outputs),
                                                       f"{cost:.4f}")], stderr  # fmt: skip
    assert TOTAL.findall(stderr.replace(",", ""))[0][0] == "30"


def test_a_forked_child_prints_nothing_its_calls_are_in_the_parents_table(tmp_path, truth):
    done = run(tmp_path, truth, "fork", OTEL_TOKENS_SUMMARY_AT_EXIT="1")
    printed = tables(done.stderr)
    assert list(printed) == [top_pid(done)], done.stderr.decode()  # one table, the parent's
    assert f"pid {top_pid(done)} and 1 other process" in done.stderr.decode()
    rows = printed[top_pid(done)]
    assert set(rows) == {("parent", "summary-model"), ("child", "summary-model")}
    for agent in ("parent", "child"):
        assert rows[(agent, "summary-model")] == expected(truth.rows[(agent, "summary-model")])


def top_pid(done: subprocess.CompletedProcess) -> int:
    return int(done.stdout.split(b"script done ")[1].split()[0])


TOTAL = re.compile(r"^\s*TOTAL\s+(\d+)\s+(\d+)\s+([\d,]+)\s+([\d,]+)\s+([\d.]+)\s*$", re.MULTILINE)


@pytest.mark.parametrize("start", ["fork", "spawn", "forkserver"])
def test_one_table_at_exit_holds_every_pool_workers_calls(tmp_path, truth, start):
    """Calls made in workers only (a pool that ends in terminate(), one closed and joined, a
    process terminated while it waits), by each start method: the parent prints one table,
    their exact sum; the workers print none; the directory they left their rows in is gone."""
    if start == "spawn":  # under `otel-tokens run`, its default: set up before any import
        done = run(tmp_path, truth, "spawn-pool", prefix=otel_tokens_run())
    else:
        done = run(tmp_path, truth, f"{start}-pool", OTEL_TOKENS_SUMMARY_AT_EXIT="1")
    stderr = done.stderr.decode()
    printed = tables(done.stderr)
    assert list(printed) == [top_pid(done)], stderr
    assert len(re.findall("otel_tokens: the calls of", stderr)) == 1, stderr
    workers = int(done.stdout.split(b"workers ")[1].split()[0])
    assert b"terminated -15" in done.stdout  # the flush, then the signal as before
    assert f"pid {top_pid(done)} and {workers} other processes" in stderr
    rows = printed[top_pid(done)]
    for agent in ("worker0", "worker1"):
        assert rows[(agent, "summary-model")] == expected(truth.rows[(agent, "summary-model")])
    every = [row for row in truth.rows.values()]
    inputs, outputs = sum(r["input"] for r in every), sum(r["output"] for r in every)
    cost = (inputs * PRICE["input"] + outputs * PRICE["output"]) / 1e6
    assert TOTAL.findall(stderr.replace(",", "")) == [("11", "0", str(inputs), str(outputs),
                                                        f"{cost:.4f}")]  # fmt: skip
    # a worker's untrusted agent name came through its file intact, and is shown escaped
    assert "\x1b" not in stderr and "\x00" not in stderr and "\x07" not in stderr
    folded = "".join(line[:23].strip() for line in stderr.splitlines())
    evil = "evil\x00\x1b]0;owned\x07\x1b[2J" + "x" * 10_000
    assert shown(bounded_length(evil)) in folded, stderr  # as the worker itself recorded it


def test_a_child_still_running_at_the_parents_exit_is_not_waited_for_and_prints_its_own(
    tmp_path, truth
):
    done = run(tmp_path, truth, "late", OTEL_TOKENS_SUMMARY_AT_EXIT="1")
    printed = tables(done.stderr)
    assert len(printed) == 2, done.stderr.decode()
    late = next(pid for pid in printed if pid != top_pid(done))
    assert printed[top_pid(done)] == {("parent", "summary-model"): expected(
        truth.rows[("parent", "summary-model")])}  # fmt: skip
    late_row = expected(truth.rows[("late", "summary-model")])
    assert printed[late] == {("late", "summary-model"): late_row}


def test_a_file_that_is_not_a_workers_rows_is_reported_and_skipped(tmp_path):
    """The top process's merge: a worker's rows (untrusted names: NUL, escape sequence, lone
    surrogate, 10 kB) come back as they were; a file that is not rows is a fault, skipped;
    an unfinished write (``.part``) is not read."""
    from otel_tokens import faults
    from otel_tokens.emit import summary_dir

    figures = {"requests": 2, "failures": 1, "input_tokens": 10, "output_tokens": None,
               "cost_usd": 0.25}  # fmt: skip
    rows = {("a\x00\x1b[2J\ud800" + "x" * 10_000, "m"): figures, (None, "m"): dict(figures)}
    assert summary_dir.leave(str(tmp_path), rows)
    (tmp_path / "1-wrong.json").write_text('[["a", "m", {"requests": true}]]')
    (tmp_path / "2-garbage.json").write_bytes(b"\xff\x00{")
    (tmp_path / "3-unfinished.part").write_text("[")
    before = faults.sink().counts.get("internal", 0)
    merged: dict = {}
    assert summary_dir.gather(str(tmp_path), merged) == 1
    assert merged == rows
    assert faults.sink().counts.get("internal", 0) == before + 2


def test_workers_that_come_and_go_leave_one_file_and_each_is_counted_once(tmp_path, truth):
    """A pool whose workers each end after one task (as gunicorn's ``--max-requests``
    recycles them): 12 workers leave their rows, yet the directory holds the rows file and
    its lock only (it held one file per worker that had ended), and the table is their
    exact sum, each worker counted once although it leaves its rows on two exit paths."""
    done = run(tmp_path, truth, "recycled-pool", OTEL_TOKENS_SUMMARY_AT_EXIT="1")
    stderr = done.stderr.decode()
    assert b"files ['rows.json', 'rows.lock']" in done.stdout, done.stdout
    assert f"pid {top_pid(done)} and 12 other processes" in stderr, stderr
    rows = tables(done.stderr)[top_pid(done)]
    for agent in ("worker0", "worker1"):
        assert rows[(agent, "summary-model")] == expected(truth.rows[(agent, "summary-model")])


def test_a_directory_left_by_a_killed_program_is_removed_by_the_next(tmp_path, truth):
    """A top process killed before its end leaves its directory: the next program's top
    process on this host removes it (its process has ended); a running one's stays."""
    from otel_tokens.emit import summary_dir

    temp = tmp_path / "temp"
    temp.mkdir()
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, check=True)  # fmt: skip
    host = summary_dir._host()
    dead = temp / f"otel_tokens-summary-{int(ended.stdout)}@{host}-abc"
    alive = temp / f"otel_tokens-summary-{os.getpid()}@{host}-def"
    other_host = temp / f"otel_tokens-summary-{int(ended.stdout)}@elsewhere-ghi"
    for folder in (dead, alive, other_host):
        folder.mkdir(mode=0o700)
        (folder / "rows.json").write_text("[]")
    script = tmp_path / "short_script.py"
    script.write_text(SCRIPT)
    url = truth.server.url + "/v1"
    done = subprocess.run([sys.executable, str(script), url, "calls"], capture_output=True,
                          env=env(tmp_path, url, TMPDIR=str(temp), OTEL_TOKENS_SUMMARY_AT_EXIT="1"),
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    left = sorted(p.name for p in temp.glob("otel_tokens-summary-*"))
    assert left == sorted([alive.name, other_host.name])


def otel_tokens_run() -> tuple[str, ...]:
    return (sys.executable, "-m", "otel_tokens.cli", "run", "--")


def test_otel_tokens_run_prints_the_summary_when_telemetry_goes_nowhere_else(tmp_path, truth):
    done = run(tmp_path, truth, "calls", prefix=otel_tokens_run())
    rows = next(iter(tables(done.stderr).values()))
    assert rows[("planner", "summary-model")] == expected(truth.rows[("planner", "summary-model")])
    # a scrape port or an OTLP endpoint set: the telemetry shows there, no table
    scraped = run(
        tmp_path, truth, "calls", prefix=otel_tokens_run(), OTEL_TOKENS_PROMETHEUS_PORT="0"
    )
    assert tables(scraped.stderr) == {}
    exported = run(tmp_path, truth, "calls", prefix=otel_tokens_run(), OTEL_METRICS_EXPORTER="none",
                   OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9")  # fmt: skip
    assert tables(exported.stderr) == {}
