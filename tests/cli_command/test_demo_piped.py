"""``otel-tokens demo | cat``: on a pipe no figure is wrapped or cut, whatever width COLUMNS says
(progress lines wrapped between words at 80 columns, the tables at their fixed 80)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from .conftest import clean_env
from .test_demo import table_rows

ROOT = Path(__file__).resolve().parents[2]


def test_piped_demo_never_cuts_a_figure(scenario):
    env = clean_env(PYTHONPATH=str(ROOT), COLUMNS="40")  # a narrow terminal's setting, piped
    proc = subprocess.run([sys.executable, "-m", "otel_tokens.cli", "demo", "--delay", "0"],
                          capture_output=True, text=True, env=env, timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "…" not in proc.stdout
    lines = proc.stdout.splitlines()
    assert max(map(len, lines)) <= 80
    steps: list[str] = []  # each step, its continuation lines (indented by 4) joined to it
    for line in lines:
        if re.match(r"\[\d+/\d+\] ", line):
            steps.append(line)
        elif steps and re.match(r"    \S", line):
            steps[-1] += " " + line.strip()
    assert len(steps) == len(scenario["steps"])
    for step in steps:  # whole, wrapped between words only: its last figure ends it
        assert re.search(r"(\$\d+\.\d{4}|HTTP 429 rate_limit_exceeded)$", step), step
    rows = table_rows(proc.stdout)
    total = scenario["expected"]["total"]
    assert rows["TOTAL"]["input"] == total["input"] and rows["TOTAL"]["output"] == total["output"]
