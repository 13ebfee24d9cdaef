"""Multi-worker servers with the one-line set-up in the app module: gunicorn ``-w 3`` with and
without ``--preload`` (and workers restarted by ``--max-requests``), uvicorn ``--workers 2``.
After real requests through the real ``openai`` client to a fake LLM server, the default
``/metrics`` port shows every worker's input tokens exactly once (each series once, the sum
equal to what the server answered), and over OTLP the collector's last values add up to the
same, before and after the server stops."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import http.client
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from .conftest import APPS, clean_env, free_port, scraped_input, wait_for

BIN = os.path.dirname(sys.executable)
REQUESTS = 24


def _server(kind: str, port: int, workers: int, env: dict[str, str], *extra: str) -> subprocess.Popen:
    exe = os.path.join(BIN, kind)
    if not os.path.exists(exe):
        pytest.skip(f"{kind} is not installed in this environment (the test extra installs it)")
    if kind == "gunicorn":
        app = "llm_app:asgi" if "-k" in extra else "llm_app:wsgi"  # an ASGI worker class
        args = [exe, "-w", str(workers), "-b", f"127.0.0.1:{port}", "--graceful-timeout", "10",
                *extra, app]  # fmt: skip
    else:
        args = [exe, "--workers", str(workers), "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
                *extra, "llm_app:asgi"]  # fmt: skip
    return subprocess.Popen(args, cwd=APPS, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _ready(port: int) -> bool:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read()
        return True
    except OSError:
        return False


def _drive(proc: subprocess.Popen, port: int, requests: int) -> set[int]:
    assert wait_for(lambda: proc.poll() is not None or _ready(port), 60), "server did not start"
    assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
    def one(_: int) -> int:
        for attempt in range(6):  # a worker restarted by --max-requests may drop a connection
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30).read()
                return int(body.split(b'"pid": ')[1].rstrip(b"}"))
            except (ConnectionError, http.client.HTTPException, urllib.error.URLError):
                if attempt == 5:
                    raise
                time.sleep(0.2)
        raise AssertionError("unreachable")

    with ThreadPoolExecutor(4) as pool:  # in parallel: several workers serve
        return set(pool.map(one, range(requests - 1)))  # _ready made one


def _stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM if "gunicorn" in proc.args[0] else signal.SIGINT)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


CASES = [
    pytest.param("gunicorn", 3, (), id="gunicorn -w 3"),
    pytest.param("gunicorn", 3, ("--preload",), id="gunicorn -w 3 --preload"),
    pytest.param("gunicorn", 3, ("--max-requests", "5"), id="gunicorn -w 3, workers restarted"),
    pytest.param("uvicorn", 2, (), id="uvicorn --workers 2"),
]


@pytest.mark.parametrize(("kind", "workers", "extra"), CASES)
def test_one_scrape_of_the_port_shows_every_workers_usage_once(llm, tmp_path, kind, workers, extra):
    port, metrics = free_port(), free_port()
    env = clean_env(FAKE_LLM_URL=llm.url, OTEL_TOKENS_PROMETHEUS_PORT=str(metrics),
                    OTEL_TOKENS_PROMETHEUS_WORKERS_DIR=str(tmp_path / "workers"))  # fmt: skip
    proc = _server(kind, port, workers, env, *extra)
    try:
        pids = _drive(proc, port, REQUESTS)
        url = f"http://127.0.0.1:{metrics}/metrics"
        assert wait_for(lambda: scraped_input(url) == llm.input_total, 20), (scraped_input(url), llm.input_total)
        assert llm.calls >= REQUESTS and len(pids) >= 2, pids  # several workers served
    finally:
        _stop(proc)
        shutil.rmtree(tmp_path / "workers", ignore_errors=True)


@pytest.mark.parametrize(("kind", "workers", "extra"), CASES)
def test_over_otlp_every_workers_usage_arrives_once(llm, collector, tmp_path, kind, workers, extra):
    port = free_port()
    env = clean_env(FAKE_LLM_URL=llm.url, OTEL_EXPORTER_OTLP_ENDPOINT=collector.url,
                    OTEL_METRIC_EXPORT_INTERVAL="500")  # fmt: skip
    proc = _server(kind, port, workers, env, *extra)
    try:
        _drive(proc, port, REQUESTS)
        assert wait_for(lambda: collector.input_total() == llm.input_total, 20), (collector.input_total(), llm.input_total)
    finally:
        _stop(proc)
    assert collector.input_total() == llm.input_total  # what the workers sent at exit adds nothing twice


_ONE_PROCESS = """
import multiprocessing, os, sys, time
import openai, otel_tokens
otel_tokens.configure(); otel_tokens.instrument()
def call(_=None):
    with openai.OpenAI(base_url=os.environ["FAKE_LLM_URL"], api_key="k", max_retries=0) as client:
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
if sys.argv[1] == "shared":  # a worker of the port served a call and exited before the front
    with multiprocessing.get_context("fork").Pool(1) as pool:
        pool.map(call, [0])
for _ in range(int(sys.argv[2])):
    call()
