"""Several processes, one ``/metrics``: the embedded Prometheus endpoint of a multi-worker server.

gunicorn ``-w N``, uvicorn ``--workers N``, Celery prefork, a forked ``multiprocessing`` pool
or several workers in one pod each record their own usage, but only one process can listen on
the configured port. So the processes of one port on one host (one scrape target) work
together, through a folder of their own (``OTEL_TOKENS_PROMETHEUS_WORKERS_DIR``; by default
``<tmp>/otel_tokens-<uid>-<port>``):

* the process that binds the port is the **front**: a scrape returns its own metrics and those
  of every live worker, fetched from each over loopback at scrape time;
* every other process is a **worker**: it serves its own metrics on a free loopback port and
  writes that port to the folder, and takes over the front's port when the front has gone
  (checked every :data:`WATCH_SECONDS`);
* a process that exits (a worker, or a front that shared the port) leaves its last metrics
  in the folder; the front (the next one, for a front) serves them for
  :data:`FINAL_SECONDS` (several scrapes) and then drops them, so its last increments reach
  Prometheus. A worker killed outright (SIGKILL, OOM) loses what it counted since the last
  scrape, as any scraped process does; its series then end, and the restarted worker's
  start from zero under a new ``service_instance_id``, which ``increase()``/``rate()`` handle.

Every series of a worker carries its ``service_instance_id`` (the resource label), so each
worker's usage appears exactly once; the interpreter's own ``process_*``/``python_*``
series are served for the front alone (they carry no instance and would collide).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import socket
import stat
import tempfile
import threading
import time
import urllib.request
from typing import Any, Iterable, Iterator

from .. import faults, threads

__all__ = ["Endpoint", "default_folder", "serve"]

_log = logging.getLogger("otel_tokens")

WATCH_SECONDS = 2.0  # how often a worker checks that the front is still there
FINAL_SECONDS = 300.0  # how long the front serves the last metrics of a worker that exited
FETCH_SECONDS = 2.0  # the front's wait for one worker at scrape time
INSTANCE_LABEL = "service_instance_id"


def default_folder(port: int) -> str:
    """The folder the processes of one port share (per user: another user's cannot join)."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return os.path.join(tempfile.gettempdir(), f"otel_tokens-{uid}-{port}")


def _own_folder(folder: str) -> bool:
    """Create ``folder`` (0700) or accept it if it is a real folder of this user's and no one
    else's: a symlink planted at its path, or another user's folder, is refused with one line
    (the process then serves its port alone)."""
    try:
        os.makedirs(os.path.dirname(folder) or ".", exist_ok=True)
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
        info = os.lstat(folder)
    except OSError:
        return False
    why = _not_ours(info)
    if why:
        detail = (
            f"/metrics folder {folder!r} not used ({why}): this process shares its port "
            "with no other (OTEL_TOKENS_PROMETHEUS_WORKERS_DIR)"
        )
        faults.report("config", detail=detail, each=True)
        return False
    return True


def _not_ours(info: os.stat_result) -> str:
    """Why a folder (its ``lstat``) cannot hold this user's workers' figures, or ``""``."""
    if stat.S_ISLNK(info.st_mode):
        return "a symlink"
    if not stat.S_ISDIR(info.st_mode):
        return "not a folder"
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        return f"owned by uid {info.st_uid}"
    if info.st_mode & 0o022:
        return "writable by others"
    return ""


class Endpoint:
    """This process's part: the front (serving the port) or a worker (serving a free port)."""

    def __init__(self, host: str, port: int, folder: str | None, registry: Any) -> None:
        self.host, self.port, self.registry = host, port, registry
        self.folder = folder or default_folder(port)
        self._default_folder = folder is None  # the port's default, named once it is bound
        self.role = "none"
        self.url: str | None = None
        self._server: Any = None
        self._pid = os.getpid()
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self._lock = threading.Lock()
        self._shared = False  # the port was shared with another process of ours at some time

    # -- starting ---------------------------------------------------------------------------
    def start(self) -> None:
        """Become the front if the port is free, else a worker of the front (port 0, any
        free port, has no front to share: the process serves alone)."""
        try:
            self._become_front()
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE or self.port == 0 or not self._front_is_ours():
                raise  # another program holds the port: nothing of ours would scrape this one
            self._become_worker()

    def _front_is_ours(self, wait: float = 0.5) -> bool:
        """Whether a live otel_tokens process serves the port (its ``front.json``; a front
        starting at the same moment is given ``wait`` seconds to write it)."""
        if not _own_folder(self.folder):
            return False
        deadline = time.monotonic() + wait
        while True:
            try:
                with open(os.path.join(self.folder, "front.json")) as f:
                    entry = json.load(f)
                if int(entry["port"]) == self.port and _alive(int(entry["pid"])):
                    return True
            except (OSError, ValueError, KeyError, TypeError):
                pass
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)

    def _serve(self, port: int, host: str, registry: Any) -> tuple[Any, int]:
        from prometheus_client import start_http_server

        started = start_http_server(port, addr=host, registry=registry)
        server = started[0] if isinstance(started, tuple) else None
        return server, (server.server_port if server is not None else port)

    def _become_front(self) -> None:
        from prometheus_client import CollectorRegistry

        front = CollectorRegistry(auto_describe=False)
        front.register(_Merged(self))
        server, port = self._serve(self.port, self.host, front)
        with self._lock:
            self._close_server()
            self._shared = self._shared or self.role == "worker"  # taken over from a front
            self._server, self.role = server, "front"
            self.url = f"http://{self.host}:{port}/metrics"
        if self.port == 0:  # any free port: its own folder, shared by its forked children alone
            self.port = port
            if self._default_folder:
                self.folder = default_folder(port)
        if _own_folder(self.folder):
            _write_json(os.path.join(self.folder, "front.json"), {"pid": self._pid, "port": port})
        _forget(self._registration())

    def _become_worker(self) -> None:
        server, port = self._serve(0, "127.0.0.1", self.registry)
        with self._lock:
            self._server, self.role = server, "worker"
            self.url = f"http://{self.host}:{self.port}/metrics"
        _write_json(self._registration(), {"pid": self._pid, "port": port})
        if self._watcher is None:
            self._watcher = threads.start(self._watch, "otel_tokens-metrics-front")

    def _registration(self) -> str:
        return os.path.join(self.folder, f"{self._pid}.worker.json")

    def _watch(self) -> None:
        """A worker's watch: take the port over when the front has gone."""
        while not self._stop.wait(WATCH_SECONDS):
            if (
                self.role != "worker"
                or os.getpid() != self._pid
                or _listening(self.host, self.port)
            ):
                continue
            try:
                self._become_front()
                _log.info(
                    "otel_tokens: this process now serves %s (the previous one exited)", self.url
                )
                return
            except OSError:
                continue  # another worker was quicker
            except Exception as exc:
                faults.report("exporter", exc, f"cannot take over /metrics: {exc!r}")
                return

    # -- ending -----------------------------------------------------------------------------
    def _close_server(self) -> None:
        if self._server is not None:
            try:
                self._server.shutdown()
                self._server.server_close()
            except Exception:
                pass
            self._server = None

    def close(self) -> None:
        """At exit: the process leaves its last metrics for the front (a worker's, or the
        worker taking the port over), and releases its port."""
        self._stop.set()
        if os.getpid() != self._pid:
            return
        _forget(self._registration())
        with self._lock:
            self._close_server()

    def leave_final_metrics(self) -> None:
        """Write this process's metrics as they are now, for the front to serve after it exits.
        A front leaves them when it has shared the port: the next to take it over may be a
        worker not registered yet (gunicorn respawning every one at once); a process that
        served alone leaves nothing for a later run to show as its own."""
        if os.getpid() != self._pid or self.port == 0 or self.role not in ("worker", "front"):
            return
        if self.role == "front" and not (self._shared or self._has_company()):
            return
        from prometheus_client import generate_latest

        try:
            text = generate_latest(self.registry).decode("utf-8")
            _write_text(os.path.join(self.folder, f"{self._pid}.final.prom"), text)
            _forget(self._registration())  # from now on the front reads the file, not the process
        except Exception as exc:
            faults.report("exporter", exc, f"cannot leave the last metrics for the front: {exc!r}")

    def _has_company(self) -> bool:
        """Whether another process of the port is registered or has left its last metrics."""
        mine, now = f"{self._pid}.", time.time()
        try:
            names = [n for n in os.listdir(self.folder) if not n.startswith(mine)]
        except OSError:
            return False
        return any(n.endswith(".worker.json") for n in names) or any(
            n.endswith(".final.prom") and _fresh(os.path.join(self.folder, n), now) for n in names
        )

    def after_fork_in_child(self) -> None:
        """A forked child does not serve the parent's port: it drops the inherited listening
        socket (the parent's stays open) and becomes a worker of the front."""
        server, self._server = self._server, None
        if server is not None:
            try:
                server.socket.close()
            except Exception:
                pass
        self._pid, self._watcher, self._stop = os.getpid(), None, threading.Event()
        self._lock = threading.Lock()
        self.role = "none"
        if _own_folder(self.folder):
            self._become_worker()

    # -- the front's scrape -----------------------------------------------------------------
    def sources(self) -> Iterator[tuple[str, str]]:
        """(what, exposition text) of every worker: live ones fetched, exited ones' last."""
        try:
            names = sorted(os.listdir(self.folder))
        except OSError:
            return
        now = time.time()
        for name in names:
            path = os.path.join(self.folder, name)
            if name.endswith(".worker.json"):
                self._shared = True
                text = self._fetch(path)
            elif name.endswith(".final.prom"):
                text = _final(path, now)
            else:
                continue
            if text:
                yield name, text

    def _fetch(self, path: str) -> str | None:
        try:
            with open(path) as f:
                entry = json.load(f)
            pid, port = int(entry["pid"]), int(entry["port"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if pid == os.getpid():
            return None
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{port}/metrics", timeout=FETCH_SECONDS
            ) as r:
                return r.read().decode("utf-8")
        except OSError:
            if not _alive(pid):
                _forget(path)  # a worker killed outright: nothing of it can be read any more
            return None


class _Merged:
    """The front's collector: its own families, then each worker's series merged into them."""

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint

    def collect(self) -> Iterable[Any]:
        from prometheus_client.parser import text_string_to_metric_families

        families: dict[str, Any] = {}
        seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
        for family in self._endpoint.registry.collect():
            families[family.name] = _copy(family)
            seen.update((s.name, tuple(sorted(s.labels.items()))) for s in family.samples)
        for what, text in self._endpoint.sources():
            try:
                parsed = list(text_string_to_metric_families(text))
            except Exception as exc:
                faults.report("exporter", exc, f"unreadable metrics of worker {what}: {exc!r}")
                continue
            for family in parsed:
                _merge(families, family, seen)
        return list(families.values())


def _copy(family: Any) -> Any:
    from prometheus_client.core import Metric

    out = Metric(family.name, family.documentation, family.type, getattr(family, "unit", ""))
    out.samples = list(family.samples)
    return out


def _merge(families: dict[str, Any], family: Any, seen: set[Any]) -> None:
    """Add a worker's instance-labelled series to the family of the same name, each series
    once (a worker exiting mid-scrape is read live and from its last metrics)."""
    samples = []
    for sample in family.samples:
        key = (sample.name, tuple(sorted(sample.labels.items())))
        if INSTANCE_LABEL in sample.labels and key not in seen:
            seen.add(key)
            samples.append(sample)
    if not samples:
        return  # the interpreter's own series: the front's alone
    mine = families.get(family.name)
    if mine is None:
        mine = families[family.name] = _copy(family)
        mine.samples = samples
    elif mine.type == family.type:
        mine.samples.extend(samples)


def _fresh(path: str, now: float) -> bool:
    """Whether a worker's last metrics are still served (left less than FINAL_SECONDS ago)."""
    try:
        return now - os.path.getmtime(path) <= FINAL_SECONDS
    except OSError:
        return False


def _final(path: str, now: float) -> str | None:
    try:
        if now - os.path.getmtime(path) > FINAL_SECONDS:
            _forget(path)
            return None
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return None


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection(
            (host if host not in ("", "0.0.0.0") else "127.0.0.1", port), timeout=1.0
        ):
            return True
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _forget(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _write_json(path: str, value: Any) -> None:
    _write_text(path, json.dumps(value))


def _write_text(path: str, text: str) -> None:
    """Written whole or not at all (a reader never sees half a file)."""
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(temporary, path)


def serve(host: str, port: int, folder: str | None, registry: Any = None) -> Endpoint:
    """Start this process's part of the port's /metrics (raises OSError when neither works)."""
    if registry is None:
        from prometheus_client import REGISTRY as registry
    endpoint = Endpoint(host, port, folder, registry)
    endpoint.start()
    return endpoint
