"""Every sample in ../shared/fixtures/cli gives the exact numbers of its README."""

from __future__ import annotations

import pytest

from otel_tokens.capture.agent_cli.parsers import claude, codex, copilot, gemini


def test_copilot_success(shared):
    run = copilot.parse((shared / "copilot/success.jsonl").read_bytes())
    assert run.exit_code == 0 and not run.failed
    (usage,) = run.usage
    assert usage.output_tokens == 293 == 87 + 142 + 64
    assert usage.input_tokens is None  # stdout never carries input: unknown, not 0
    assert usage.cache_read_tokens is None and usage.reasoning_tokens is None
    assert usage.model == "claude-sonnet-4.5" and usage.source == "reported"
    assert run.premium_requests == 1
    assert run.tool_calls == 2
    assert run.api_duration_ms == 9421 and run.duration_ms == 14873
    assert run.text == ("Fixed the sign error in `add()` in src/mathx.py (`a - b` -> `a + b`); "
                        "`test_add` should now pass.")  # fmt: skip
    assert run.session_id == "3f9c2b7e-8d41-4a6e-9b0c-5e7a1d2f4c88"
    assert run.model_calls == 3 and run.parse_errors == 0
    assert run.raw == (shared / "copilot/success.jsonl").read_text()


def test_copilot_legacy(shared):
    run = copilot.parse((shared / "copilot/success_legacy_v1_0_28.jsonl").read_text())
    assert run.exit_code == 0 and not run.failed
    assert run.total.output_tokens == 133 and run.total.input_tokens is None
    assert run.premium_requests == 3
    assert run.tool_calls == 1
    assert run.text == "There are 2 Go files: `file1.go` and `file2.go`."


def test_copilot_usage_file(shared):
    run = copilot.parse_usage_file((shared / "copilot/usage_output_file.json").read_bytes())
    (usage,) = run.usage
    assert usage.model == "claude-sonnet-4.5"
    assert usage.input_tokens == 56606 and usage.cache_read_tokens == 36992
    assert usage.output_tokens == 293
    # the real CLI writes cacheWriteTokens 0 when the API sent no such figure: unknown
    assert usage.cache_write_tokens is None and usage.reasoning_tokens == 0
    assert run.premium_requests == 1 and run.model_calls == 3


def test_copilot_jsonl_with_usage_file(shared):
    run = copilot.parse((shared / "copilot/success.jsonl").read_bytes(),
                        usage_file=(shared / "copilot/usage_output_file.json").read_bytes())
    total = run.total
    assert (total.input_tokens, total.output_tokens, total.cache_read_tokens) == (56606, 293, 36992)
    assert run.premium_requests == 1 and run.tool_calls == 2 and run.text.startswith("Fixed")


def test_copilot_plaintext_current(shared):
    run = copilot.parse((shared / "copilot/plaintext_current.txt").read_text())
    total = run.total
    assert total.source == "estimated"  # the display rounds to k
    assert total.input_tokens == pytest.approx(48200, abs=50)
    assert total.cache_read_tokens == pytest.approx(41900, abs=50)
    assert total.output_tokens == pytest.approx(1300, abs=50)
    assert total.reasoning_tokens == 412
    assert run.premium_requests == 1
    assert run.text.endswith("all 5 tests pass now.")  # the summary is not the agent's text
    assert "Premium" not in run.text and "Changes" not in run.text


def test_copilot_plaintext_legacy_v2(shared):
    run = copilot.parse((shared / "copilot/plaintext_legacy_v2.txt").read_text())
    assert len(run.usage) == 2
    assert {u.model for u in run.usage} == {"claude-sonnet-4.5", "claude-haiku-4.5"}
    total = run.total
    assert total.source == "estimated"
    assert total.input_tokens == pytest.approx(479100, abs=100)
    assert total.output_tokens == pytest.approx(11493, abs=100)
    assert total.cache_read_tokens == pytest.approx(415600, abs=100)
    assert run.premium_requests == 1
    assert run.text == "Fixed the sign error in `add()` in src/mathx.py; `test_add` should now pass."


@pytest.mark.parametrize("name", ["success.json", "success_stream.jsonl"])
def test_claude(shared, name):
    run = claude.parse((shared / "claude" / name).read_bytes(), exit_code=0)
    assert run.exit_code == 0 and not run.failed
    sonnet, haiku = run.usage
    assert sonnet.model == "claude-sonnet-4-5-20250929"
    # Claude's inputTokens (5) excludes the cache; Usage.input_tokens includes it.
    assert sonnet.fresh_input_tokens == 5
    assert sonnet.input_tokens == 5 + 45454 + 5045
    assert (sonnet.output_tokens, sonnet.cache_read_tokens, sonnet.cache_write_tokens) == (325, 45454, 5045)
    assert sonnet.cost_usd == pytest.approx(0.03744495)
    assert haiku.model == "claude-haiku-4-5-20251001"
    assert (haiku.input_tokens, haiku.output_tokens) == (412, 18)
    assert haiku.cost_usd == pytest.approx(0.000502)
    assert run.cost_usd == pytest.approx(0.03794695)
    assert run.total.cost_usd == pytest.approx(0.03794695)
    assert run.turns == 3
    assert run.text.startswith("Fixed the sign error")
    if name.endswith(".jsonl"):
        assert run.tool_calls == 2  # tool_use blocks, once per block id
        assert run.model_calls == 3  # assistant events de-duplicated by message id
    else:
        assert run.tool_calls is None  # the json result does not carry tool calls


def test_codex(shared):
    run = codex.parse((shared / "codex/success.jsonl").read_bytes(), exit_code=0)
    assert run.exit_code == 0 and not run.failed
    (usage,) = run.usage
    assert usage.input_tokens == 48213 and usage.cache_read_tokens == 35840
    assert usage.cache_write_tokens is None  # Codex prints 0 when the API sent none
    assert usage.output_tokens == 1187 and usage.reasoning_tokens == 768
    assert usage.model is None and run.cost_usd is None  # the stream names neither
    assert run.session_id == "019a8c3e-5b2f-7c41-9d0e-3f6a1b2c4d5e"
    assert run.text.startswith("Fixed the sign error")


@pytest.mark.parametrize("name", ["success.json", "success_stream.jsonl"])
def test_gemini(shared, name):
    run = gemini.parse((shared / "gemini" / name).read_bytes(), exit_code=0)
    assert run.exit_code == 0 and not run.failed
    (usage,) = run.usage  # role stats are not added again
    assert usage.model == "gemini-2.5-pro"
    assert usage.input_tokens == 26537 and usage.cache_read_tokens == 16204
    assert usage.output_tokens == 832 == 177 + 655
    assert usage.reasoning_tokens == 655
    assert run.tool_calls == 2
    assert run.text == "Fixed the sign error in `add()` in `src/mathx.py` (`a - b` → `a + b`); `test_add` should now pass."
