"""Real processes against a fake LLM server, telemetry read as Prometheus and a collector do.

``FakeLLM`` answers chat completions with a different, known usage each time and sums what it
answered (the truth). ``Collector`` is an OTLP/HTTP receiver that keeps the last cumulative
value of each series (resource ``service.instance.id`` + metric + attributes), as a collector
does. ``scraped_input`` reads one ``/metrics`` scrape.
"""

from __future__ import annotations

import gzip
import http.server
import itertools
import json
import os
import pathlib
import socket
import threading
import time
import urllib.request
import zlib
from contextlib import closing

import pytest

from ..local_server import LocalServer

ROOT = pathlib.Path(__file__).resolve().parents[2]
APPS = pathlib.Path(__file__).resolve().parent / "apps"


class FakeLLM:
    """Chat completions with prompt_tokens 100, 101, 102, ... (sum kept: the truth); a subclass
    keeps more of the truth in :meth:`_count`. Closed by :meth:`close` (``contextlib.closing``)."""

    delay = 0.02  # seconds: a real model takes a while, so concurrent requests overlap

    def __init__(self) -> None:
        self._counter = itertools.count(100)
        self._lock = threading.Lock()
        self.input_total = 0
        self.calls = 0
        self.server = LocalServer(self._answer)
        self.url = self.server.url + "/v1"

    def _answer(self, path: str, body: object) -> tuple[int, str, bytes, dict[str, str]]:
        time.sleep(self.delay)
        with self._lock:
            tokens = next(self._counter)
            self.input_total += tokens
            self.calls += 1
            self._count(body, tokens)
        payload = {"id": f"chatcmpl-{tokens}", "object": "chat.completion", "created": 0,
                   "model": "gpt-4o-mini",
                   "choices": [{"index": 0, "finish_reason": "stop",
                                "message": {"role": "assistant", "content": "hi"}}],
                   "usage": {"prompt_tokens": tokens, "completion_tokens": 7,
                             "total_tokens": tokens + 7}}  # fmt: skip
        return 200, "application/json", json.dumps(payload).encode(), {}

    def _count(self, body: object, tokens: int) -> None:
        """More truth kept of one answer (under the lock); none here."""

    def close(self) -> None:
        self.server.close()


class Collector(http.server.ThreadingHTTPServer):
    """OTLP/HTTP metrics receiver keeping the last cumulative value per series (and a count of
    the spans it was sent)."""

    request_queue_size = 128  # many processes export at once: socketserver's 5 drops some

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _OtlpHandler)
        self.last: dict[tuple, float] = {}
        #: answer each instance's first export 503 (kept nothing): its exporter retries after
        #: a backoff, so its export outlasts whatever ends the process meanwhile
        self.refuse_first = False
        self.refused: set[str] = set()
        self.spans = 0
        self.lock = threading.Lock()
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def input_total(self, metric: str = "otel_tokens.tokens") -> float:
        with self.lock:
            return sum(v for (_, name, attrs), v in self.last.items()
                       if name == metric and ("gen_ai.token.type", "input") in attrs)  # fmt: skip

    def instances(self) -> set[str]:
        with self.lock:
            return {key[0] for key in self.last}


class _OtlpHandler(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802
        from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2

        body = self.rfile.read(int(self.headers["Content-Length"]))
        encoding = self.headers.get("Content-Encoding", "")
        body = gzip.decompress(body) if encoding == "gzip" else zlib.decompress(body) if encoding == "deflate" else body
        if self.path == "/v1/metrics":
            request = metrics_service_pb2.ExportMetricsServiceRequest()
            request.ParseFromString(body)
            if _refused(self.server, request):  # type: ignore[arg-type]
                self.send_response(503)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            _keep_last(self.server, request)  # type: ignore[arg-type]
        elif self.path == "/v1/traces":
            _count_spans(self.server, body)  # type: ignore[arg-type]
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def _refused(collector: Collector, request: object) -> bool:
    """The first export of each instance, when ``collector.refuse_first``."""
    instances = {a.value.string_value for r in request.resource_metrics  # type: ignore[attr-defined]
                 for a in r.resource.attributes if a.key == "service.instance.id"}  # fmt: skip
    with collector.lock:
        if not collector.refuse_first or instances <= collector.refused:
            return False
        collector.refused |= instances
        return True


def _count_spans(collector: Collector, body: bytes) -> None:
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

    request = trace_service_pb2.ExportTraceServiceRequest()
    request.ParseFromString(body)
    count = sum(len(scope.spans) for r in request.resource_spans for scope in r.scope_spans)
    with collector.lock:
        collector.spans += count


def _keep_last(collector: Collector, request: object) -> None:
    for resource_metrics in request.resource_metrics:  # type: ignore[attr-defined]
        resource = {a.key: a.value.string_value for a in resource_metrics.resource.attributes}
        instance = resource.get("service.instance.id", "")
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                if not metric.HasField("sum"):
                    continue
                for point in metric.sum.data_points:
                    attrs = frozenset((a.key, a.value.string_value) for a in point.attributes)
                    value = point.as_int if point.HasField("as_int") else point.as_double
                    with collector.lock:
                        collector.last[(instance, metric.name, attrs)] = value


def scraped_input(url: str) -> float:
    """Input tokens of ``otel_tokens_tokens_total`` in one scrape of ``url`` (each series once:
    a duplicate series would make Prometheus reject the scrape, so it fails here too)."""
    from prometheus_client.parser import text_string_to_metric_families

    text = urllib.request.urlopen(url, timeout=10).read().decode()
    total, seen = 0.0, set()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            assert key not in seen, f"duplicate series {key}"
            seen.add(key)
            if sample.name == "otel_tokens_tokens_total" and sample.labels.get("gen_ai_token_type") == "input":
                total += sample.value
    return total


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout: float = 30.0, every: float = 0.2):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except OSError:  # the port changing hands (a restarted front): ask again
            if time.monotonic() > deadline:
                raise
            value = None
        if value or time.monotonic() > deadline:
            return value
        time.sleep(every)


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PROMETHEUS_"))}
    # the apps, and this checkout's otel_tokens whatever the installed one is
    env.update(PYTHONPATH=os.pathsep.join([str(APPS), str(ROOT)]), OTEL_TRACES_EXPORTER="none", **extra)
    return env


@pytest.fixture
def llm():
    with closing(FakeLLM()) as server:
        yield server


@pytest.fixture
def collector():
    receiver = Collector()
    yield receiver
    receiver.shutdown()
    receiver.server_close()
