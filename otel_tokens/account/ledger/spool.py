"""A bounded local spool of ledger rows the fleet database could not take yet, and the journal
of the rows a process has queued.

While the PostgreSQL ledger is unreachable, rows (and rollbacks, in their order) are written
here, one file per batch (written to a temporary name, then renamed: a reader never sees half
a batch), and replayed when the database is back. Any process of the host may replay any
batch: it claims a file by renaming it (atomic), deletes it once its rows are committed, and a
claim left by a process that died is given back. Replaying a batch twice is harmless: every
row carries its own id and the database keeps the first copy only. The folder is bounded
(``OTEL_TOKENS_LEDGER_SPOOL_MAX_MB``): past it a batch is refused and the caller counts the
rows as lost.

Each database has a folder of its own (:func:`database_folder`: a hash of its user, host,
port and name), so a row is only ever replayed into the database it was meant for. The
folders are made ``0o700`` and used only when they are real folders of this user (a symlink
planted at their path is refused). Rows the database refused for their values (never for
being down) are set aside in ``*.failed`` files, at most :data:`FAILED_MAX` of them.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import stat
import time
import urllib.parse
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ... import faults

__all__ = [
    "Journal",
    "Segment",
    "Spool",
    "SpoolUnsafe",
    "database_folder",
    "database_name",
    "default_folder",
]

_READY = ".rows"
_CLAIMED = ".claimed"
_JOURNAL = ".journal"
_FAILED = ".failed"
_MARKERS = (_READY, _CLAIMED, _JOURNAL, _FAILED)
FAILED_MAX = 100  # files of set-aside rows kept (the oldest go first)
_OPEN_FLAGS = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_EXCL
    | os.O_APPEND
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


class SpoolUnsafe(OSError):
    """The spool folder is a symlink, not a folder, or another user's: it is not used."""


def default_folder() -> str:
    """``$XDG_CACHE_HOME/otel_tokens/ledger-spool`` (``~/.cache`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "otel_tokens", "ledger-spool")


def database_name(url: str) -> str:
    """``user@host:port/dbname`` of a ``postgresql://`` URL (query parameters such as
    ``?host=`` included, host lower-cased, port 5432 when none is given): which database it
    names, without its password or options."""
    parts = urllib.parse.urlsplit(url)
    userinfo, _, hosts = parts.netloc.rpartition("@")
    query = urllib.parse.parse_qs(parts.query)

    def given(key: str, default: str) -> str:
        return query[key][-1] if query.get(key) else default

    user = given("user", urllib.parse.unquote(userinfo.partition(":")[0]))
    port = given("port", "")
    entries = []
    for entry in given("host", urllib.parse.unquote(hosts)).lower().split(","):
        name, own = entry, ""
        if ":" in entry and not entry.endswith("]"):
            name, _, own = entry.rpartition(":")
        entries.append(f"{name}:{port or own or '5432'}")
    dbname = given("dbname", urllib.parse.unquote(parts.path.lstrip("/")))
    return f"{user}@{','.join(entries)}/{dbname}"


def database_folder(base: str | os.PathLike[str], url: str) -> Path:
    """The spool folder of the database ``url`` names, in ``base``: ``db-`` and 16 hex digits
    of the SHA-256 of :func:`database_name` (rows spooled for one database are never written
    into another, whichever process replays them)."""
    digest = hashlib.sha256(database_name(url).encode("utf-8", "surrogatepass")).hexdigest()
    return Path(base) / f"db-{digest[:16]}"


def _safe_folder(path: Path, create: bool) -> bool:
    """Whether ``path`` is there and ours: a real folder (``os.lstat``: a symlink is not
    followed) owned by this user; made ``0o700`` (its parents too) when missing and ``create``.
    Raises :class:`SpoolUnsafe` for a symlink, a file or another user's folder."""
    if create:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise SpoolUnsafe(
            f"fleet ledger spool {path} is a symlink, not a folder, or not this user's: not used"
        )
    return True


