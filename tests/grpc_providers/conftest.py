"""The gRPC layer's tests: a fresh in-memory handler with the gRPC layer installed, and real
in-process gRPC servers answering with the provider's own protobuf messages."""

from __future__ import annotations

from concurrent import futures

import pytest

from otel_tokens.capture.grpc import grpc_patches

from ..telemetry.conftest import handling


@pytest.fixture
def telemetry():
    with handling(grpc_patches) as t:
        yield t


def serve(*handlers) -> tuple[object, str]:
    """A real gRPC server on 127.0.0.1 (a free port) with ``handlers``; (server, address)."""
    grpc = pytest.importorskip("grpc")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    for add in handlers:
        add(server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"127.0.0.1:{port}"


def attributes(t) -> list[dict]:
    return [dict(span.attributes) for span in t.finished()]


def tokens(attrs: dict) -> tuple:
    return attrs.get("gen_ai.usage.input_tokens"), attrs.get("gen_ai.usage.output_tokens")


@pytest.fixture
def http_telemetry():
    """The HTTP layer installed (the providers these tests reach over HTTP)."""
    from otel_tokens.capture.http import http_patches

    with handling(http_patches) as t:
        yield t
