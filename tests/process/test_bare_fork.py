"""Children that end by ``os._exit()`` with nothing of theirs run before it: a bare
``os.fork()`` child calling ``os._exit(0)`` straight after its last call, and billiard's own
``Pool`` (``maxtasksperchild``, ``close()`` or ``terminate()``). Every call's input tokens
reach the collector, and the parent's ``/metrics`` port, exactly once; exit statuses are
unchanged (the app checks each child's)."""

from __future__ import annotations

import json
import select
import subprocess
import sys

import pytest

from .conftest import APPS, clean_env, free_port, scraped_input, wait_for

ENDINGS = ["bare", "billiard-close", "billiard-terminate"]


def _run(ending: str, env: dict[str, str]) -> subprocess.Popen:
    if ending.startswith("billiard"):
        pytest.importorskip("billiard", reason="the test extra installs Celery (and billiard)")
    return subprocess.Popen([sys.executable, str(APPS / "fork_app.py"), ending], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


@pytest.mark.parametrize("ending", ENDINGS)
def test_over_otlp_every_call_once(llm, collector, ending):
    env = clean_env(FAKE_LLM_URL=llm.url, OTEL_EXPORTER_OTLP_ENDPOINT=collector.url,
                    OTEL_METRIC_EXPORT_INTERVAL="300000",
                    OTEL_TOKENS_EXIT_TIMEOUT="10")  # fmt: skip
    proc = _run(ending, env)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert json.loads(out.strip().splitlines()[-1])["seen"] == llm.input_total
    got = collector.input_total()
    assert got == llm.input_total, (got, llm.input_total, err[-2000:])


@pytest.mark.parametrize("ending", ENDINGS)
def test_on_the_parents_metrics_port_every_call_once(llm, tmp_path, ending):
    port = free_port()
    env = clean_env(FAKE_LLM_URL=llm.url, OTEL_TOKENS_PROMETHEUS_PORT=str(port), HOLD_SECONDS="30",
                    OTEL_TOKENS_PROMETHEUS_WORKERS_DIR=str(tmp_path / "workers"))  # fmt: skip
    proc = _run(ending, env)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready, "the children did not end within 120 s"
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        assert json.loads(line)["seen"] == llm.input_total
        url = f"http://127.0.0.1:{port}/metrics"
        found = wait_for(lambda: scraped_input(url) == llm.input_total, 10)
        assert found, (scraped_input(url), llm.input_total)
    finally:
        proc.kill()
        proc.wait()
