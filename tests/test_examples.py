"""The README's main-job command runs: the example finishes and prints the agent table."""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_quickstart_runs_and_prints_totals():
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "streaming: 14500 tokens (11.3% of context, estimate)" in out
    assert "completed: 14200 tokens (11.1% of context, actual)" in out
    assert "coder after rollback: 0 requests in the timeline, 3 in its lifetime" in out
    rows = [line.split() for line in out.splitlines()]
    lines = {row[0]: row for row in rows if len(row) == 5 and row[1].isdigit()}
    assert lines["planner"][1:] == ["2", "26200", "1540", "0.0632"]
    assert lines["coder"][1:] == ["3", "10500", "600", "0.0390"]
    # the at-exit summary: the one recorded call, priced (gpt-4o: 2.5 and 10 USD per million)
    summary = [line.split() for line in result.stderr.splitlines()]
    assert ["reviewer", "gpt-4o", "1", "0", "2,000", "500", "0.0100"] in summary, result.stderr
