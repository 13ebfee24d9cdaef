"""``otel-tokens run`` and ``opentelemetry-instrument`` on an unmodified agent script using the
real clients against recorded responses: spans and metrics arrive; the program's exit code,
signals, stdin and stdout are its own."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from otel_tokens.cli.demo import DATA

from .conftest import clean_env, command

AGENT = '''
import importlib, sys
DATA = {data!r}

def client_http(sdk, path, kind):
    base = importlib.import_module(sdk + "._base_client")
    http = importlib.import_module("httpx2" if hasattr(base, "httpx2") else "httpx")
    body = open(DATA + "/" + path, "rb").read()
    handler = lambda request: http.Response(200, headers={{"content-type": kind}}, content=body)
    return http.Client(transport=http.MockTransport(handler))

import openai, anthropic
oa = openai.OpenAI(api_key="x", max_retries=0,
                   http_client=client_http("openai", "openai/plan_1.json", "application/json"))
oa.chat.completions.create(model="gpt-4o", messages=[{{"role": "user", "content": "hi"}}])
an = anthropic.Anthropic(api_key="x", max_retries=0,
                         http_client=client_http("anthropic", "anthropic/code_1.json", "application/json"))
an.messages.create(model="claude-sonnet-4-5", max_tokens=100,
                   messages=[{{"role": "user", "content": "hi"}}])
line = sys.stdin.readline().strip()
print("AGENT-OUT", line, flush=True)
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
'''


@pytest.fixture
def agent_script(tmp_path) -> Path:
    path = tmp_path / "my_agent.py"
    path.write_text(AGENT.format(data=str(DATA)))
    return path


def console_spans(stdout: str) -> list[dict]:
    """The JSON objects the console exporters print (spans and metric batches)."""
    decoder = json.JSONDecoder()
    found, i = [], 0
    while True:
        i = stdout.find("{", i)
        if i < 0:
            return found
        try:
            obj, end = decoder.raw_decode(stdout, i)
        except ValueError:
            i += 1
            continue
        found.append(obj)
        i = end


def check_telemetry(stdout: str) -> None:
    objects = console_spans(stdout)
    spans = [o for o in objects if "attributes" in o and "context" in o]
    by_provider = {s["attributes"].get("gen_ai.provider.name"): s for s in spans}
    assert by_provider["openai"]["attributes"]["gen_ai.usage.input_tokens"] == 1312
    assert by_provider["anthropic"]["attributes"]["gen_ai.usage.input_tokens"] == 2448
    assert by_provider["anthropic"]["attributes"]["gen_ai.usage.cache_write.input_tokens"] == 2410
    metric_names = {m["name"] for o in objects if "resource_metrics" in o
                    for rm in o["resource_metrics"] for sm in rm["scope_metrics"]
                    for m in sm["metrics"]}
    assert "otel_tokens.tokens" in metric_names
    assert "gen_ai.client.token.usage" in metric_names or "otel_tokens.cost" in metric_names


CONSOLE = {"OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "console"}


def test_run_instruments_an_unmodified_script(agent_script):
    proc = subprocess.run([*command(), "run", "--", sys.executable, str(agent_script), "3"],
                          input="hello\n", capture_output=True, text=True, timeout=120,
                          env=clean_env(**CONSOLE))
    assert proc.returncode == 3, proc.stderr
    assert "AGENT-OUT hello" in proc.stdout
    check_telemetry(proc.stdout)


def test_opentelemetry_instrument_uses_the_entry_points(agent_script):
    # opentelemetry-instrument comes with opentelemetry-instrumentation, a dependency; with an
    # OpenTelemetry distro installed it configures the SDK, without one otel_tokens does
    tool = Path(sys.executable).parent / "opentelemetry-instrument"
    assert tool.exists()
    proc = subprocess.run([str(tool), sys.executable, str(agent_script)], input="zero-code\n",
                          capture_output=True, text=True, timeout=120, env=clean_env(**CONSOLE))
    assert proc.returncode == 0, proc.stderr
    assert "AGENT-OUT zero-code" in proc.stdout
    check_telemetry(proc.stdout)


def test_run_chains_an_existing_sitecustomize(agent_script, tmp_path):
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text("print('OWN-SITECUSTOMIZE', flush=True)\n")
    env = clean_env(**CONSOLE)
    env["PYTHONPATH"] = str(own)
    proc = subprocess.run([*command(), "run", "--", sys.executable, str(agent_script)],
                          input="x\n", capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "OWN-SITECUSTOMIZE" in proc.stdout
    check_telemetry(proc.stdout)


def test_run_passes_signals_through(tmp_path):
    script = tmp_path / "sleeper.py"
    script.write_text("import sys, time\nprint('ready', flush=True)\ntime.sleep(60)\n")
    proc = subprocess.Popen([*command(), "run", "--", sys.executable, str(script)],
                            stdout=subprocess.PIPE, text=True, env=clean_env())
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)  # same pid: the program replaced otel-tokens
        assert proc.wait(timeout=30) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_run_user_errors_are_one_line():
    cases = [(["run", "--", "no-such-program-xyz"], 127, "program not found"),
             (["run"], 2, "Missing argument"),
             (["run", "--"], 2, "Missing argument")]
    for args, code, text in cases:
        proc = subprocess.run([*command(), *args], capture_output=True, text=True,
                              env=clean_env(), timeout=60)
        assert proc.returncode == code, (args, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and text in lines[0], proc.stderr
