"""Helpers: the ``otel-tokens`` command as a subprocess, the scenario's known usage."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from otel_tokens.cli.demo import DATA

SCRIPT = Path(sys.executable).parent / "otel-tokens"


def command() -> list[str]:
    """The installed console script, else ``python -m otel_tokens.cli``."""
    return [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "otel_tokens.cli"]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "COLUMNS", "LINES")) and k != "PYTHONPATH"}
    env["OTEL_TOKENS_PROMETHEUS_PORT"] = "0"
    env.update(extra)
    return env


def otel_tokens(*args: str, env: dict[str, str] | None = None, timeout: float = 120,
                **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*command(), *args], capture_output=True, text=True,
                          env=clean_env() if env is None else env, timeout=timeout, **kw)


@pytest.fixture(scope="session")
def scenario() -> dict:
    return json.loads((DATA / "scenario.json").read_text())
