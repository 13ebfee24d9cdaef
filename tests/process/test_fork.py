"""A program forking a multiprocessing Pool under the one-line set-up (the parent calls
before the fork; the workers run short tasks, which end before an export interval, and long
ones, which live past several), the pool ended by ``terminate()`` (``with Pool``: SIGTERM to
the workers) or by ``close()``/``join()`` (workers leave through ``os._exit``). Every call's
input tokens reach the collector exactly once: no child re-exports the parent's pre-fork
counts, each child has its own ``service.instance.id``, and none is lost at its end; on the
default ``/metrics`` the parent's port shows them all once."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from typing import Iterator

import pytest

from ..stuck import DUMP_SIGNAL, describe
from .conftest import APPS, clean_env, free_port, scraped_input, wait_for

ENDINGS = ("terminate", "close")


def _run(ending: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(APPS / "pool_app.py"), ending], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


@pytest.mark.parametrize("ending", ENDINGS)
def test_forked_pool_over_otlp_every_call_once(llm, collector, ending):
    env = clean_env(FAKE_LLM_URL=llm.url, OTEL_EXPORTER_OTLP_ENDPOINT=collector.url,
                    OTEL_METRIC_EXPORT_INTERVAL="300", LONG_TASK_SECONDS="1.5",
                    OTEL_TOKENS_EXIT_TIMEOUT="10")  # a loaded machine: exports may be slow
    proc = _run(ending, env)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    seen = json.loads(out.strip().splitlines()[-1])["seen"]
    assert seen == llm.input_total and llm.calls == 2 + 2 * 8
    assert collector.input_total() == llm.input_total, (collector.input_total(), llm.input_total)
    assert len(collector.instances()) >= 4  # the parent and its workers, each under its own id


@pytest.mark.parametrize("ending,slow", [(e, "") for e in ENDINGS] + [("terminate", "3")])
def test_forked_pool_on_the_parents_metrics_port_every_call_once(llm, tmp_path, ending, slow):
    """``slow``: each worker takes 3 s to leave its last metrics (a starved machine), longer
    than the exit deadline: a SIGTERM still waits for them, or the front loses the worker."""
    metrics = free_port()
    env = clean_env(FAKE_LLM_URL=llm.url, OTEL_TOKENS_PROMETHEUS_PORT=str(metrics), HOLD_SECONDS="30",
                    OTEL_TOKENS_PROMETHEUS_WORKERS_DIR=str(tmp_path / "workers"), LONG_TASK_SECONDS="1.5",
                    SLOW_FINAL_SECONDS=slow)  # fmt: skip
    proc = _run(ending, env)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 120)  # printed once the pool has ended
        if not ready:
            state = describe(proc.pid, DUMP_SIGNAL)
            proc.kill()
            pytest.fail(f"the pool did not end within 120 s:\n{state}\n{proc.communicate()[1]}")
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        assert json.loads(line)["seen"] == llm.input_total
        url = f"http://127.0.0.1:{metrics}/metrics"
        found = wait_for(lambda: scraped_input(url) == llm.input_total, 10)
        assert found, (scraped_input(url), llm.input_total, sorted(os.listdir(tmp_path / "workers")))
    finally:
        proc.kill()
        proc.wait()


def test_a_child_that_shut_down_its_telemetry_still_ends_on_sigterm(tmp_path):
    """A forked child that called ``shutdown()`` itself, then gets SIGTERM: it dies by it (the
    handler flushes nothing more and never swallows the signal)."""
    script = tmp_path / "child.py"
    script.write_text(
        "import os, sys, time\n"
        "import otel_tokens\n"
        "setup = otel_tokens.configure()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    setup.shutdown()\n"
        "    time.sleep(60)\n"
        "    os._exit(0)\n"
        "print(pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, str(script)], env=clean_env(), stdout=subprocess.PIPE, text=True)
    child = 0
    try:
        child = int(proc.stdout.readline())
        time.sleep(1.0)  # the child's shutdown() has run
        os.kill(child, signal.SIGTERM)
        assert wait_for(lambda: not _running(child), 10), "the child ignored SIGTERM"
    finally:
        if child and _running(child):
            os.kill(child, signal.SIGKILL)
        proc.kill()
        proc.wait()


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie, ended but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


_THREAD_MASKS = """
import json, multiprocessing, os, signal, threading
import otel_tokens
otel_tokens.configure(); otel_tokens.instrument()
import otel_tokens.registry  # noqa: F401  (its warm-up thread)
def masks(_=None):
    out = {}
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/status") as f:
            status = dict(line.split(":", 1) for line in f if ":" in line)
        blocked = int(status["SigBlk"].strip(), 16)
        out[status["Name"].strip() + "/" + tid] = [bool(blocked >> (s - 1) & 1) for s in (signal.SIGTERM, signal.SIGINT)]
    return {"main": out.pop("python/" + str(os.getpid()), None), "others": out}
with multiprocessing.get_context("fork").Pool(2) as pool:
    children = pool.map(masks, range(2))
