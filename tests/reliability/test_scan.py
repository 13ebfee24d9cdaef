"""The suite-wide scan can fail: it finds planted secrets and prompts, and lets opted-in content be."""

from __future__ import annotations

import pytest

import otel_tokens
from otel_tokens import Usage

from ..telemetry.conftest import make_telemetry
from .scan import fixture_prompts, problems


@pytest.mark.plants_secrets
def test_planted_secrets_and_prompts_are_found():
    t = make_telemetry()
    prompt = next(iter(fixture_prompts()), "a prompt of sufficient length")
    call = t.handler.start(operation="chat", provider="openai", request_model="m",
                                 attributes={"leak.key": "sk-proj-abcdefghijklmnop1234",
                                             "leak.header": "Authorization: Bearer abc.def.ghi",
                                             "leak.prompt": prompt})  # fmt: skip
    call.stop(Usage(input_tokens=1))
    found = problems([t], capture_content=False)
    assert any("sk-" in f for f in found) and any("Bearer" in f or "authorization" in f.lower() for f in found)
    if fixture_prompts():
        assert any("prompt text" in f for f in found)
        assert not any("prompt text" in f for f in problems([t], capture_content=True))


def test_ordinary_telemetry_is_clean():
    t = make_telemetry()
    with otel_tokens.agent("planner"):
        t.handler.start(operation="chat", provider="openai", request_model="gpt-4o",
                              server_address="api.openai.com").stop(
            Usage(input_tokens=10, output_tokens=2), response_id="chatcmpl-1")
    assert problems([t], capture_content=False) == []
