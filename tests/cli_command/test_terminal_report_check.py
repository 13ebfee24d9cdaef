"""The progress display on a pipe (plain lines) and on a terminal (a pty); report and check."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import socket
import subprocess
import time

from .conftest import clean_env, command, otel_tokens

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def step_lines(scenario) -> list[str]:
    n = len(scenario["steps"])
    return [f"[{i}/{n}] {s['title']}:" for i, s in enumerate(scenario["steps"], 1)]


def test_progress_on_a_pipe_is_plain_lines(scenario):
    proc = otel_tokens("demo", "--delay", "0")
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout and "\r" not in proc.stdout
    lines = proc.stdout.splitlines()
    for prefix in step_lines(scenario):
        assert sum(line.startswith(prefix) for line in lines) == 1, prefix


def test_progress_on_a_terminal_does_not_corrupt_lines(scenario):
    master, slave = pty.openpty()
    env = clean_env(TERM="xterm-256color", COLUMNS="200", LINES="50")
    proc = subprocess.Popen([*command(), "demo", "--delay", "0.05"], stdin=slave, stdout=slave,
                            stderr=slave, env=env, close_fds=True)
    os.close(slave)
    out = b""
    deadline = time.time() + 120
    while time.time() < deadline:
        ready, _, _ = select.select([master], [], [], 1)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=30)
    os.close(master)
    assert proc.returncode == 0, out[-2000:]
    text = out.decode("utf-8", "replace")
    assert "\x1b[" in text  # a live display was drawn
    # what stays on screen: each line's text after the last carriage return, codes removed
    screen = [ANSI.sub("", line.split("\r")[-1]) for line in text.replace("\r\n", "\n").split("\n")]
    for prefix in step_lines(scenario):
        matches = [line for line in screen if prefix in line]
        assert len(matches) == 1, (prefix, matches)
        assert matches[0].startswith(prefix), matches[0]  # nothing of the bar before it
    assert any(line.strip().startswith("TOTAL") for line in screen)


def test_report_and_check(tmp_path, scenario):
    db = tmp_path / "l.db"
    assert otel_tokens("demo", "--delay", "0", "--ledger", str(db)).returncode == 0
    text = otel_tokens("report", "--db", str(db))
    assert text.returncode == 0, text.stderr
    for heading in ("totals by agent", "per request", "cost by model", "cost by time",
                    "top 7 requests by cost"):
        assert heading in text.stdout
    env = clean_env(OTEL_TOKENS_LEDGER_PATH=str(db))
    data = json.loads(otel_tokens("report", "--json", env=env).stdout)
    assert set(data["agents"]) == {"planner", "coder"}
    assert data["statistics"]["input_tokens"]["count"] == 7
    assert data["statistics"]["input_tokens"]["p50"] == 2448
    assert set(data["cost_by_model"]) == {"gpt-4o-2024-08-06", "claude-sonnet-4-5-20250929",
                                          "claude-sonnet-4.5"}
    assert data["top_requests"][0]["request_id"] == "msg_demo_code_3"
    later = json.loads(otel_tokens("report", "--db", str(db), "--json",
                                   "--since", "2099-01-01").stdout)
    assert later["totals"]["requests"] == 0
    ok = otel_tokens("check")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert re.search(r"openai\s+active", ok.stdout)
    assert re.search(r"agent_cli\s+active", ok.stdout)
    assert "bundled data of" in ok.stdout


def test_user_errors_are_one_line(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_text("not sqlite at all " * 100)
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        cases = [
            (["report", "--db", str(tmp_path / "none.db")], None, "no ledger file"),
            (["report", "--db", str(bad)], None, "not an SQLite database"),
            (["report", "--db", str(tmp_path)], None, "is a directory"),
            (["report", "--db", str(bad), "--since", "soon"], None, "--since"),
            (["report"], None, "no ledger"),
            (["frobnicate"], None, "No such command"),
            (["check"], {"OTEL_TOKENS_PROMETHEUS_PORT": str(busy.getsockname()[1])},
             "metrics are not served"),
            (["check"], {"OTEL_METRICS_EXPORTER": "carrier-pigeon"}, "OTEL_METRICS_EXPORTER="),
            (["demo", "--otlp", "--endpoint", "localhost:4318"], None, "write http://HOST:4318"),
        ]
        for args, extra, text in cases:
            proc = otel_tokens(*args, env=clean_env(**(extra or {})))
            assert proc.returncode != 0, args
            lines = proc.stderr.strip().splitlines()
            assert len(lines) == 1 and text in lines[0], (args, proc.stderr)
            assert "Traceback" not in proc.stderr
    finally:
        busy.close()


def test_report_lists_unpriced_models_with_their_tokens(tmp_path):
    """A model without a price is listed with its requests and tokens (its cost unknown, not
    0), and the report says how to price it."""
    from otel_tokens import Usage
    from otel_tokens.account.ledger import UsageLedger

    db = tmp_path / "u.db"
    ledger = UsageLedger("bot", path=db)
    ledger.append(Usage(input_tokens=1000, output_tokens=50, model="gpt-4o", provider="openai"), cost_usd=0.003)
    for _ in range(2):
        ledger.append(Usage(input_tokens=7000, output_tokens=300, model="private-llm", provider="openai"))
    ledger.flush()
    ledger.close()
    text = otel_tokens("report", "--db", str(db), env=clean_env(COLUMNS="80"))
    assert text.returncode == 0, text.stderr
    row = next(line for line in text.stdout.splitlines() if line.strip().startswith("private-llm"))
    assert row.split() == ["private-llm", "2", "14,000", "600", "unpriced", "0"]  # 0 estimated
    assert "no price known for private-llm" in " ".join(text.stdout.split())
    assert "OTEL_TOKENS_PRICES_FILE" in text.stdout
    data = json.loads(otel_tokens("report", "--db", str(db), "--json").stdout)
    assert data["models"]["private-llm"] == {"provider": "openai", "requests": 2, "failed": 0,
                                             "input_tokens": 14000,
                                             "output_tokens": 600, "cost_usd": None, "unpriced_requests": 2,
                                             "estimated_requests": 0, "estimated_tokens": 0,
                                             "estimated_cost_usd": None}  # fmt: skip
    assert list(data["models"]) == ["gpt-4o", "private-llm"]


def test_report_shows_requests_whose_usage_was_missing(tmp_path):
    """Streams that reported no usage are recorded as estimates: the report counts them per
    model and says how to get the real figures."""
    from otel_tokens import Usage
    from otel_tokens.account.ledger import UsageLedger

    db = tmp_path / "m.db"
    ledger = UsageLedger("bot", path=db)
    ledger.append(Usage(input_tokens=1000, output_tokens=50, model="gpt-4o", provider="openai"), cost_usd=0.003)
    for _ in range(3):
        ledger.append(Usage(input_tokens=900, output_tokens=40, model="gpt-4o", provider="openai",
                            source="estimated"), cost_usd=0.002)  # fmt: skip
    ledger.flush()
    ledger.close()
    text = otel_tokens("report", "--db", str(db), env=clean_env(COLUMNS="80"))
    assert text.returncode == 0, text.stderr
    said = " ".join(text.stdout.split())
    assert "usage missing, recorded as estimates: gpt-4o 3 requests" in said
    assert "OTEL_TOKENS_OPENAI_INCLUDE_USAGE=true" in said
    data = json.loads(otel_tokens("report", "--db", str(db), "--json").stdout)
    assert data["models"]["gpt-4o"]["estimated_requests"] == 3


def test_a_busy_port_or_a_silent_collector_says_how_to_fix_it():
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        port = str(busy.getsockname()[1])
        proc = otel_tokens("demo", "--serve", "--port", port, "--delay", "0")
        assert proc.returncode == 1 and "Traceback" not in proc.stderr
        last = proc.stderr.strip().splitlines()[-1]
        assert f"127.0.0.1:{port}" in last and "in use" in last and "--port 0" in last, last
        assert "[1/8]" not in proc.stdout  # refused before the scenario ran
        check = otel_tokens("check", env=clean_env(OTEL_TOKENS_PROMETHEUS_PORT=port))
        assert "OTEL_TOKENS_PROMETHEUS_PORT to a free port" in check.stderr
    finally:
        busy.close()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    proc = otel_tokens("demo", "--otlp", "--endpoint", f"http://127.0.0.1:{closed}", "--delay", "0")
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stdout.split())
    assert f"The collector at http://127.0.0.1:{closed} did not take the telemetry" in said
    assert "docker compose -f collector-config/docker-compose.yml up -d" in said