class Spool:
    """Batches of rows on disk in ``folder``, at most ``max_bytes`` in all."""

    def __init__(self, folder: str | os.PathLike[str], max_bytes: int) -> None:
        self.folder = Path(folder)
        self.max_bytes = max_bytes
        self._guarded: tuple[Path, ...] = (self.folder,)  # folders checked before each use

    @classmethod
    def for_database(cls, base: str | os.PathLike[str], url: str, max_bytes: int) -> Spool:
        """The spool of the database ``url`` names: its own folder in ``base`` (both checked:
        neither may be a symlink)."""
        spool = cls(database_folder(base, url), max_bytes)
        spool._guarded = (Path(base), spool.folder)
        return spool

    def usable(self, create: bool = False) -> bool:
        """Whether the folder is there (made when ``create``) and safe to use; raises
        :class:`SpoolUnsafe` when it is not ours."""
        found = True
        for path in self._guarded:
            found = _safe_folder(path, create) and found
        return found

    def _names(self) -> list[str]:
        """The file names in the folder ([] when it is missing or refused: a fault)."""
        try:
            if not self.usable():
                return []
            return os.listdir(self.folder)
        except FileNotFoundError:
            return []
        except OSError as exc:
            faults.report("ledger_fleet_spool", exc)
            return []

    def size(self) -> int:
        """Bytes the spool's files take (claimed, journal and set-aside ones included)."""
        total = 0
        for name in self._names():
            if any(marker in name for marker in _MARKERS):
                try:
                    total += os.lstat(self.folder / name).st_size
                except FileNotFoundError:
                    continue
        return total

    def save(self, rows: Sequence[Sequence[Any]]) -> bool:
        """Write ``rows`` as one batch; False when the spool is full (nothing written)."""
        return self._write(rows, _READY)

    def _write(self, rows: Sequence[Sequence[Any]], suffix: str) -> bool:
        if not rows:
            return True
        payload = "".join(line(row) for row in rows).encode()
        if self.size() + len(payload) > self.max_bytes:
            return False
        self.usable(create=True)
        name = f"{_stem()}{suffix}"
        temp = self.folder / f".{name}.tmp"
        fd = os.open(temp, _OPEN_FLAGS, 0o600)
        with open(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, self.folder / name)
        return True

    def pending(self) -> bool:
        """Whether any batch waits to be replayed (claims and journals of dead processes
        given back)."""
        self._give_back_orphans()
        return any(name.endswith(_READY) for name in self._names())

    def claim(self) -> Path | None:
        """The oldest ready batch, claimed by this process (None when there is none)."""
        for name in sorted(n for n in self._names() if n.endswith(_READY)):
            claimed = self.folder / f"{name[: -len(_READY)]}{_CLAIMED}-{_owner()}"
            try:
                os.rename(self.folder / name, claimed)
            except FileNotFoundError:
                continue  # another process claimed it first
            return claimed
        return None

    @staticmethod
    def read(path: Path) -> list[list[Any]]:
        """The rows of a claimed batch (lines that do not parse are skipped)."""
        rows = []
        with open(os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)), "rb") as f:
            data = f.read()
        for text in data.decode("utf-8", "replace").splitlines():
            try:
                rows.append(json.loads(text))
            except ValueError:
                continue
        return rows

    @staticmethod
    def done(path: Path) -> None:
        """A claimed batch whose rows are committed: gone."""
        path.unlink(missing_ok=True)

    def give_back(self, path: Path) -> None:
        """A claimed batch (or a dead process's journal) that could not be written: ready
        for the next replay."""
        stem = path.name.split(_CLAIMED)[0].split(_JOURNAL)[0]
        try:
            os.rename(path, self.folder / f"{stem}{_READY}")
        except FileNotFoundError:
            pass

    def set_aside(self, rows: Sequence[Sequence[Any]]) -> bool:
        """Keep ``rows`` the database refused in a ``*.failed`` file (never replayed); False
        when the spool is full (nothing written)."""
        kept = self._write(rows, _FAILED)
        self._prune_failed()
        return kept

    def move_aside(self, path: Path) -> None:
        """A claimed batch that cannot be read: renamed ``*.failed``, never replayed again."""
        stem = path.name.split(_CLAIMED)[0]
        try:
            os.rename(path, self.folder / f"{stem}{_FAILED}")
        except FileNotFoundError:
            return
        self._prune_failed()

    def _prune_failed(self) -> None:
        failed = sorted(n for n in self._names() if n.endswith(_FAILED))
        for name in failed[: max(0, len(failed) - FAILED_MAX)]:
            (self.folder / name).unlink(missing_ok=True)

    def _give_back_orphans(self) -> None:
        for name in self._names():
            if name.startswith(".") and name.endswith(".tmp"):
                self._drop_dead_temp(name)
                continue
            if _CLAIMED not in name and _JOURNAL not in name:
                continue
            owner = name.rsplit("-", 1)[1]
            try:
                pid = int(owner.partition(".")[0])
            except ValueError:
                continue
            if owner != _owner() and (pid == os.getpid() or not _alive(pid)):
                self.give_back(self.folder / name)  # its process is gone (or had our pid)

    def _drop_dead_temp(self, name: str) -> None:
        """A batch a process was killed while writing (``.<time>-<pid>-<chance>.rows.tmp``): its
        rows are still in that process's journal, so the half-written copy goes."""
        try:
            pid = int(name.split("-")[1])
        except (IndexError, ValueError):
            return
        if pid != os.getpid() and not _alive(pid):
            _unlink(self.folder / name)