print(json.dumps({"parent": masks(), "children": children}))
"""


@pytest.mark.parametrize("metrics", ["otlp", "prometheus"])
def test_no_thread_of_otel_tokens_takes_the_hosts_sigterm(collector, tmp_path, metrics):
    """The kernel gives a process's SIGTERM to any thread not blocking it, and Python acts on
    it only in the main thread: a pool worker waiting on its queue while an exporter thread
    took the signal never ended (``Pool.terminate()`` hung). Every thread otel_tokens and the
    SDK start, in the parent and in forked workers, blocks SIGTERM and SIGINT; the main
    thread does not."""
    if not os.path.isdir("/proc/self/task"):
        pytest.skip("needs /proc to read each thread's signal mask")
    env = clean_env(OTEL_EXPORTER_OTLP_ENDPOINT=collector.url)
    env["OTEL_TRACES_EXPORTER"] = "otlp"  # the span processor's thread too
    if metrics == "prometheus":  # the /metrics server, and in each worker its watcher
        env.update(OTEL_TOKENS_PROMETHEUS_PORT=str(free_port()),
                   OTEL_TOKENS_PROMETHEUS_WORKERS_DIR=str(tmp_path / "workers"))  # fmt: skip
    done = subprocess.run([sys.executable, "-c", _THREAD_MASKS], env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    for process in [seen["parent"], *seen["children"]]:
        assert process["main"] == [False, False], process
        assert len(process["others"]) >= 2, process  # the exporters' threads, or /metrics's
        assert all(blocked == [True, True] for blocked in process["others"].values()), process


_MISSED_SIGTERM = """
import multiprocessing, os, signal, sys, threading, time
import otel_tokens
otel_tokens.configure()
pid = os.fork()
if pid == 0:
    held = multiprocessing.Lock()
    held.acquire()
    def elsewhere():  # a SIGTERM the kernel hands to a thread that is not the main one
        time.sleep(0.5)
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
    threading.Thread(target=elsewhere, daemon=True).start()
    held.acquire()  # the main thread waits in C (sem_wait), as a Pool worker on its queue
    os._exit(3)
print(pid, flush=True)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status), flush=True)
"""


def test_a_sigterm_the_main_thread_missed_still_ends_the_child(tmp_path):
    """Python runs a signal handler only when the main thread next runs Python code: a SIGTERM
    taken in C by another thread (or just before the main thread blocks in C, as a Pool worker
    entering its queue's wait when ``terminate()`` signals it) left the child waiting for ever.
    otel_tokens' watcher sees it on Python's wakeup fd and interrupts the main thread."""
    with _forking(_MISSED_SIGTERM) as (proc, _child):
        assert wait_for(lambda: proc.poll() is not None, 20), "the child never acted on its SIGTERM"
        assert int(proc.stdout.readline()) == -signal.SIGTERM


@contextlib.contextmanager
def _forking(script: str) -> Iterator[tuple[subprocess.Popen, int]]:
    """Run ``script``, which prints the pid of the child it forks (then the child's exit
    code): (the process, the child); neither is left running after."""
    proc = subprocess.Popen([sys.executable, "-c", script], env=clean_env(), stdout=subprocess.PIPE,
                            text=True)  # fmt: skip
    child = int(proc.stdout.readline())
    try:
        yield proc, child
    finally:
        if _running(child):
            os.kill(child, signal.SIGKILL)
        proc.kill()
        proc.wait()


_SIGTERM_INSIDE_THE_EXIT_FLUSH = """
import os, sys, threading, time
import otel_tokens
setup = otel_tokens.configure()
pid = os.fork()
if pid == 0:
    class Slow(threading.Event):  # the flush's first lock held when the SIGTERM comes
        def set(self):
            with self._cond:
                print("inside", flush=True)
                time.sleep(2.0)
                self._flag = True
                self._cond.notify_all()
    object.__setattr__(setup, "_done", Slow())
    setup.shutdown()  # the child's own exit flush (a multiprocessing worker's finalizer)
    os._exit(3)
print(pid, flush=True)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status), flush=True)
"""


def test_a_sigterm_inside_the_exit_flush_ends_the_child_after_it():
    """A Pool worker's SIGTERM came while its own exit flush (a finalizer, on the main thread)
    held a lock the flush needs: the handler started a second flush that waited on that lock
    for ever, and every re-sent SIGTERM nested the handler again (``Pool.terminate()`` hung,
    caught in a stack dump). The handler now leaves the signal to the flush it interrupted,
    which delivers it when done, and is never entered twice."""
    with _forking(_SIGTERM_INSIDE_THE_EXIT_FLUSH) as (proc, child):
        assert proc.stdout.readline().strip() == "inside"
        os.kill(child, signal.SIGTERM)
        assert wait_for(lambda: proc.poll() is not None, 30), f"the child hung:\n{describe(child)}"
        assert int(proc.stdout.readline()) == -signal.SIGTERM
