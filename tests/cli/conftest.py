"""Where the CLI samples live: the shared samples (read in place, never copied) and ours."""

from __future__ import annotations

from pathlib import Path

import pytest

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
