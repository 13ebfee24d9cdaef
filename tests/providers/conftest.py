"""The provider tests' telemetry: a fresh in-memory handler with the ``openai`` SDK patched
(modules testing another SDK define their own ``telemetry``)."""

from __future__ import annotations

import pytest

from otel_tokens.capture import openai_sdk
from otel_tokens.handler import set_handler

from ..telemetry.conftest import make_telemetry


@pytest.fixture
def telemetry():
    t = make_telemetry()
    previous = set_handler(t.handler)
    openai_sdk.install()
    yield t
    openai_sdk.uninstall()
    set_handler(previous)
