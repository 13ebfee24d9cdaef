"""Agent-CLI parser throughput: a 100,000-event Copilot JSONL stream (issue 6: < 1 s).

The stream repeats a realistic turn (deltas, a message with tool requests, tool events,
model-call events) and ends with the ``result`` line. Best of three runs is reported.
Run by hand:  python benchmarks/cli_parsers.py [--events N]
"""

from __future__ import annotations

import argparse
import json
import time

from otel_tokens.capture.agent_cli.parsers import claude, codex, copilot, gemini


def copilot_stream(events: int) -> bytes:
    """``events`` JSONL lines of a long Copilot session, ending with its result."""
    lines: list[str] = []
    turn = 0
    while len(lines) < events - 1:
        mid = f"m-{turn}"
        lines += [
            json.dumps({"type": "assistant.turn_start", "data": {"turnId": str(turn)}}),
            json.dumps({"type": "model.call_start", "data": {"turnId": str(turn), "model": "claude-sonnet-4.5"}}),
            json.dumps({"type": "assistant.message_delta", "data": {"messageId": mid, "deltaContent": "Running "}}),
            json.dumps({"type": "assistant.message_delta", "data": {"messageId": mid, "deltaContent": "the tests."}}),
            json.dumps({"type": "assistant.message", "data": {
                "messageId": mid, "model": "claude-sonnet-4.5", "content": "Running the tests.",
                "toolRequests": [{"toolCallId": f"t{turn}", "name": "bash", "arguments": {"command": "pytest -q"}}],
                "outputTokens": 120 + turn % 50}}),
            json.dumps({"type": "tool.execution_start", "data": {"toolCallId": f"t{turn}", "toolName": "bash"}}),
            json.dumps({"type": "tool.execution_complete", "data": {"toolCallId": f"t{turn}", "success": True,
                                                                     "result": {"content": "4 passed"}}}),
            json.dumps({"type": "assistant.turn_end", "data": {"turnId": str(turn)}}),
        ]  # fmt: skip
        turn += 1
    lines = lines[: events - 1]
    lines.append(json.dumps({"type": "result", "sessionId": "s", "exitCode": 0, "usage": {
        "premiumRequests": 12.5, "totalApiDurationMs": 751446, "sessionDurationMs": 881981}}))  # fmt: skip
    return ("\n".join(lines) + "\n").encode()


def best_of(func, data: bytes, repeat: int = 3) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = func(data)
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=100_000)
    args = parser.parse_args()
    data = copilot_stream(args.events)
    seconds, run = best_of(copilot.parse, data)
    print(f"copilot JSONL: {args.events:,} events, {len(data) / 1e6:.1f} MB parsed in "
          f"{seconds:.3f} s ({args.events / seconds:,.0f} events/s; target < 1 s)")  # fmt: skip
    print(f"  -> output tokens {run.total.output_tokens:,}, premium {run.premium_requests}, "
          f"tool calls {run.tool_calls:,}, model calls {run.model_calls:,}")  # fmt: skip
    # the other parsers on streams of the same size, for comparison
    item = json.dumps({"type": "item.completed", "item": {"id": "i", "type": "command_execution"}})
    codex_data = ("\n".join([item] * (args.events - 1)) + "\n" + json.dumps(
        {"type": "turn.completed", "usage": {"input_tokens": 9, "output_tokens": 1}})).encode()  # fmt: skip
    seconds, _ = best_of(codex.parse, codex_data)
    print(f"codex JSONL: {args.events:,} events in {seconds:.3f} s")
    msg = json.dumps({"type": "message", "role": "assistant", "content": "x", "delta": True})
    seconds, _ = best_of(gemini.parse, ("\n".join([msg] * args.events)).encode())
    print(f"gemini stream-json: {args.events:,} events in {seconds:.3f} s")
    assistant = json.dumps({"type": "assistant", "message": {"id": "m", "content": [{"type": "text", "text": "x"}],
                                                              "usage": {"input_tokens": 1, "output_tokens": 1}}})  # fmt: skip
    seconds, _ = best_of(claude.parse, ("\n".join([assistant] * args.events)).encode())
    print(f"claude stream-json: {args.events:,} events in {seconds:.3f} s")


if __name__ == "__main__":
    main()
