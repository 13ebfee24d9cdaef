"""Real Celery: a prefork worker (``-c 2 --max-tasks-per-child=2``) on kombu's filesystem
broker (no server), the one-line set-up in the app module, one instrumented chat call per task
against the fake LLM. Its children end by ``--max-tasks-per-child``, then at a warm (SIGTERM)
or cold (SIGQUIT) shutdown; billiard ends each with ``os._exit()``, where neither ``atexit``
nor ``multiprocessing``'s finalizers run. Every call's input tokens reach the port's
``/metrics`` front and the OTLP collector exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from .conftest import APPS, clean_env, free_port, scraped_input, wait_for

pytest.importorskip("celery", reason="the test extra installs Celery")
BIN = os.path.dirname(sys.executable)
TASKS = 5  # an odd number: a child still holds a call when the worker shuts down
SHUTDOWN = {"warm": signal.SIGTERM, "cold": signal.SIGQUIT}
#: the process holding the /metrics port (the front), outliving the worker
HOLDER = ("import time, otel_tokens; otel_tokens.configure(); print('ready', flush=True); "
          "time.sleep(99)")
EXIT_STATUS = {"warm": 0, "cold": 0}  # Celery's own, without otel_tokens (measured)


def _worker(env: dict[str, str]) -> subprocess.Popen:
    args = [os.path.join(BIN, "celery"), "-A", "celery_app", "worker", "--pool=prefork", "-c", "2",
            "--max-tasks-per-child=2", "--without-gossip", "--without-mingle",
            "--without-heartbeat", "--loglevel=warning"]  # fmt: skip
    return subprocess.Popen(args, cwd=APPS, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip


def _send(env: dict[str, str], count: int) -> None:
    send = f"import celery_config; celery_config.send({count})"
    subprocess.run([sys.executable, "-c", send], cwd=APPS, env=env, check=True, timeout=60)


def _tasks_done(path: str) -> int:
    """How many tasks have returned from their call (each writes a line once it is recorded:
    a shutdown is tested between tasks, not inside a call)."""
    try:
        with open(path) as f:
            return len(f.readlines())
    except FileNotFoundError:
        return 0


def _run_tasks(llm, env: dict[str, str], shutdown: str, scrape: str = "") -> str:
    """Start the worker, run TASKS tasks (``scrape``: then read the /metrics front while it
    runs), then shut it down: its stderr."""
    _send(env, TASKS)  # queued before the worker starts: it takes them at once
    worker = _worker(env)
    try:
        done = os.path.join(env["CELERY_FOLDER"], "done")
        ran = wait_for(lambda: _tasks_done(done) >= TASKS or worker.poll() is not None, 60)
        assert ran, "the tasks were not run"
        assert worker.poll() is None and llm.calls == TASKS, worker.stderr.read()
        if scrape:  # while it runs: the ended children's last figures, the live ones'
            assert wait_for(lambda: scraped_input(scrape) == llm.input_total, 15), (
                scraped_input(scrape), llm.input_total)
        worker.send_signal(SHUTDOWN[shutdown])
        _, err = worker.communicate(timeout=60)
        assert worker.returncode == EXIT_STATUS[shutdown], (worker.returncode, err[-3000:])
        return err
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()


def _env(llm, tmp_path, **extra: str) -> dict[str, str]:  # type: ignore[no-untyped-def]
    (tmp_path / "broker").mkdir()
    return clean_env(FAKE_LLM_URL=llm.url, CELERY_FOLDER=str(tmp_path / "broker"), **extra)


@pytest.mark.parametrize("shutdown,start", [("warm", "fork"), ("cold", "fork"), ("warm", "spawn")])
def test_celery_prefork_over_otlp_every_call_once(llm, collector, tmp_path, shutdown, start):
    """``spawn``: ``worker_pool_start_method``, each child a new interpreter that imports the
    app (and sets itself up) as billiard starts it."""
    env = _env(llm, tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=collector.url, CELERY_START_METHOD=start,
               OTEL_METRIC_EXPORT_INTERVAL="300000", OTEL_TOKENS_EXIT_TIMEOUT="10")  # fmt: skip
    # each child's export is refused once and retried after a backoff (~1 s): a cold shutdown
    # ends the main process meanwhile, and Celery has its children SIGKILLed when it ends
    collector.refuse_first = True
    err = _run_tasks(llm, env, shutdown)
    # a cold shutdown leaves the children to end after the worker: each may take its whole
    # exit timeout (10 s) to export on a loaded machine
    assert wait_for(lambda: collector.input_total() == llm.input_total, 30), (
        collector.input_total(), llm.input_total, err[-3000:])
    assert len(collector.instances()) >= (TASKS + 1) // 2  # each child under its own id


@pytest.mark.parametrize("shutdown", list(SHUTDOWN))
def test_celery_prefork_on_the_metrics_front_every_call_once(llm, tmp_path, shutdown):
    """The port is held by another process of the host (the front, which outlives the
    worker): the worker's main process and its children are workers of it."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    env = _env(llm, tmp_path, OTEL_TOKENS_PROMETHEUS_PORT=str(port),
               OTEL_TOKENS_PROMETHEUS_WORKERS_DIR=str(tmp_path / "workers"))  # fmt: skip
    front = subprocess.Popen([sys.executable, "-c", HOLDER], env=env, stdout=subprocess.PIPE,
                             text=True)  # fmt: skip
    try:
        assert front.stdout.readline().strip() == "ready"
        err = _run_tasks(llm, env, shutdown, url)
        found = wait_for(lambda: scraped_input(url) == llm.input_total, 15)
        left = sorted(os.listdir(tmp_path / "workers"))
        assert found, (scraped_input(url), llm.input_total, left, err[-3000:])
    finally:
        front.kill()
        front.wait()
