"""What a process tree that did not end in time is doing: for a test's failure message.

Linux only (``/proc``): each process of the tree, each thread's state, kernel wait channel and
pending, blocked and caught signals. A test app that registered :mod:`faulthandler` on
``dump_signal`` (see ``tests/process/apps``) is sent it first, so every thread's Python stack
is on its stderr too."""

from __future__ import annotations

import contextlib
import glob
import os
import signal
import time

__all__ = ["describe", "tree"]


def tree(pid: int) -> list[int]:
    """``pid`` and every process descending from it."""
    parents: dict[int, int] = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            parents[int(stat.split("/")[2])] = int(fields[1])
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(child for child, parent in parents.items() if parent == current)
    return found


def describe(pid: int, dump_signal: int | None = None) -> str:
    """Every thread of ``pid``'s tree, one line each; ``dump_signal`` sent to each first."""
    pids = tree(pid)
    if dump_signal is not None:
        for each in pids:
            with contextlib.suppress(OSError):
                os.kill(each, dump_signal)
        time.sleep(1.0)  # the dumps are written from the signal handler, at once
    lines = []
    for each in pids:
        for task in sorted(glob.glob(f"/proc/{each}/task/*")):
            with contextlib.suppress(OSError):
                with open(f"{task}/status") as f:
                    fields = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
                with open(f"{task}/wchan") as f:
                    wchan = f.read().strip()
                state = " ".join(f"{k}={fields.get(k, '').strip()}" for k in (
                    "Name", "State", "SigPnd", "ShdPnd", "SigBlk", "SigCgt"))  # fmt: skip
                lines.append(f"pid {each} task {task.rsplit('/', 1)[1]}: {state} wchan={wchan}")
    return "\n".join(lines)


DUMP_SIGNAL = getattr(signal, "SIGUSR2", None)  #: what the test apps dump their stacks on
