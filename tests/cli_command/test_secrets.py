"""No password is ever printed, whatever the shape of the URL that carries it (issue 44):
the host's stderr at start-up, ``otel-tokens check``, ``otel-tokens report`` and fault lines."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys

import pytest

from otel_tokens.redact import redact

from .conftest import clean_env, otel_tokens

SECRET = "s3cr3t-Pa55"

# every shape a DSN (or an exporter URL) may carry its password in
SHAPES = [
    f"postgresql+psycopg://alice:{SECRET}@127.0.0.1:{{port}}/ledger",
    f"postgresql://alice:{SECRET}@127.0.0.1:{{port}}/ledger",
    f"postgres://:{SECRET}@127.0.0.1:{{port}}/ledger",  # no user
    f"postgresql://alice:{SECRET}@x@127.0.0.1:{{port}}/ledger",  # an '@' in the password
    f"postgresql://alice@127.0.0.1:{{port}}/ledger?password={SECRET}&sslmode=disable",
    f"postgresql://127.0.0.1:{{port}}/ledger?sslmode=disable&PassWord='{SECRET}'",
    f"mysql://alice:{SECRET}@127.0.0.1:{{port}}/ledger",  # a scheme otel_tokens refuses
]


@pytest.fixture(scope="module")
def closed_port() -> int:
    """A port on loopback nothing listens on (a connection is refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("shape", SHAPES)
def test_redact_hides_every_shape(shape):
    shown = redact(shape.format(port=5432))
    assert SECRET not in shown and "***" in shown
    assert "ledger" in shown  # the database stays visible


def test_redact_leaves_plain_text_alone():
    for text in ("https://api.openai.com/v1", "postgresql://127.0.0.1:5432/ledger",
                 "tenant:acme is over its budget", "a=b c=d"):
        assert redact(text) == text


@pytest.mark.parametrize("shape", SHAPES)
def test_check_never_prints_the_password(shape, closed_port):
    url = shape.format(port=closed_port)
    proc = otel_tokens("check", env=clean_env(OTEL_TOKENS_LEDGER_URL=url))
    assert SECRET not in proc.stdout + proc.stderr, proc.stdout + proc.stderr


@pytest.mark.parametrize("shape", SHAPES[:-1])
def test_report_never_prints_the_password(shape, closed_port):
    proc = otel_tokens("report", "--db", shape.format(port=closed_port))
    assert proc.returncode != 0
    assert "cannot read" in proc.stderr or "psycopg" in proc.stderr, proc.stderr
    assert SECRET not in proc.stdout + proc.stderr, proc.stderr


@pytest.mark.parametrize("shape", SHAPES)
def test_the_host_never_prints_the_password(shape, closed_port):
    """A program with the ledger URL set (a rejected one, or one whose database is down): its
    stderr (the settings line, the fault line) holds no password, and the call is made."""
    program = (
        "import otel_tokens\n"
        "from otel_tokens import Usage\n"
        "otel_tokens.configure()\n"
        "with otel_tokens.agent('secrets', tenant='acme'):\n"
        "    otel_tokens.start_call(operation='chat', provider='openai', request_model='gpt-4o')"
        ".stop(Usage(input_tokens=10, output_tokens=2, model='gpt-4o'))\n"
        "print('done')\n"
    )
    env = clean_env(OTEL_TOKENS_LEDGER_URL=shape.format(port=closed_port),
                    OTEL_TOKENS_EXIT_TIMEOUT="1")
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "done" in proc.stdout
    assert SECRET not in proc.stdout + proc.stderr, proc.stderr


def test_fault_lines_are_redacted(caplog):
    from otel_tokens.faults import Faults

    sink = Faults()
    with caplog.at_level(logging.WARNING, logger="otel_tokens"):
        sink.report("ledger_fleet", ValueError(f"invalid dsn: postgresql://u:{SECRET}@h/db"))
        sink.report("budget_fleet", detail=f"cannot reach host=h password={SECRET} dbname=d")
    assert caplog.records and SECRET not in caplog.text
