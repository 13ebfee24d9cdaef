"""Shared helpers for the ops tests: repository paths and the promtool/prometheus binaries."""

from __future__ import annotations

import pathlib
import shutil

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
COLLECTOR = ROOT / "collector-config"
GRAFANA = ROOT / "grafana"
RULE_FILES = sorted((COLLECTOR / "rules").glob("*.yml"))
#: metrics the dashboards read before otel_tokens emits them: allowed by the name check, and
#: their panels may be empty while Prometheus has none of their series (none now)
PENDING: frozenset[str] = frozenset()


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (Debian: apt-get install prometheus; .ci/run does this)")
    return path


@pytest.fixture(scope="session")
def promtool() -> str:
    return _binary("promtool")


@pytest.fixture(scope="session")
def prometheus_bin() -> str:
    return _binary("prometheus")