print("done", flush=True)
time.sleep(float(sys.argv[3]))
"""


def test_a_front_that_exits_with_no_worker_left_is_served_by_the_next_process(llm, tmp_path):
    """The port's front exits after its workers did, with none registered at that moment
    (gunicorn respawning every worker at once): the next process to bind the port serves the
    exited front's and worker's last counts beside its own, each once. A process that served
    the port alone leaves nothing for the next one to show."""

    def run(port: int, folder: str, role: str, calls: int, hold: float) -> subprocess.Popen:
        env = clean_env(FAKE_LLM_URL=llm.url, OTEL_TOKENS_PROMETHEUS_PORT=str(port),
                        OTEL_TOKENS_PROMETHEUS_WORKERS_DIR=str(tmp_path / folder))  # fmt: skip
        proc = subprocess.Popen([sys.executable, "-c", _ONE_PROCESS, role, str(calls), str(hold)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        assert proc.stdout.readline().strip() == "done", proc.stderr.read()
        return proc

    shared = free_port()
    assert run(shared, "shared", "shared", 3, 0).wait(60) == 0
    assert llm.calls == 4
    later = run(shared, "shared", "alone", 2, 60)
    try:
        url = f"http://127.0.0.1:{shared}/metrics"
        assert wait_for(lambda: scraped_input(url) == llm.input_total, 10), (scraped_input(url), llm.input_total)
    finally:
        later.kill()
        later.wait()

    alone = free_port()
    assert run(alone, "alone", "alone", 1, 0).wait(60) == 0
    before = llm.input_total
    later = run(alone, "alone", "alone", 1, 60)
    try:
        url = f"http://127.0.0.1:{alone}/metrics"
        assert scraped_input(url) == llm.input_total - before  # its own call alone
    finally:
        later.kill()
        later.wait()


STOPS = [
    *(pytest.param(*case.values, signal.SIGTERM, id=f"{case.id}, SIGTERM") for case in CASES),
    pytest.param("uvicorn", 1, (), signal.SIGTERM, id="uvicorn single process, SIGTERM"),
    pytest.param(
        "gunicorn",
        2,
        ("-k", "uvicorn.workers.UvicornWorker"),
        signal.SIGTERM,
        id="gunicorn -w 2 -k UvicornWorker, SIGTERM",
    ),
    pytest.param("uvicorn", 2, (), signal.SIGINT, id="uvicorn --workers 2, SIGINT"),
    pytest.param("uvicorn", 1, (), signal.SIGINT, id="uvicorn single process, SIGINT"),
]


@pytest.mark.parametrize(("kind", "workers", "extra", "stop"), STOPS)
def test_a_stop_signal_sends_every_workers_last_usage(llm, collector, kind, workers, extra, stop):
    """A server stopped as Kubernetes stops it (SIGTERM to the main process, or SIGINT) with
    nothing exported before: every worker's usage reaches the collector at its exit, its spans
    once."""
    port = free_port()
    env = clean_env(FAKE_LLM_URL=llm.url, OTEL_EXPORTER_OTLP_ENDPOINT=collector.url,
                    OTEL_METRIC_EXPORT_INTERVAL="600000", OTEL_BSP_SCHEDULE_DELAY="600000")  # fmt: skip
    env["OTEL_TRACES_EXPORTER"] = "otlp"
    proc = _server(kind, port, workers, env, *extra)
    try:
        _drive(proc, port, REQUESTS)
        if "--max-requests" not in extra:  # restarted workers export at their own exit
            assert collector.input_total() == 0  # nothing sent before the stop
    finally:
        proc.send_signal(stop)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    sent = wait_for(lambda: collector.input_total() == llm.input_total, 10)
    assert sent, (collector.input_total(), llm.input_total)
    assert collector.spans == llm.calls  # one span a call: none lost, none sent twice
    # the exit status is as before: only a single uvicorn process dies by the SIGTERM it re-raises
    dies = (kind, workers, stop) == ("uvicorn", 1, signal.SIGTERM)
    assert proc.returncode == (-stop if dies else 0)


def test_a_sigterm_to_uvicorn_waits_no_longer_than_the_exit_timeout_for_a_silent_collector(llm):
    """The flush before uvicorn re-raises the signal is the exit flush: bounded by
    ``OTEL_TOKENS_EXIT_TIMEOUT`` when the collector accepts connections and never answers."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    port = free_port()
    address = f"http://127.0.0.1:{silent.getsockname()[1]}"
    env = clean_env(FAKE_LLM_URL=llm.url, OTEL_EXPORTER_OTLP_ENDPOINT=address,
                    OTEL_METRIC_EXPORT_INTERVAL="600000", OTEL_TOKENS_EXIT_TIMEOUT="1")  # fmt: skip
    proc = _server("uvicorn", port, 1, env)
    try:
        _drive(proc, port, 4)
        began = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == -signal.SIGTERM
        assert time.monotonic() - began < 10  # the exporter's own timeout is 10 s
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        silent.close()


def test_a_sigterm_to_uvicorn_prints_the_at_exit_table(llm):
    """``OTEL_TOKENS_SUMMARY_AT_EXIT``: a single uvicorn process stopped by SIGTERM prints its
    table before it dies by the signal, once."""
    port = free_port()
    env = clean_env(FAKE_LLM_URL=llm.url, OTEL_TOKENS_SUMMARY_AT_EXIT="1")
    proc = _server("uvicorn", port, 1, env)
    try:
        _drive(proc, port, 4)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGTERM
    assert err.decode().count("TOTAL") == 1, err.decode()
