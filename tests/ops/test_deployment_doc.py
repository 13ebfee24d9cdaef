"""docs/deployment.md names the service: every server command it gives sets OTEL_SERVICE_NAME,
and what it says happens without it (the service named after the server program) is so."""

from __future__ import annotations

import re
import subprocess
import sys

from .conftest import ROOT

DOC = ROOT / "docs" / "deployment.md"


def test_every_server_command_sets_the_service_name():
    blocks = re.findall(r"```bash\n(.*?)```", DOC.read_text(), re.S)
    commands = [line for block in blocks for line in block.splitlines()
                if re.search(r"\b(gunicorn|uvicorn|celery)\b", line)]  # fmt: skip
    assert len(commands) >= 3, commands
    for line in commands:
        assert line.startswith("OTEL_SERVICE_NAME="), line
    assert "set `OTEL_SERVICE_NAME`" in DOC.read_text()


def test_without_it_the_service_is_the_server_program(tmp_path):
    """A process started as ``gunicorn`` (its argv[0]) and set up without OTEL_SERVICE_NAME
    is service ``gunicorn``, as the page says."""
    program = tmp_path / "gunicorn"
    program.write_text("import otel_tokens\n"
                       "setup = otel_tokens.configure()\n"
                       "print(setup.tracer_provider.resource.attributes['service.name'])\n")  # fmt: skip
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "OTEL_TRACES_EXPORTER": "none",
           "OTEL_METRICS_EXPORTER": "none", "OTEL_TOKENS_PROMETHEUS_PORT": "0"}  # fmt: skip
    out = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, env=env,
                         timeout=60, check=True).stdout  # fmt: skip
    assert out.strip() == "gunicorn"
