"""``otel-tokens check`` says where each agent's rows are kept, as it is: the ledger file (a
directory, a file that is not SQLite, a missing folder: each a problem, exit 1), the fleet
database (password hidden; reachable on the real PostgreSQL, not on a closed port or a server
that never answers, within a bounded time) and the spool its rows wait in. A missing psycopg
and a ledger URL of another database are said in the same words by ``check``, ``report`` and
the program itself (which runs on). This worktree's code runs in every subprocess."""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

from ..fleet.conftest import new_database, pg_cluster, pg_server  # noqa: F401 - fixtures
from .conftest import clean_env, otel_tokens

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SECRET = "s3cr%40t-pw"
DRIVER_HINT = "pip install 'otel-tokens[postgres]'"
#: a program recording one call through the public API (no model server needed)
APP = """
import otel_tokens
otel_tokens.configure()
with otel_tokens.agent("a"):
    otel_tokens.start_call(operation="chat", provider="openai", request_model="gpt-4o").stop(
        otel_tokens.Usage(input_tokens=10, output_tokens=2, model="gpt-4o"))
print("app done")
"""


def _env(tmp_path, path: str = ROOT, **extra: str) -> dict[str, str]:
    """This checkout first on the path; the spool in ``tmp_path`` (never the user's own)."""
    return clean_env(PYTHONPATH=path, XDG_CACHE_HOME=str(tmp_path / "cache"), **extra)


def _check(env: dict[str, str]) -> subprocess.CompletedProcess:
    return otel_tokens("check", env=env)


