"""``otel-tokens demo`` as a user runs it: a subprocess whose totals equal the known usage."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from otel_tokens.cli.demo import DATA

from ..stuck import describe
from .conftest import clean_env, command, otel_tokens

COLUMNS = ["requests", "failed", "input", "cache_read", "cache_write", "output", "reasoning",
           "total"]
MONEY = ["cost", "premium"]


def table_rows(stdout: str) -> dict[str, dict[str, float | None]]:
    """The two tables' rows: tokens per agent, then cost and context per agent."""
    rows: dict[str, dict[str, float | None]] = {}
    for line in stdout.splitlines():
        cells = line.split()
        if not cells or cells[0] not in ("planner", "coder", "TOTAL"):
            continue
        numbers = [None if c == "-" else float(c.replace(",", "")) for c in cells[1:] if "%" not in c]
        columns = COLUMNS if cells[0] not in rows else MONEY
        rows.setdefault(cells[0], {}).update(zip(columns, numbers))
    return rows


def check_row(row, expected) -> None:
    assert row["requests"] == expected["requests"]
    assert row["failed"] == expected["failed"]
    for key in ("input", "output", "cache_read", "cache_write"):
        assert (row[key] or 0) == expected[key], key
    assert row["total"] == expected["input"] + expected["output"]
    assert (row["premium"] or 0) == expected["premium_requests"]
    assert row["cost"] and row["cost"] > 0


def test_demo_prints_the_table_and_totals_equal_the_scenario(scenario, tmp_path):
    db = tmp_path / "demo.db"
    proc = otel_tokens("demo", "--delay", "0", "--ledger", str(db))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    rows = table_rows(proc.stdout)
    expected = scenario["expected"]
    assert set(rows) == {"planner", "coder", "TOTAL"}
    for agent, figures in expected["agents"].items():
        check_row(rows[agent], figures)
    check_row(rows["TOTAL"], expected["total"])
    assert "anomaly: coder budget_exceeded" in proc.stdout
    assert "failed: HTTP 429 rate_limit_exceeded" in " ".join(proc.stdout.split())
    assert re.search(r"metrics -> prometheus http://127\.0\.0\.1:\d+/metrics", proc.stdout)
    # the context column is the Display Invariant: last reported input / window
    last_input = {"planner": 1768, "coder": 6372}
    for agent, tokens in last_input.items():
        pct = tokens * 100 / scenario["agents"][agent]["max_input_tokens"]
        line = [l for l in proc.stdout.splitlines() if l.strip().startswith(agent)][1]  # 2nd table
        assert f"{pct:.1f}%" in line
    # the persisted ledger holds the same figures
    report = json.loads(otel_tokens("report", "--db", str(db), "--json").stdout)
    # every call has its ledger row, the failed ones too (their tokens unknown), counted apart
    assert report["totals"]["requests"] == expected["total"]["requests"]
    assert report["totals"]["failed"] == expected["total"]["failed"]
    assert report["totals"]["input_tokens"] == expected["total"]["input"]
    assert report["totals"]["output_tokens"] == expected["total"]["output"]
    assert abs(report["totals"]["cost_usd"] - rows["TOTAL"]["cost"]) < 1e-4


def test_demo_json_figures(scenario):
    proc = otel_tokens("demo", "--delay", "0", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout[proc.stdout.index("{\n"):])
    for agent, figures in scenario["expected"]["agents"].items():
        got = data["agents"][agent]
        assert got["input_tokens"] == figures["input"]
        assert got["output_tokens"] == figures["output"]
        assert got["cache_read_tokens"] == figures["cache_read"]
        assert (got["cache_write_tokens"] or 0) == figures["cache_write"]
        assert got["estimated_calls"] >= 1 if agent == "planner" else True
        assert got["context_is_estimate"] is False


