"""A throwaway PostgreSQL cluster for the fleet tests: Debian's ``postgresql`` binaries, initdb
into a temporary folder (as the ``postgres`` user when run as root), trust auth on 127.0.0.1,
a free port; it can be stopped and started again (the database-down tests)."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile


def binaries() -> str | None:
    """The folder of initdb/pg_ctl (Debian's newest version first), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), reverse=True)
    if found:
        return os.path.dirname(found[0])
    pg_ctl = shutil.which("pg_ctl")
    return os.path.dirname(pg_ctl) if pg_ctl else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """initdb + pg_ctl start; :attr:`url` of its ``postgres`` database; stop/start/remove."""

    def __init__(self, bin_dir: str) -> None:
        self.bin = bin_dir
        self.folder = tempfile.mkdtemp(prefix="otel-tokens-pg-")
        self.data = os.path.join(self.folder, "data")
        self.port = _free_port()
        self.as_root = os.geteuid() == 0
        if self.as_root:
            shutil.chown(self.folder, "postgres", "postgres")
        self._run("initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "--no-sync",
                  "-E", "UTF8")
        self.start()

    def _run(self, tool: str, *args: str) -> None:
        command = [os.path.join(self.bin, tool), *args]
        if self.as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    @property
    def url(self) -> str:
        return self.url_of("postgres")

    def url_of(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.folder} "
                   "-c fsync=off -c max_connections=200")
        self._run("pg_ctl", "-D", self.data, "-o", options, "-w", "-t", "60",
                  "-l", os.path.join(self.folder, "log"), "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop")

    def remove(self) -> None:
        try:
            self.stop()
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.folder, ignore_errors=True)
