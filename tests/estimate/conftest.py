"""Estimation tests run with tiktoken's real encodings (loaded offline, see tokenizer_data)."""

from __future__ import annotations

import pytest

from ..tokenizer_data import load_encodings


@pytest.fixture(scope="session", autouse=True)
def _encodings(tmp_path_factory):
    load_encodings(tmp_path_factory.mktemp("tiktoken"))


@pytest.fixture(scope="session")
def encoding():
    from otel_tokens.account.estimate.text import encoding_for

    return encoding_for("gpt-4o")
