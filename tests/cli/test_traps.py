"""Hand-written cases: each trap of issue 6, and failures (exit codes, error events, no result)."""

from __future__ import annotations

import pytest

from otel_tokens.capture.agent_cli.parsers import PARSERS, claude, codex, copilot, gemini, get_parser
from otel_tokens.usage import Usage

from .conftest import own


# -- Copilot --------------------------------------------------------------------------------
def test_copilot_sums_per_model_and_never_counts_deltas():
    run = copilot.parse(own("copilot/traps.jsonl"))
    by_model = {u.model: u.output_tokens for u in run.usage}
    assert by_model == {"gpt-5": 40, "claude-sonnet-4.5": 25}
    assert run.total.output_tokens == 65
    # deltas repeat the message's text: it appears once; the non-JSON line is kept as text
    assert run.text == "warning: telemetry disabled\nDone: 3 files."
    assert run.text.count("Looking") == 0
    assert run.premium_requests == pytest.approx(0.33)  # fractional
    assert run.api_duration_ms == pytest.approx(1234.5)
    assert run.tool_calls == 1 and run.model_calls == 2 and run.session_id == "s-1"
    assert not run.failed and run.parse_errors == 0


def test_copilot_truncated_stream_reads_what_it_can():
    run = copilot.parse(own("copilot/truncated.jsonl"), exit_code=0)
    assert run.total.output_tokens == 12  # only the complete message reported tokens
    assert run.parse_errors == 1  # the cut-off last line
    assert run.text.endswith("Half a sentence")  # a message known only from its deltas
    assert run.failed and "no result" in run.error


def test_copilot_error_event_and_exit_code():
    run = copilot.parse(own("copilot/failed.jsonl"), exit_code=1)
    assert run.failed and run.error == "Premium request quota exceeded"
    assert run.exit_code == 1 and run.total.output_tokens == 9 and run.premium_requests == 1


def test_copilot_result_exit_code_when_process_code_unknown():
    line = b'{"type":"result","exitCode":3,"usage":{"premiumRequests":1}}'
    run = copilot.parse(line)
    assert run.exit_code == 3 and run.failed
    assert run.usage == () and run.premium_requests == 1  # no token figure: none invented


def test_copilot_plaintext_oldest_layout():
    run = copilot.parse(b"", stderr=own("copilot/plaintext_oldest.txt"))
    (usage,) = run.usage
    assert usage.source == "estimated" and usage.model == "claude-sonnet-4"  # 14.8k: rounded
    assert (usage.input_tokens, usage.output_tokens) == (14800, 193)
    assert usage.cache_read_tokens == 0 and usage.cache_write_tokens == 0
    assert run.premium_requests == 2
    assert run.api_duration_ms == 7500 and run.duration_ms == 10200


def test_copilot_plain_text_without_summary_has_no_usage():
    run = copilot.parse("Just an answer.\n")
    assert run.text == "Just an answer." and run.usage == () and run.total is None
    assert run.premium_requests is None and run.tool_calls is None and run.parse_errors == 0


def test_copilot_summary_on_stderr_keeps_stdout_text():
    run = copilot.parse("The answer.\n", stderr="Requests   0.5 Premium (3s)\n"
                        "Tokens     ↑ 1.2m (1.0m cached) • ↓ 950\n")  # fmt: skip
    assert run.text == "The answer."
    assert run.premium_requests == 0.5
    assert (run.total.input_tokens, run.total.cache_read_tokens) == (1_200_000, 1_000_000)
    assert run.total.output_tokens == 950 and run.total.reasoning_tokens is None


def test_copilot_bad_numbers_are_counted_not_raised():
    data = (b'{"type":"assistant.message","data":{"messageId":"a","content":"x","outputTokens":-4}}\n'
            b'{"type":"assistant.message","data":{"messageId":"b","content":"y","outputTokens":"7"}}\n'
            b'{"type":"result","exitCode":0,"usage":{"premiumRequests":"lots"}}\n')  # fmt: skip
    run = copilot.parse(data)
    assert run.usage == () and run.premium_requests is None and run.parse_errors == 3


def test_copilot_usage_file_garbage():
    assert copilot.parse_usage_file(b"not json").parse_errors == 1
    assert copilot.parse_usage_file(b"").usage == ()


# -- Claude Code ----------------------------------------------------------------------------
def test_claude_is_error_wins_over_subtype():
    run = claude.parse(own("claude/is_error.json"), exit_code=0)
    assert run.failed and run.error == "API Error: 529 overloaded"
    assert run.total.output_tokens == 2 and run.cost_usd == pytest.approx(0.0012)


def test_claude_subtype_error_without_is_error():
    run = claude.parse(b'{"type":"result","subtype":"error_max_turns","num_turns":9}')
    assert run.failed and run.error == "error_max_turns" and run.turns == 9


def test_claude_stream_without_result_dedupes_by_message_id():
    run = claude.parse(own("claude/no_result_stream.jsonl"), exit_code=0)
    assert run.failed and "no result" in run.error and run.error_type == "truncated_output"
    (usage,) = run.usage
    # msg_A twice, msg_B once; their output figures are message_start's placeholders: unknown
    assert usage.output_tokens is None and usage.source == "estimated"
    assert usage.cache_read_tokens == 200 + 303 and usage.cache_write_tokens == 100
    assert usage.input_tokens == (3 + 100 + 200) + (1 + 0 + 303)
    assert run.tool_calls == 1 and run.model_calls == 2 and run.session_id == "c-trunc"
    assert run.text == "Almost" and run.cost_usd is None


