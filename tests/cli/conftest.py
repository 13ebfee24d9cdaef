"""Where the CLI samples live: the shared samples (read in place, never copied) and ours; the
telemetry, a folder of fake CLIs first on PATH, and the CLI instrumentation around a test."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from otel_tokens.entry_points import AgentCliInstrumentor
from tests.telemetry.conftest import Telemetry, handling

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "fixtures" / "cli"
OWN = ROOT / "tests" / "fixtures" / "cli"


@pytest.fixture
def shared() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"shared CLI samples not found at {SHARED}")
    return SHARED


def own(name: str) -> bytes:
    return (OWN / name).read_bytes()


@pytest.fixture
def telemetry() -> Telemetry:
    """A fresh handler on the in-memory SDK (as in tests/telemetry)."""
    with handling() as t:
        yield t


@pytest.fixture
def bin_dir(tmp_path, monkeypatch) -> Path:
    """An empty folder first on PATH, for the fake CLIs a test writes."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return folder


@contextmanager
def instrumenting() -> Iterator[None]:
    """The agent CLI instrumentation on for the block (settings read as they are then)."""
    instrumentor = AgentCliInstrumentor()
    instrumentor.instrument()
    try:
        yield
    finally:
        instrumentor.uninstrument()


@pytest.fixture
def instrumented(telemetry: Telemetry):
    """The telemetry, with the agent CLI instrumentation on for the test."""
    with instrumenting():
        yield telemetry