def _app(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", APP], env=env, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip


def _ledger_lines(out: str) -> dict[str, str]:
    """The ``ledger`` section: ``file``/``fleet``/``spool``/``memory`` -> the rest of its line."""
    block = out.split("\nledger (", 1)[1].split("\nbudgets", 1)[0]
    rows = {}
    for line in block.splitlines()[1:]:
        key, _, rest = line.strip().partition(" ")
        rows[key] = rest.strip()
    return rows


def test_a_fleet_url_without_a_file_is_where_rows_go(pg_server, tmp_path):  # noqa: F811
    """Rows go to the fleet database: check says so (not "in memory"), shows the database
    without its password, reachable, and its spool; all is well, exit 0."""
    url = new_database(pg_server).replace("postgres@", f"postgres:{SECRET}@")
    out = _check(_env(tmp_path, OTEL_TOKENS_LEDGER_URL=url))
    assert out.returncode == 0, out.stdout + out.stderr
    lines = _ledger_lines(out.stdout)
    assert "in memory (set OTEL_TOKENS_LEDGER_PATH" not in out.stdout
    assert lines["file"].startswith("none (OTEL_TOKENS_LEDGER_PATH unset)")
    assert lines["file"].endswith("writes each to the fleet database")
    assert lines["fleet"] == f"{url.replace(SECRET, '***')}: reachable (every row is written there)"
    assert lines["spool"].startswith(str(tmp_path / "cache" / "otel_tokens" / "ledger-spool"))
    assert "s3cr" not in out.stdout + out.stderr
    assert out.stdout.rstrip().endswith("ok")


def test_a_written_ledger_file_and_fleet_database_are_all_well(pg_server, tmp_path):  # noqa: F811
    """After a program wrote its row to both, check shows the file (SQLite, WAL mode, its
    write-ahead log), the reachable database and an empty spool; exit 0."""
    path = tmp_path / "ledger.db"
    env = _env(tmp_path, OTEL_TOKENS_LEDGER_PATH=str(path),
               OTEL_TOKENS_LEDGER_URL=new_database(pg_server))  # fmt: skip
    assert "app done" in _app(env).stdout
    out = _check(env)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = _ledger_lines(out.stdout)
    assert lines["file"].startswith(f"{path}: SQLite, WAL mode, ")
    assert lines["fleet"].endswith(": reachable (every row is written there)")
    assert lines["spool"].endswith(": 0 batch(es) waiting for the database, 0 bytes of 256 MB")


def test_an_unusable_ledger_path_is_a_problem(tmp_path):
    """A directory, a file that is not SQLite, a folder that does not exist: the program
    would keep its rows in memory; check says which and exits 1."""
    text = tmp_path / "notes.txt"
    text.write_text("not sqlite at all " * 100)
    for path, why in ((tmp_path, "a directory, not a file"),
                      (text, "not a SQLite file"),
                      (tmp_path / "gone" / "l.db", f"its folder {tmp_path / 'gone'} does not exist")):  # fmt: skip
        out = _check(_env(tmp_path, OTEL_TOKENS_LEDGER_PATH=str(path)))
        assert out.returncode == 1, (path, out.stdout)
        assert _ledger_lines(out.stdout)["file"] == f"{path}: NOT usable: {why} (rows stay in memory)"
        assert f"OTEL_TOKENS_LEDGER_PATH {str(path)!r}: {why}" in out.stderr


def _parameter(name: str, value: str) -> bytes:
    body = f"{name}\0{value}\0".encode()
    return b"S" + struct.pack("!i", 4 + len(body)) + body


def _answer_startup_then_hang(conn: socket.socket) -> None:
    """PostgreSQL's wire protocol up to "ready for query" (encryption refused, no password
    asked), then silence: every query waits for ever."""
    with conn:
        while True:
            head = conn.recv(8, socket.MSG_WAITALL)
            if len(head) < 8:
                return
            length, code = struct.unpack("!ii", head)
            conn.recv(max(0, length - 8), socket.MSG_WAITALL)
            if code in (80877103, 80877104):  # SSLRequest, GSSENCRequest
                conn.sendall(b"N")
                continue
            conn.sendall(b"R" + struct.pack("!ii", 8, 0) + _parameter("server_version", "16.0")
                         + _parameter("client_encoding", "UTF8")
                         + b"Z" + struct.pack("!i", 5) + b"I")  # fmt: skip
            while conn.recv(65536):
                pass


@pytest.fixture(params=["accepts, never answers", "answers the start-up, never a query"])
def hung_server(request):
    """A port whose server hangs: at the connection (only the kernel accepts it), or once
    connected (a query never answered: no connect timeout helps there)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        if request.param.startswith("answers"):
            def serve() -> None:
                with contextlib.suppress(OSError):
                    while True:
                        conn, _ = server.accept()
                        threading.Thread(target=_answer_startup_then_hang, args=(conn,),
                                         daemon=True).start()  # fmt: skip

            threading.Thread(target=serve, daemon=True).start()
        yield server.getsockname()[1]


def test_a_database_that_never_answers_is_a_problem_in_bounded_time(hung_server, tmp_path):
    """A server that hangs: check does not (it waits seconds, bounded by its own deadline),
    says the database is not usable and shows the row a program spooled meanwhile; exit 1."""
    env = _env(tmp_path, OTEL_TOKENS_LEDGER_URL=f"postgresql://bob:{SECRET}@127.0.0.1:{hung_server}/f")
    assert "app done" in _app(env).stdout  # the program runs on; its row is spooled
    started = time.monotonic()
    out = otel_tokens("check", env=env, timeout=60)
    took = time.monotonic() - started
    assert out.returncode == 1
    assert took < 30, took
    lines = _ledger_lines(out.stdout)
    shown = f"postgresql://bob:***@127.0.0.1:{hung_server}/f"
    assert lines["fleet"].startswith(f"{shown}: NOT usable: ")
    assert lines["spool"].split(": ", 1)[1].startswith("1 batch(es) waiting for the database")
    assert f"the fleet ledger {shown} cannot be used" in out.stderr
    assert "s3cr" not in out.stdout + out.stderr


def test_a_missing_psycopg_names_its_pip_install_everywhere(tmp_path):
    """Without the driver (``import psycopg`` fails), check, report and the program itself
    (which runs on, its row spooled) all give the same fix."""
    fake = tmp_path / "nopsycopg"
    fake.mkdir()
    (fake / "psycopg.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'psycopg'\", name='psycopg')\n")
    url = "postgresql://bob@127.0.0.1:5432/fleet"
    env = _env(tmp_path, f"{fake}:{ROOT}", OTEL_TOKENS_LEDGER_URL=url)
    said = f"psycopg cannot be imported (No module named 'psycopg'): {DRIVER_HINT}"
    check = _check(env)
    assert check.returncode == 1
    assert _ledger_lines(check.stdout)["fleet"] == f"{url}: NOT usable: {said}"
    report = otel_tokens("report", "--db", url, env=env)
    assert report.returncode == 1 and said in report.stderr, report.stderr
    app = _app(env)
    assert app.returncode == 0 and "app done" in app.stdout
    assert f"fleet ledger off: {said}" in app.stderr, app.stderr


def test_a_ledger_url_of_another_database_is_said_plainly(tmp_path):
    """``mysql://`` is not a fleet ledger: one settings line says the scheme is not supported;
    the program runs; check lists it and exits 1."""
    env = _env(tmp_path, OTEL_TOKENS_LEDGER_URL=f"mysql://bob:{SECRET}@db:3306/fleet")
    app = _app(env)
    assert app.returncode == 0 and "app done" in app.stdout
    (line,) = [line for line in app.stderr.splitlines() if "OTEL_TOKENS_LEDGER_URL" in line]
    assert "mysql:// is not supported (the fleet ledger is PostgreSQL only)" in line
    assert line.endswith("using the default (none: no fleet ledger)")
    check = _check(env)
    assert check.returncode == 1
    assert "mysql:// is not supported" in check.stdout
    assert list(_ledger_lines(check.stdout)) == ["memory"]  # no fleet database: none is used
    assert "s3cr" not in app.stderr + check.stdout + check.stderr
