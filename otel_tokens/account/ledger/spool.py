"""A bounded local spool of ledger rows the fleet database could not take yet.

While the PostgreSQL ledger is unreachable, rows (and rollbacks, in their order) are written
here, one file per batch (written to a temporary name, then renamed: a reader never sees half
a batch), and replayed when the database is back. Any process of the host may replay any batch: it claims a file by renaming
it (atomic), deletes it once its rows are committed, and a claim left by a process that died is
given back. Replaying a batch twice is harmless: every row carries its own id and the database
keeps the first copy only. The folder is bounded (``OTEL_TOKENS_LEDGER_SPOOL_MAX_MB``): past it
a batch is refused and the caller counts the rows as lost.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["Spool", "default_folder"]

_READY = ".rows"
_CLAIMED = ".claimed"


def default_folder() -> str:
    """``$XDG_CACHE_HOME/otel_tokens/ledger-spool`` (``~/.cache`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "otel_tokens", "ledger-spool")


class Spool:
    """Batches of rows on disk in ``folder``, at most ``max_bytes`` in all."""

    def __init__(self, folder: str | os.PathLike[str], max_bytes: int) -> None:
        self.folder = Path(folder)
        self.max_bytes = max_bytes

    def size(self) -> int:
        """Bytes the spooled batches take (claimed ones included)."""
        total = 0
        try:
            with os.scandir(self.folder) as entries:
                for entry in entries:
                    if _READY in entry.name or _CLAIMED in entry.name:
                        total += entry.stat().st_size
        except FileNotFoundError:
            return 0
        return total

    def save(self, rows: Sequence[Sequence[Any]]) -> bool:
        """Write ``rows`` as one batch; False when the spool is full (nothing written)."""
        if not rows:
            return True
        data = "".join(json.dumps(list(row), separators=(",", ":")) + "\n" for row in rows)
        payload = data.encode()
        if self.size() + len(payload) > self.max_bytes:
            return False
        self.folder.mkdir(parents=True, exist_ok=True)
        name = f"{time.time_ns():020d}-{os.getpid()}-{secrets.token_hex(4)}"
        temp = self.folder / f".{name}.tmp"
        with open(temp, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, self.folder / f"{name}{_READY}")
        return True

    def pending(self) -> bool:
        """Whether any batch waits to be replayed (claims of dead processes given back)."""
        self._give_back_orphans()
        try:
            return any(name.endswith(_READY) for name in os.listdir(self.folder))
        except FileNotFoundError:
            return False

    def claim(self) -> Path | None:
        """The oldest ready batch, claimed by this process (None when there is none)."""
        try:
            names = sorted(n for n in os.listdir(self.folder) if n.endswith(_READY))
        except FileNotFoundError:
            return None
        for name in names:
            claimed = self.folder / f"{name[: -len(_READY)]}{_CLAIMED}-{os.getpid()}"
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
        for line in path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue
        return rows

    @staticmethod
    def done(path: Path) -> None:
        """A claimed batch whose rows are committed: gone."""
        path.unlink(missing_ok=True)

    def give_back(self, path: Path) -> None:
        """A claimed batch that could not be written: ready again for the next replay."""
        stem = path.name.split(_CLAIMED)[0]
        try:
            os.rename(path, self.folder / f"{stem}{_READY}")
        except FileNotFoundError:
            pass

    def _give_back_orphans(self) -> None:
        try:
            names = [n for n in os.listdir(self.folder) if _CLAIMED in n]
        except FileNotFoundError:
            return
        for name in names:
            try:
                pid = int(name.rsplit("-", 1)[1])
            except ValueError:
                continue
            if pid != os.getpid() and not _alive(pid):
                self.give_back(self.folder / name)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