def test_scenario_usage_is_what_the_recorded_responses_say(scenario):
    """The known usage in scenario.json is the responses' own (no figure typed twice)."""
    for step in scenario["steps"]:
        usage = step["usage"]
        if "cli" in step:
            metrics = json.loads((DATA / "copilot" / "usage.json").read_text())["modelMetrics"]
            u = next(iter(metrics.values()))["usage"]
            assert (u["inputTokens"], u["outputTokens"], u["cacheReadTokens"]) == (
                usage["input"], usage["output"], usage["cache_read"])
            continue
        text = (DATA / step["response"]).read_text()
        if usage is None:
            assert step["status"] >= 400
            continue
        if step["provider"] == "openai":
            if text.startswith("data:"):
                chunks = [json.loads(l[6:]) for l in text.splitlines()
                          if l.startswith("data: {")]
                u = [c["usage"] for c in chunks if c.get("usage")][-1]
            else:
                u = json.loads(text)["usage"]
            assert (u["prompt_tokens"], u["completion_tokens"],
                    u["prompt_tokens_details"]["cached_tokens"]) == (
                usage["input"], usage["output"], usage["cache_read"])
        else:
            if text.startswith("event:"):
                events = [json.loads(l[6:]) for l in text.splitlines() if l.startswith("data: ")]
                u = dict(events[0]["message"]["usage"])
                u["output_tokens"] = [e for e in events if e["type"] == "message_delta"][-1][
                    "usage"]["output_tokens"]
            else:
                u = json.loads(text)["usage"]
            fresh, write, read = (u["input_tokens"], u["cache_creation_input_tokens"],
                                  u["cache_read_input_tokens"])
            assert (fresh + write + read, u["output_tokens"], read, write) == (
                usage["input"], usage["output"], usage["cache_read"], usage["cache_write"])


def _scrape_sum(text: str, name: str, label: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            m = re.search(label + r'="([^"]+)"', line)
            if m:
                out[m.group(1)] = out.get(m.group(1), 0) + float(line.rsplit(" ", 1)[1])
    return out


def test_demo_serve_exposes_metrics_until_interrupted(scenario):
    # as from a terminal: Ctrl-C's disposition is the default, whatever this run inherited (a
    # test run started in the background of a script ignores SIGINT, and so would the demo)
    args = [*command(), "demo", "--delay", "0", "--serve"]
    trampoline = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                  "os.execv(sys.argv[1], sys.argv[1:])")
    proc = subprocess.Popen([sys.executable, "-c", trampoline, shutil.which(args[0]) or args[0], *args[1:]],
                            env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        url = None
        for line in proc.stdout:
            m = re.match(r"Serving (http://\S+/metrics)", line)
            if m:
                url = m.group(1)
                break
        assert url, proc.stderr.read() if proc.poll() is not None else "no Serving line"
        text = urllib.request.urlopen(url, timeout=10).read().decode()
        tokens = _scrape_sum(text, "otel_tokens_tokens_total", "gen_ai_token_type")
        total = scenario["expected"]["total"]
        assert tokens["input"] == total["input"]
        assert tokens["output"] == total["output"]
        assert 'gen_ai_agent_name="coder"' in text
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # say where the signal is (seen twice under load)
            pytest.fail(f"no exit 30 s after SIGINT; threads:\n{describe(proc.pid)}")
        assert code == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_demo_otlp_sends_to_a_collector():
    received: list[str] = []

    class Collector(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("content-length", 0)))
            received.append(self.path)
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_port}"
        proc = otel_tokens("demo", "--delay", "0", "--otlp", "--endpoint", endpoint)
        assert proc.returncode == 0, proc.stderr
        assert f"otlp http/protobuf {endpoint}" in proc.stdout
        assert "/v1/traces" in received and "/v1/metrics" in received
    finally:
        server.shutdown()


def test_demo_bad_flags_are_one_line():
    for args in (["demo", "--serve", "--otlp"], ["demo", "--port", "99999"], ["demo", "--nope"],
                 ["demo", "--endpoint", "http://x"]):
        proc = otel_tokens(*args)
        assert proc.returncode == 2, args
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert proc.stderr.startswith("otel-tokens: error:")


def test_the_tables_are_readable_at_80_columns(tmp_path):
    """On an 80-column terminal or a pipe no line is longer and no figure is cut to '…'."""
    for columns in ("80",):
        proc = otel_tokens("demo", "--delay", "0", "--ledger", str(tmp_path / f"{columns}.db"),
                           env=clean_env(COLUMNS=columns))  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        table = proc.stdout[proc.stdout.index("tokens per agent"):]
        assert "…" not in table
        if columns == "80":
            assert max(len(line) for line in proc.stdout.splitlines()) <= 80
        report = otel_tokens("report", "--db", str(tmp_path / f"{columns}.db"), env=clean_env(COLUMNS=columns))
        assert report.returncode == 0 and "…" not in report.stdout, report.stdout
        if columns == "80":
            assert max(len(line) for line in report.stdout.splitlines()) <= 80, report.stdout
