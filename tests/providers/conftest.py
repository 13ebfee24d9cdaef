"""The provider tests' telemetry: a fresh in-memory handler with the ``openai`` SDK patched
(modules testing another SDK define their own ``telemetry``)."""

from __future__ import annotations

import pytest

from otel_tokens.capture.sdk import openai as openai_sdk

from ..telemetry.conftest import handling


@pytest.fixture
def telemetry():
    with handling(openai_sdk) as t:
        yield t
