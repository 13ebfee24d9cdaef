"""Batch results' tests: a fresh in-memory handler with the openai and anthropic captures
installed, the real clients against a local server answering as the two batch APIs do."""

from __future__ import annotations

import pytest

from otel_tokens import settings as otel_settings
from otel_tokens.capture.sdk import anthropic_patches
from otel_tokens.capture.sdk import openai_patches

from ..telemetry.conftest import handling
from .server import BatchServer


@pytest.fixture
def telemetry():
    with handling(openai_patches, anthropic_patches) as t:
        yield t


@pytest.fixture(scope="module")
def server():
    running = BatchServer()
    yield running
    running.close()


@pytest.fixture
def named(monkeypatch, server):
    """The server's URL named as both providers' (as a user names a gateway)."""
    monkeypatch.setenv(
        "OTEL_TOKENS_PROVIDER_URLS", f"{server.openai_url}=openai;{server.anthropic_url}=anthropic"
    )
    otel_settings.reload()
    return server.url


def spans(t) -> list[dict]:
    return [dict(span.attributes) for span in t.finished()]
