"""Where a program's processes leave their at-exit rows for its top process (``summary.py``).

The top process makes a private directory (mode 0700) named with its pid and host. A
descendant at its end adds its rows into the directory's one file of rows (``rows.json``)
under an exclusive lock (``rows.lock``; the system releases it if the holder dies), so the
directory holds two files however many workers come and go (gunicorn's ``--max-requests``, a
pool's ``maxtasksperchild``). A process that leaves its rows twice (a pool worker's flush,
then its ``atexit``) adds only what it recorded since. Where the lock is not had within
:data:`LOCK_WAIT` seconds, the rows go into a file of that process's own, read the same way.
A top process killed before its end leaves its directory behind: the next top process on the
host removes every such directory whose process has ended.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import stat
import tempfile
import time
import uuid
from typing import Any

from .. import faults
from .summary_rows import Rows, add_rows, decoded, encoded, since

try:
    import fcntl
except ImportError:  # not POSIX: each process leaves a file of its own
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_WAIT", "gather", "leave", "make", "private"]

PREFIX = "otel_tokens-summary-"
ROWS, LOCK = "rows.json", "rows.lock"
#: seconds a process at its end waits for another's write of the rows file
LOCK_WAIT = 2.0

_left: dict[int, Rows] = {}  # pid -> the rows that process has added to the rows file
_names: dict[int, str] = {}  # pid -> the name of its own file, where it could not lock


def make() -> str:
    """The top process's new directory; the directories left by ended top processes on this
    host removed first."""
    _remove_stale(tempfile.gettempdir())
    return tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}@{_host()}-")  # mode 0700


def private(path: str) -> bool:
    """A directory of this user's that nobody else can read or write (not a link)."""
    try:
        info = os.lstat(path)
    except (OSError, ValueError):  # gone (its top process has ended), or a NUL in the name
        return False
    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == os.getuid()
        and stat.S_IMODE(info.st_mode) & 0o077 == 0
    )


def leave(folder: str, rows: Rows) -> bool:
    """This descendant's rows added to ``folder``'s rows (nothing when it made no call);
    False when the directory is gone (the top process has ended)."""
    if not rows:
        return True
    try:
        lock = os.open(os.path.join(folder, LOCK), os.O_RDWR | os.O_CREAT, 0o600)
    except FileNotFoundError:
        return False
    try:
        if not _locked(lock):
            return _write(folder, _own_name(), encoded(rows))
        grown = since(rows, _left.get(os.getpid(), {}))
        if not _add_to_file(folder, grown, first=os.getpid() not in _left):
            return False
        _left[os.getpid()] = rows
        return True
    finally:
        os.close(lock)  # the lock goes with it


def _locked(fd: int) -> bool:
    """The exclusive lock on ``fd``, waited for at most :data:`LOCK_WAIT` seconds."""
    if fcntl is None:
        return False
    deadline = time.monotonic() + LOCK_WAIT
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)


def _add_to_file(folder: str, rows: Rows, first: bool) -> bool:
    """Under the lock: ``rows`` added to the rows file, and this process to its count."""
    path = os.path.join(folder, ROWS)
    merged: Rows = {}
    processes = 0
    with contextlib.suppress(FileNotFoundError):
        processes, merged = _read(path)
    add_rows(merged, rows)
    return _write(folder, ROWS, {"processes": processes + first, "rows": encoded(merged)})


def _write(folder: str, name: str, content: Any) -> bool:
    """``content`` as ``folder/name``, whole (written apart, then renamed into place); False
    when the directory is gone."""
    try:
        fd, part = tempfile.mkstemp(prefix=f"{os.getpid()}-", suffix=".part", dir=folder)
    except FileNotFoundError:
        return False
    try:
        with os.fdopen(fd, "w", encoding="ascii") as out:  # JSON escapes every non-ASCII
            json.dump(content, out)
        os.replace(part, os.path.join(folder, name))
    except FileNotFoundError:  # removed meanwhile: the top process has ended
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(part)  # left behind only when the rename did not happen
    return True


def _own_name() -> str:
    """This process's own file: one name, however many of its exit paths write it (each
    replaces it with the same or later figures, so none is counted twice)."""
    return _names.setdefault(os.getpid(), f"{os.getpid()}-{uuid.uuid4().hex}.json")


def _read(path: str) -> tuple[int, Rows]:
    """(processes, rows) of a file: the rows file, or one process's own (a list of rows)."""
    with open(path, encoding="ascii") as file:
        data = json.load(file)
    if isinstance(data, dict) and isinstance(data.get("processes"), int):
        return data["processes"], decoded(data.get("rows"))
    return 1, decoded(data)


def gather(folder: str, rows: Rows) -> int:
    """The rows descendants left in ``folder``, added into ``rows``; how many processes
    left some. An unreadable file is a fault, skipped."""
    count = 0
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".json"):
            continue
        try:
            processes, left = _read(os.path.join(folder, name))
        except (OSError, ValueError) as exc:
            faults.report("internal", exc, f"at-exit summary: a process's rows unreadable: {exc!r}")
            continue
        add_rows(rows, left)
        count += processes
    return count


def _host() -> str:
    """This host's name as a directory name may hold it."""
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname())[:64]


def _remove_stale(temp: str) -> None:
    """Remove this host's summary directories whose top process has ended (killed before
    its end: nothing removed them)."""
    mine = f"@{_host()}-"
    try:
        entries = [name for name in os.listdir(temp) if name.startswith(PREFIX) and mine in name]
    except OSError:
        return
    for name in entries:
        pid = name[len(PREFIX) :].split("@", 1)[0]
        path = os.path.join(temp, name)
        if pid.isdigit() and not _alive(int(pid)) and private(path):
            shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` runs (one of another user's counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True
