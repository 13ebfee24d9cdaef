"""The HTTP layer's tests: a fresh in-memory handler with the HTTP layer installed, a real
server on 127.0.0.1 answering in every provider's shape, and a way to name that server's
provider (``OTEL_TOKENS_PROVIDER_URLS``, as a user names a gateway)."""

from __future__ import annotations

import pytest

from otel_tokens import settings as otel_settings
from otel_tokens.capture.http import http_patches

from ..telemetry.conftest import handling
from .wire_server import WireServer


@pytest.fixture
def telemetry():
    with handling(http_patches) as t:
        yield t


@pytest.fixture(scope="module")
def server():
    running = WireServer()
    yield running
    running.close()


@pytest.fixture
def named(monkeypatch, server):
    """``named("groq")``: the server's URL is that provider's (a user's provider URL)."""

    def name(provider: str) -> str:
        monkeypatch.setenv("OTEL_TOKENS_PROVIDER_URLS", f"{server.url}={provider}")
        otel_settings.reload()
        return server.url

    return name


def attributes(t) -> list[dict]:
    """The attributes of every finished span, in order."""
    return [dict(span.attributes) for span in t.finished()]


def only(t) -> dict:
    (span,) = t.finished()
    return dict(span.attributes)


def tokens(attrs: dict) -> tuple:
    return attrs.get("gen_ai.usage.input_tokens"), attrs.get("gen_ai.usage.output_tokens")
