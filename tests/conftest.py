"""Shared fixtures: every test starts with no agents and no ledger environment."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

import otel_tokens
from otel_tokens.agents import _current

settings.register_profile("ci", deadline=None, print_blob=True)
settings.load_profile("ci")


@pytest.fixture(autouse=True)
def _fresh_agents(monkeypatch: pytest.MonkeyPatch):
    for name in list(os.environ):
        if name.startswith("OTEL_TOKENS_"):
            monkeypatch.delenv(name)
    otel_tokens.clear_agents()
    binding = _current.set(None)
    yield
    _current.reset(binding)
    otel_tokens.clear_agents()