_JSON = json.JSONEncoder(separators=(",", ":"), default=str)


def line(row: Sequence[Any]) -> str:
    """One row as a line of JSON (a value JSON has no type for written as its ``str``)."""
    return _JSON.encode(list(row)) + "\n"


_token = secrets.token_hex(4)


def _owner() -> str:
    """This process in the names of its claims and journals: its pid (gone when the process is)
    and a random token (a later process given the same pid, as in a restarted container, is
    not taken for it)."""
    return f"{os.getpid()}.{_token}"


def _new_token() -> None:
    global _token
    _token = secrets.token_hex(4)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_token)


def _stem() -> str:
    """A new batch's name: time first (replayed oldest first), then this process and chance."""
    return f"{time.time_ns():020d}-{os.getpid()}-{secrets.token_hex(4)}"


def _unlink(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        faults.report("ledger_fleet_journal", exc)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Segment:
    """One journal file: its path, its descriptor (None once closed) and how many of its rows
    are neither committed nor spooled yet."""

    __slots__ = ("fd", "path", "pending")

    def __init__(self, path: Path, fd: int) -> None:
        self.path, self.fd, self.pending = path, fd, 0


class Journal:
    """A process's write-ahead journal: each row it queues is first appended to a segment in
    the spool folder (one ``os.write`` of one line, no fsync), so that it outlives
    ``os._exit`` and SIGKILL. The writer rotates segments as it takes batches and releases
    rows once they are committed or spooled; a segment with none left is deleted. A segment
    left by a process that died is given back as a ready batch (:meth:`Spool.pending`) and
    replayed by any later process: rows keep their ids, so nothing is stored twice.

    Not thread-safe: the writer calls it under its own lock. A failed write (disk full, a
    read-only folder) is a ``ledger_fleet_journal`` fault; the row stays queued in memory and
    the journal is not tried again before the next rotation."""

    def __init__(self, spool: Spool) -> None:
        self.spool = spool
        self._open: Segment | None = None
        self._off = False
        self.failures = 0

    @staticmethod
    def line(item: Sequence[Any]) -> str | None:
        """``item``'s line (:func:`line`, made before the writer's lock is taken), or None (a
        fault) when it has none."""
        try:
            return line(item)
        except Exception as exc:
            faults.report("ledger_fleet_journal", exc)
            return None

    def append(self, text: str | None) -> Segment | None:
        """Append one row's line (:meth:`line`); the segment holding it, or None."""
        if self._off or text is None:
            return None
        try:
            segment = self._open or self._start()
            data = text.encode()
            if os.write(segment.fd, data) != len(data):
                self._close(segment)  # its last line is cut: no more lines after it
                raise OSError("short write to the journal (disk full?)")
        except Exception as exc:
            self._off = True
            self.failures += 1
            faults.report(
                "ledger_fleet_journal",
                exc,
                f"fleet ledger journal not written ({exc}): queued rows are kept in memory only",
            )
            return None
        segment.pending += 1
        return segment

    def _start(self) -> Segment:
        self.spool.usable(create=True)
        path = self.spool.folder / f"{_stem()}{_JOURNAL}-{_owner()}"
        self._open = Segment(path, os.open(path, _OPEN_FLAGS, 0o600))
        return self._open

    def rotate(self) -> None:
        """Rows appended from now on go to a new segment (the writer took a batch)."""
        self._off = False
        if self._open is not None:
            self._close(self._open)

    def release(self, segments: Iterable[Segment | None]) -> None:
        """One row of each of ``segments`` is committed or spooled; closed segments with no
        row left are deleted."""
        for segment in segments:
            if segment is not None:
                segment.pending -= 1
                if segment.pending <= 0 and segment.fd is None:
                    _unlink(segment.path)

    def _close(self, segment: Segment) -> None:
        if segment is self._open:
            self._open = None
        if segment.fd is not None:
            fd, segment.fd = segment.fd, None
            try:
                os.close(fd)
            except OSError:
                pass
        if segment.pending <= 0:
            _unlink(segment.path)

    def abandon(self) -> None:
        """In a forked child: close the parent's descriptor, leave its segment to it."""
        segment, self._open = self._open, None
        if segment is not None and segment.fd is not None:
            try:
                os.close(segment.fd)
            except OSError:
                pass
