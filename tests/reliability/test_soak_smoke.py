"""benchmarks/soak.py, small: run in a subprocess as by hand, totals exact, no thread or fd
growth. Nothing about time or memory is asserted here (the full run reports those)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SOAK = Path(__file__).resolve().parents[2] / "benchmarks" / "soak.py"


def test_soak_smoke():
    done = subprocess.run([sys.executable, str(SOAK), "--calls", "1200", "--every", "400", "--json"],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:] or done.stdout[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["calls"] == 1200
    assert summary["totals_exact"], summary["totals"]
    for name, agent in summary["totals"].items():
        assert agent["got"]["requests"] > 0, name
    assert summary["faults"] == {}
    assert summary["threads"]["end"] == summary["threads"]["start"]
    assert summary["os_threads"]["end"] == summary["os_threads"]["start"]
    assert summary["fds"]["end"] == summary["fds"]["start"]
    assert set(summary["rss_mb"]) == {"after_warmup", "400", "800", "1200"}