def test_claude_verbose_json_array():
    data = b'[{"type":"system","subtype":"init","session_id":"s"},{"type":"result","subtype":"success","is_error":false,"result":"ok","modelUsage":{"m":{"inputTokens":1,"outputTokens":2}}}]'
    run = claude.parse(data)
    assert not run.failed and run.text == "ok" and run.total.output_tokens == 2


def test_claude_plain_text_and_nonzero_exit():
    run = claude.parse(b"Error: not logged in\n", exit_code=1)
    assert run.failed and run.usage == () and run.text == "Error: not logged in"


# -- Codex ----------------------------------------------------------------------------------
def test_codex_reports_the_threads_running_totals_marked_cumulative():
    run = codex.parse(own("codex/resumed.jsonl"), exit_code=0)
    assert run.cumulative and run.session_id == "t-resume"
    assert run.total.input_tokens == 60000 and run.total.cache_write_tokens is None
    assert not run.failed  # the reconnect notice is not fatal
    assert run.notices == ("Reconnecting... 1/5",)
    assert run.text == "Resumed and finished."


def test_a_threads_running_totals_become_each_runs_own_share():
    from otel_tokens.account.conversation_totals import ConversationTotals

    threads = ConversationTotals()
    first = Usage(input_tokens=48213, cache_read_tokens=35840, output_tokens=1187, reasoning_tokens=768)
    assert threads.own("codex:t-resume", first) == first
    own_share = threads.own("codex:t-resume", codex.parse(own("codex/resumed.jsonl")).total)
    assert own_share.input_tokens == 60000 - 48213
    assert own_share.cache_read_tokens == 40000 - 35840
    assert own_share.output_tokens == 1500 - 1187 and own_share.reasoning_tokens == 900 - 768


def test_codex_totals_going_down_are_not_subtracted():
    from otel_tokens.account.conversation_totals import ConversationTotals
    from otel_tokens.faults import sink

    threads = ConversationTotals()
    threads.own("codex:t", Usage(input_tokens=10**6, output_tokens=10**6))
    before = sink().counts.get("parse", 0)
    total = codex.parse(own("codex/resumed.jsonl")).total
    assert threads.own("codex:t", total) == total and sink().counts["parse"] == before + 1


def test_codex_turn_failed_is_failure_even_with_exit_zero():
    run = codex.parse(own("codex/turn_failed.jsonl"), exit_code=0)
    assert run.failed and run.error == "stream disconnected before completion"
    assert run.usage == () and run.turns == 1


def test_codex_no_turn_completed():
    run = codex.parse(b'{"type":"thread.started","thread_id":"x"}\n{"type":"turn.started"}\n')
    assert run.failed and run.error_type == "truncated_output" and run.session_id == "x"


def test_codex_cumulative_within_a_run_takes_the_last():
    data = (b'{"type":"turn.completed","usage":{"input_tokens":10,"output_tokens":2}}\n'
            b'{"type":"turn.completed","usage":{"input_tokens":25,"output_tokens":5}}\n')  # fmt: skip
    run = codex.parse(data)
    assert (run.total.input_tokens, run.total.output_tokens) == (25, 5) and run.turns == 2


# -- Gemini ---------------------------------------------------------------------------------
def test_gemini_error_json():
    run = gemini.parse(own("gemini/error.json"), exit_code=41)
    assert run.failed and run.error == "auth failed" and run.usage == ()


def test_gemini_stream_without_total_has_no_reasoning():
    run = gemini.parse(own("gemini/stream_no_total.jsonl"), exit_code=0)
    (usage,) = run.usage
    assert usage.model == "gemini-2.5-flash"
    assert (usage.input_tokens, usage.output_tokens) == (100, 20)
    assert usage.reasoning_tokens is None  # no total: cannot derive it, so unknown
    assert run.text == "Hi" and run.tool_calls == 0


def test_gemini_stream_error_status_and_derived_reasoning():
    run = gemini.parse(own("gemini/stream_error.jsonl"), exit_code=1)
    assert run.failed and run.error == "turn limit"
    assert run.notices == ("Loop detected, retrying",)
    (usage,) = run.usage
    assert usage.reasoning_tokens == 300 - 200 - 50
    assert usage.output_tokens == 50 + 50


def test_gemini_json_prompt_missing_uses_input_plus_cached():
    data = b'{"response":"r","stats":{"models":{"g":{"tokens":{"input":10,"cached":5,"candidates":3}}}}}'
    (usage,) = gemini.parse(data).usage
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (15, 5, 3)
    assert usage.reasoning_tokens is None


def test_gemini_inconsistent_stream_total_is_counted():
    data = b'{"type":"result","status":"success","stats":{"total_tokens":5,"input_tokens":10,"output_tokens":2}}'
    run = gemini.parse(data)
    assert run.parse_errors == 1 and run.total.reasoning_tokens is None


# -- the registry ---------------------------------------------------------------------------
def test_parsers_registry():
    assert set(PARSERS) == {"copilot", "claude", "codex", "gemini"}
    assert get_parser("codex") is codex.parse
    with pytest.raises(ValueError, match="unknown agent-CLI parser"):
        get_parser("cursor")


@pytest.mark.parametrize("cli", sorted(PARSERS))
def test_empty_output_is_not_usage(cli):
    run = PARSERS[cli](b"", exit_code=0)
    assert run.usage == () and run.total is None and run.parse_errors == 0
