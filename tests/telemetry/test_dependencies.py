"""Installed packages below otel_tokens' declared floors: one clear line, and the program runs.

The real case of the issue: the OpenTelemetry release of the old floors (API/SDK 1.27,
semantic conventions 0.48b0, without the GenAI names) put first on the program's path.
``configure()``, ``instrument()``, the entry-point instrumentor, ``otel-tokens run`` and
``otel-tokens check`` each meet it in a process of their own."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

from otel_tokens.dependencies import too_old

#: the OpenTelemetry release the old floors allowed (its packages move in lockstep)
OLD = ("opentelemetry-api==1.27.0", "opentelemetry-sdk==1.27.0",
       "opentelemetry-semantic-conventions==0.48b0", "opentelemetry-instrumentation==0.48b0")
LINE = re.compile(r"^otel_tokens is off, the program runs without it: .*"
                  r"opentelemetry-semantic-conventions 0\.48b0 \(needs >=[\d.b]+\).*; "
                  r"to turn it on: pip install "
                  r".*'opentelemetry-semantic-conventions>=[\d.b]+'")  # fmt: skip


def test_the_installed_packages_meet_the_floors():
    assert too_old() == []


@pytest.fixture(scope="module")
def old_semconv(tmp_path_factory) -> pathlib.Path:
    """A folder holding the old release (from pip's cache or the package index)."""
    folder = tmp_path_factory.mktemp("old-semconv")
    result = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet",
                             "--target", str(folder), *OLD],
                            capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    if result.returncode != 0:
        pytest.skip(f"cannot install {OLD} (no package index reachable?): "
                    f"{result.stderr[-300:]}")  # fmt: skip
    assert (folder / "opentelemetry" / "semconv").is_dir()
    return folder


def run(folder: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = os.pathsep.join([str(folder), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["OTEL_TOKENS_PROMETHEUS_PORT"] = "0"
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=120,
                          check=False)  # fmt: skip


PROGRAM = """
import json, otel_tokens
from importlib import metadata
from otel_tokens.entry_points import OpenAIInstrumentor
setup = otel_tokens.configure()
active = otel_tokens.instrument()
OpenAIInstrumentor().instrument()
print(json.dumps({"semconv": metadata.version("opentelemetry-semantic-conventions"),
                  "active": active, "metrics": setup.metrics, "own": setup.own_providers}))
"""


def test_the_one_line_set_up_says_one_line_and_the_program_runs(old_semconv):
    result = run(old_semconv, sys.executable, "-c", textwrap.dedent(PROGRAM))
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["semconv"] == "0.48b0"  # the old release is the one the program sees
    assert out["active"] == [] and out["own"] is False
    assert out["metrics"].startswith("nowhere (otel_tokens is off")
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and LINE.search(lines[0]), result.stderr


def test_otel_tokens_run_says_one_line_and_runs_the_program(old_semconv):
    cli = pathlib.Path(sys.executable).with_name("otel-tokens")
    result = run(old_semconv, str(cli), "run", "--", sys.executable, "-c",
                 "print('the program ran')")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "the program ran"
    assert len([line for line in result.stderr.splitlines() if LINE.search(line)]) == 1
    assert "Traceback" not in result.stderr


def test_otel_tokens_check_names_the_package_and_the_fix(old_semconv):
    cli = pathlib.Path(sys.executable).with_name("otel-tokens")
    result = run(old_semconv, str(cli), "check")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "opentelemetry-semantic-conventions 0.48b0: otel_tokens needs >=" in result.stdout
    assert re.search(r"otel_tokens is off: .*\(pip install .*'opentelemetry-semantic-conventions>=",
                     result.stderr)
