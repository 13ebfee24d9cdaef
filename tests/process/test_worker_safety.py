"""What otel_tokens leaves alone in a host's processes: another owner's signal wakeup fd
(asyncio's), and a folder it does not own planted where the /metrics workers' folder goes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from .conftest import clean_env, free_port

_ASYNCIO_CHILD = """
import asyncio, json, os, signal
import otel_tokens
otel_tokens.configure()

async def main():
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, lambda: None)  # the loop's wakeup fd is set
    theirs = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(theirs)
    pid = os.fork()
    if pid == 0:  # otel_tokens' fork hook has run (it installs its SIGTERM flush here)
        handler = getattr(signal.getsignal(signal.SIGTERM), "__name__", "")
        seen = {"loop": theirs, "child": signal.set_wakeup_fd(-1), "sigterm": handler}
        print(json.dumps(seen), flush=True)
        os._exit(0)
    os.waitpid(pid, 0)

asyncio.run(main())
"""


def test_a_forked_child_keeps_asyncios_wakeup_fd(tmp_path):
    """The SIGTERM watcher of a forked child sets Python's wakeup fd only when nobody has one:
    it found asyncio's by replacing it, then cleared it, so the child's loop never woke for
    its signal handlers again."""
    env = clean_env(OTEL_TOKENS_PROMETHEUS_PORT="0", TMPDIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", _ASYNCIO_CHILD], env=env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["sigterm"] == "_flush_then_terminate", seen  # the hook ran in the child
    assert seen["loop"] != -1 and seen["child"] == seen["loop"], seen


_FRONT = """
import os, sys, otel_tokens
setup = otel_tokens.configure()
pid = os.fork()  # a worker of the front: it would register in the folder
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
print(setup.prometheus_url, flush=True)
"""


def test_a_symlink_planted_at_the_metrics_folder_is_not_followed(tmp_path):
    """Another user of the host can create ``<tmp>/otel_tokens-<uid>-<port>`` before us, as a
    symlink to a folder of theirs: the front and its workers wrote their figures through it.
    The folder is now refused (one line) and the process serves its port alone."""
    port = free_port()
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    planted = tmp_path / f"otel_tokens-{os.getuid()}-{port}"
    planted.symlink_to(theirs)
    env = clean_env(OTEL_TOKENS_PROMETHEUS_PORT=str(port), TMPDIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", _FRONT], env=env, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"http://127.0.0.1:{port}/metrics", done.stderr  # serves alone
    assert os.listdir(theirs) == []
    assert planted.is_symlink()
    assert done.stderr.count("not used (a symlink)") == 1, done.stderr


def test_the_metrics_folder_is_made_private(tmp_path):
    """Made by the front with mode 0700; the forked worker registers in it."""
    port = free_port()
    env = clean_env(OTEL_TOKENS_PROMETHEUS_PORT=str(port), TMPDIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", _FRONT], env=env, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    folder = tmp_path / f"otel_tokens-{os.getuid()}-{port}"
    assert not folder.is_symlink() and folder.stat().st_mode & 0o777 == 0o700
    assert "not used" not in done.stderr
