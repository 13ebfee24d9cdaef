"""Shared fixtures: every test starts with no agents and no ledger environment."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

import otel_tokens
from otel_tokens import settings as otel_settings
from otel_tokens.account.agents import _current

settings.register_profile("ci", deadline=None, print_blob=True)
settings.load_profile("ci")


@pytest.fixture(autouse=True)
def _fresh_agents(monkeypatch: pytest.MonkeyPatch):
    for name in list(os.environ):
        if name.startswith("OTEL_TOKENS_"):
            monkeypatch.delenv(name)
    otel_settings.reload()
    otel_tokens.clear_agents()
    from otel_tokens import faults

    faults.sink()._pending.clear()  # faults an earlier test reported with no recorder bound
    binding = _current.set(None)
    yield
    _current.reset(binding)
    otel_tokens.clear_agents()
    monkeypatch.undo()
    otel_settings.reload()  # the environment as it was, for the next test


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """After every test: nothing it emitted carries a secret, or prompt text unless the test
    opted in to content capture (checked while the test's environment is still in place)."""
    from .reliability.scan import describe, problems
    from .telemetry.conftest import CREATED

    yield
    capture = os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "").lower() in (
        "1", "true", "yes", "on")  # fmt: skip
    found = problems(CREATED, capture) if item.get_closest_marker("plants_secrets") is None else []
    CREATED.clear()
    if found:
        raise AssertionError(f"telemetry carries secrets or prompt content: {describe(found)}")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "plants_secrets: the test puts secret-like text into telemetry on purpose"
    )
    config.addinivalue_line(
        "markers", "slow: seconds to minutes of work; the contributors' fast loop leaves it out"
    )


@pytest.fixture(autouse=True)
def _no_telemetry_from_earlier_tests():
    from .telemetry.conftest import CREATED

    CREATED.clear()
    yield


@pytest.fixture
def provider_urls(monkeypatch: pytest.MonkeyPatch):
    """``provider_urls(url, "ibm.watsonx.ai")``: calls to ``url`` are that provider's (a user's
    ``OTEL_TOKENS_PROVIDER_URLS``), forgotten after the test."""
    from otel_tokens import settings as otel_settings

    def name(url: str, provider: str) -> str:
        monkeypatch.setenv("OTEL_TOKENS_PROVIDER_URLS", f"{url}={provider}")
        otel_settings.reload()
        return url

    yield name
    monkeypatch.delenv("OTEL_TOKENS_PROVIDER_URLS", raising=False)
    otel_settings.reload()
