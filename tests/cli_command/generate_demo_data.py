"""Writes the demo's scenario and recorded responses (otel_tokens/cli/demo_data/).

Run by hand when the scenario changes: ``python tests/cli_command/generate_demo_data.py``.
The files are committed; the demo and the tests only read them. Every figure the demo's
totals must equal is written once, in ``scenario.json`` ("usage" of each step, "expected").
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "otel_tokens" / "cli" / "demo_data"
CREATED = 1764000000
OPENAI_MODEL = "gpt-4o-2024-08-06"
ANTHROPIC_MODEL = "claude-sonnet-4-5-20250929"
COPILOT_MODEL = "claude-sonnet-4.5"


def guide(role: str, n: int) -> str:
    lines = [f"You are the {role} of a small software team working on the `mathx` repository.",
             "Follow the repository map and conventions below. Keep answers short and precise.",
             "", "Repository map:"]
    for i in range(n):
        lines.append(f"- src/mathx/module_{i:02d}.py: numeric helpers group {i} "
                     f"(functions f{i}_add, f{i}_scale, f{i}_clamp; tested in "
                     f"tests/test_module_{i:02d}.py; owner team-{i % 4})")
    lines += ["", "Conventions: type hints everywhere, pytest for tests, no new dependencies,",
              "a CHANGELOG entry for every user-visible fix."]
    return "\n".join(lines)


TASK = "Fix the failing test in tests/test_mathx.py (clamp() returns the wrong bound) and add a changelog entry."
PYTEST_OUT = "\n".join(
    ["============================= test session starts =============================",
     "collected 42 items", "",
     "tests/test_mathx.py ........F.................................          [100%]", "",
     "=================================== FAILURES ==================================",
     "_______________________________ test_clamp_upper ______________________________",
     "    def test_clamp_upper():", ">       assert clamp(12, 0, 10) == 10",
     "E       assert 0 == 10", "E        +  where 0 = clamp(12, 0, 10)", "",
     "tests/test_mathx.py:31: AssertionError",
     "=========================== short test summary info ===========================",
     "FAILED tests/test_mathx.py::test_clamp_upper - assert 0 == 10",
     "========================= 1 failed, 41 passed in 0.21s ========================="])
MATHX_SRC = "\n".join(
    ["from __future__ import annotations", "", "",
     "def clamp(value: float, low: float, high: float) -> float:",
     '    """value limited to [low, high]."""', "    if value < low:", "        return low",
     "    if value > high:", "        return low", "    return value", "", "",
     "def scale(value: float, factor: float) -> float:", "    return value * factor", ""])
PLAN = ("Plan:\n1. Coder: read src/mathx.py and fix clamp() so values above `high` return `high`.\n"
        "2. Coder: run the tests.\n3. Copilot: add a CHANGELOG entry.\n4. Planner: review.")
FIX_TEXT = "The upper branch returns `low`; it must return `high`. Editing src/mathx.py."
REVIEW = "Reviewed: the fix is minimal, the tests pass, the changelog entry is present. Approved."
FINAL = ("Done. clamp() now returns `high` for values above the range; 42 tests pass. "
         "Summary of the change for the pull request:\n" + "\n".join(
             f"- checked {f}: unaffected" for f in ["scale()", "module_00 helpers", "module_01 helpers",
                                                    "docs examples", "type hints"]))

OPENAI_TOOLS = [
    {"type": "function", "function": {"name": "run_tests", "description": "Run the test suite",
                                       "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "read_file", "description": "Read a file",
                                       "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                                                      "required": ["path"]}}},
]
ANTHROPIC_TOOLS = [
    {"name": "read_file", "description": "Read a file",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    {"name": "edit_file", "description": "Replace text in a file",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "old": {"type": "string"},
                                                       "new": {"type": "string"}},
                      "required": ["path", "old", "new"]}},
]


def oa_usage(prompt: int, completion: int, cached: int) -> dict:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}


def oa_json(rid: str, message: dict, finish: str, usage: dict) -> str:
    return json.dumps({"id": rid, "object": "chat.completion", "created": CREATED, "model": OPENAI_MODEL,
                       "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
                       "usage": usage, "service_tier": "default", "system_fingerprint": "fp_demo"}, indent=2) + "\n"


def oa_sse(rid: str, text: str, usage: dict, pieces: int = 8) -> str:
    def chunk(delta: dict, finish=None, choices=True, use=None) -> str:
        body = {"id": rid, "object": "chat.completion.chunk", "created": CREATED, "model": OPENAI_MODEL,
                "service_tier": "default", "system_fingerprint": "fp_demo",
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}] if choices else [],
                "usage": use}
        return "data: " + json.dumps(body, separators=(",", ":")) + "\n\n"
    out = [chunk({"role": "assistant", "content": "", "refusal": None})]
    step = max(1, len(text) // pieces)
    for i in range(0, len(text), step):
        out.append(chunk({"content": text[i:i + step]}))
    out.append(chunk({}, "stop"))
    out.append(chunk(None, choices=False, use=usage))
    out.append("data: [DONE]\n\n")
    return "".join(out)


def an_usage(fresh: int, cache_write: int, cache_read: int, output: int) -> dict:
    return {"input_tokens": fresh, "cache_creation_input_tokens": cache_write,
            "cache_read_input_tokens": cache_read, "output_tokens": output, "service_tier": "standard"}


def an_json(rid: str, content: list, stop: str, usage: dict) -> str:
    return json.dumps({"id": rid, "type": "message", "role": "assistant", "model": ANTHROPIC_MODEL,
                       "content": content, "stop_reason": stop, "stop_sequence": None, "usage": usage},
                      indent=2) + "\n"


def an_sse(rid: str, blocks: list, stop: str, usage: dict) -> str:
    def ev(name: str, data: dict) -> str:
        return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"
    start_usage = dict(usage, output_tokens=1)
    out = [ev("message_start", {"type": "message_start", "message": {
        "id": rid, "type": "message", "role": "assistant", "model": ANTHROPIC_MODEL, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": start_usage}})]
    out.append(ev("ping", {"type": "ping"}))
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            out.append(ev("content_block_start", {"type": "content_block_start", "index": index,
                                                  "content_block": {"type": "text", "text": ""}}))
            text = block["text"]
            step = max(1, len(text) // 6)
            for i in range(0, len(text), step):
                out.append(ev("content_block_delta", {"type": "content_block_delta", "index": index,
                                                      "delta": {"type": "text_delta", "text": text[i:i + step]}}))
        else:
            out.append(ev("content_block_start", {"type": "content_block_start", "index": index, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}))
            raw = json.dumps(block["input"])
            step = max(1, len(raw) // 4)
            for i in range(0, len(raw), step):
                out.append(ev("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {
                    "type": "input_json_delta", "partial_json": raw[i:i + step]}}))
        out.append(ev("content_block_stop", {"type": "content_block_stop", "index": index}))
    out.append(ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                    "usage": {"output_tokens": usage["output_tokens"]}}))
    out.append(ev("message_stop", {"type": "message_stop"}))
    return "".join(out)


def write(path: str, text: str) -> None:
    (OUT / path).write_text(text)


def main() -> None:
    planner_system = guide("planner", 40)
    coder_system = guide("coder", 70)
    steps = []

    # ---- planner (OpenAI chat completions)
    p_msgs = [{"role": "system", "content": planner_system}, {"role": "user", "content": TASK}]
    call1 = {"id": "call_demo_run_tests", "type": "function",
             "function": {"name": "run_tests", "arguments": json.dumps({"path": "tests/test_mathx.py"})}}
    u = (1312, 18, 0)
    write("openai/plan_1.json", oa_json("chatcmpl-demo-plan-1", {"role": "assistant", "content": None,
          "tool_calls": [call1], "refusal": None, "annotations": []}, "tool_calls", oa_usage(*u)))
    steps.append({"id": "plan-1", "agent": "planner", "provider": "openai", "stream": False,
                  "title": "planner: runs the tests first (tool call)", "response": "openai/plan_1.json",
                  "request": {"model": "gpt-4o", "messages": list(p_msgs), "tools": OPENAI_TOOLS},
                  "usage": {"input": u[0], "output": u[1], "cache_read": u[2]}})
    p_msgs = p_msgs + [{"role": "assistant", "content": None, "tool_calls": [call1]},
                       {"role": "tool", "tool_call_id": call1["id"], "content": PYTEST_OUT}]
    u = (1614, 96, 1280)
    write("openai/plan_2.sse", oa_sse("chatcmpl-demo-plan-2", PLAN, oa_usage(*u)))
    steps.append({"id": "plan-2", "agent": "planner", "provider": "openai", "stream": True,
                  "title": "planner: writes the plan (streaming, cached prefix)", "response": "openai/plan_2.sse",
                  "request": {"model": "gpt-4o", "messages": list(p_msgs), "tools": OPENAI_TOOLS},
                  "usage": {"input": u[0], "output": u[1], "cache_read": u[2]}})
    p_msgs = p_msgs + [{"role": "assistant", "content": PLAN}]

    # ---- coder (Anthropic messages, prompt caching on the system prompt)
    system = [{"type": "text", "text": coder_system, "cache_control": {"type": "ephemeral"}}]
    c_msgs = [{"role": "user", "content": "Step 1 of the plan: " + PLAN.splitlines()[1][3:]}]
    read = {"type": "tool_use", "id": "toolu_demo_read", "name": "read_file", "input": {"path": "src/mathx.py"}}
    u = (38, 2410, 0, 64)  # fresh, cache write, cache read, output
    write("anthropic/code_1.json", an_json("msg_demo_code_1", [
        {"type": "text", "text": "I'll read the module first."}, read], "tool_use", an_usage(*u)))
    steps.append({"id": "code-1", "agent": "coder", "provider": "anthropic", "stream": False,
                  "title": "coder: reads the file (tool use, writes the prompt cache)",
                  "response": "anthropic/code_1.json",
                  "request": {"model": "claude-sonnet-4-5", "max_tokens": 2048, "system": system,
                              "messages": list(c_msgs), "tools": ANTHROPIC_TOOLS},
                  "usage": {"input": u[0] + u[1] + u[2], "output": u[3], "cache_write": u[1], "cache_read": u[2]}})
    c_msgs = c_msgs + [{"role": "assistant", "content": [{"type": "text", "text": "I'll read the module first."}, read]},
                       {"role": "user", "content": [{"type": "tool_result", "tool_use_id": read["id"],
                                                     "content": MATHX_SRC}]}]
    edit = {"type": "tool_use", "id": "toolu_demo_edit", "name": "edit_file",
            "input": {"path": "src/mathx.py", "old": "    if value > high:\n        return low",
                      "new": "    if value > high:\n        return high"}}
    u = (205, 0, 2410, 142)
    write("anthropic/code_2.sse", an_sse("msg_demo_code_2", [{"type": "text", "text": FIX_TEXT}, edit],
                                         "tool_use", an_usage(*u)))
    steps.append({"id": "code-2", "agent": "coder", "provider": "anthropic", "stream": True, "helper": "stream",
                  "title": "coder: fixes clamp() (streaming tool use, cache hit)", "response": "anthropic/code_2.sse",
                  "request": {"model": "claude-sonnet-4-5", "max_tokens": 2048, "system": system,
                              "messages": list(c_msgs), "tools": ANTHROPIC_TOOLS},
                  "usage": {"input": u[0] + u[1] + u[2], "output": u[3], "cache_write": u[1], "cache_read": u[2]}})
    c_msgs = c_msgs + [{"role": "assistant", "content": [{"type": "text", "text": FIX_TEXT}, edit]},
                       {"role": "user", "content": [{"type": "tool_result", "tool_use_id": edit["id"],
                                                     "content": "edited src/mathx.py (1 line)"}]}]

    # ---- Copilot CLI run (a real subprocess of the fake `copilot` the package ships)
    cop = {"input": 9214, "output": 212, "cache_read": 7936, "cache_write": 0, "premium": 1.0}
    events = [
        {"type": "session.tools_updated", "data": {"model": COPILOT_MODEL}, "ephemeral": True},
        {"type": "user.message", "data": {"content": "Add a CHANGELOG entry for the clamp() fix"}},
        {"type": "assistant.turn_start", "data": {"turnId": "0"}},
        {"type": "assistant.message", "data": {"messageId": "m1", "model": COPILOT_MODEL,
         "content": "I'll add the entry under Unreleased.", "toolRequests": [
             {"toolCallId": "tc1", "name": "edit", "arguments": {"path": "CHANGELOG.md"}, "type": "function"}],
         "turnId": "0", "outputTokens": 148}},
        {"type": "tool.execution_start", "data": {"toolCallId": "tc1", "toolName": "edit"}},
        {"type": "tool.execution_complete", "data": {"toolCallId": "tc1", "success": True}},
        {"type": "assistant.turn_end", "data": {"turnId": "0"}},
        {"type": "assistant.turn_start", "data": {"turnId": "1"}},
        {"type": "assistant.message", "data": {"messageId": "m2", "model": COPILOT_MODEL,
         "content": "Added a Fixed entry for clamp() to CHANGELOG.md.", "toolRequests": [],
         "turnId": "1", "outputTokens": 64}},
        {"type": "assistant.turn_end", "data": {"turnId": "1"}},
        {"type": "result", "sessionId": "demo-copilot-session", "exitCode": 0,
         "usage": {"premiumRequests": cop["premium"], "totalApiDurationMs": 4120, "sessionDurationMs": 6013}},
    ]
    for i, e in enumerate(events):
        e["id"] = f"e{i:07d}-0000-4000-8000-000000000000"
        e["timestamp"] = f"2026-11-20T10:00:{i:02d}.000Z"
    write("copilot/run.jsonl", "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events))
    usage_file = {"totalPremiumRequestCost": cop["premium"], "totalUserRequests": 1, "totalApiDurationMs": 4120,
                  "modelMetrics": {COPILOT_MODEL: {"requests": {"count": 2, "cost": cop["premium"]},
                                                   "usage": {"inputTokens": cop["input"], "outputTokens": cop["output"],
                                                             "cacheReadTokens": cop["cache_read"],
                                                             "cacheWriteTokens": 0, "reasoningTokens": 0}}}}
    write("copilot/usage.json", json.dumps(usage_file, indent=2) + "\n")
    steps.append({"id": "copilot", "agent": "coder", "provider": "github_copilot", "cli": "copilot",
                  "title": "coder: delegates the changelog to the Copilot CLI (subprocess)",
                  "argv": ["copilot", "-p", "Add a CHANGELOG entry for the clamp() fix", "--output-format", "json",
                           "--allow-all-tools"],
                  "usage": {"input": cop["input"], "output": cop["output"], "cache_read": cop["cache_read"],
                            "cache_write": 0, "premium_requests": cop["premium"]}})

    # ---- planner review: first attempt rate-limited (429), then a streamed answer
    p_msgs = p_msgs + [{"role": "user", "content": "Coder and Copilot report: " + FIX_TEXT +
                        " Tests pass (42). CHANGELOG updated. Please review."}]
    write("openai/rate_limited.json", json.dumps({"error": {
        "message": "Rate limit reached for gpt-4o in organization org-demo on tokens per min (TPM): "
                   "Limit 30000, Used 29750, Requested 1702. Please try again in 2.9s.",
        "type": "tokens", "param": None, "code": "rate_limit_exceeded"}}, indent=2) + "\n")
    steps.append({"id": "plan-3-failed", "agent": "planner", "provider": "openai", "stream": True,
                  "title": "planner: review request rate-limited (HTTP 429)", "response": "openai/rate_limited.json",
                  "status": 429, "request": {"model": "gpt-4o", "messages": list(p_msgs), "tools": OPENAI_TOOLS},
                  "usage": None})
    u = (1768, 27, 1664)
    write("openai/plan_3.sse", oa_sse("chatcmpl-demo-plan-3", REVIEW, oa_usage(*u)))
    steps.append({"id": "plan-3", "agent": "planner", "provider": "openai", "stream": True,
                  "title": "planner: reviews (retry, streaming)", "response": "openai/plan_3.sse",
                  "request": {"model": "gpt-4o", "messages": list(p_msgs), "tools": OPENAI_TOOLS},
                  "usage": {"input": u[0], "output": u[1], "cache_read": u[2]}})

    # ---- coder's final summary: the request that takes it over its token budget
    c_msgs = c_msgs + [{"role": "user", "content": "Summarize the change for the pull request. Full test log:\n"
                        + "\n".join(f"tests/test_module_{i:02d}.py::test_case_{j} PASSED"
                                    for i in range(30) for j in range(8))}]
    u = (3962, 0, 2410, 118)
    write("anthropic/code_3.sse", an_sse("msg_demo_code_3", [{"type": "text", "text": FINAL}], "end_turn",
                                         an_usage(*u)))
    steps.append({"id": "code-3", "agent": "coder", "provider": "anthropic", "stream": True, "helper": "create",
                  "title": "coder: summarizes for the PR (streaming; goes over its token budget)",
                  "response": "anthropic/code_3.sse",
                  "request": {"model": "claude-sonnet-4-5", "max_tokens": 2048, "system": system,
                              "messages": list(c_msgs), "tools": ANTHROPIC_TOOLS},
                  "usage": {"input": u[0] + u[1] + u[2], "output": u[3], "cache_write": u[1], "cache_read": u[2]}})

    expected: dict = {}
    for s in steps:
        agent = expected.setdefault(s["agent"], {"requests": 0, "failed": 0, "input": 0, "output": 0,
                                                 "cache_read": 0, "cache_write": 0, "premium_requests": 0.0})
        if s["usage"] is None:
            agent["failed"] += 1
            continue
        agent["requests"] += 1
        for k in ("input", "output", "cache_read", "cache_write"):
            agent[k] += s["usage"].get(k, 0)
        agent["premium_requests"] += s["usage"].get("premium_requests", 0.0)
    total = {k: sum(a[k] for a in expected.values()) for k in next(iter(expected.values()))}
    scenario = {
        "description": "Offline demo: a planner (OpenAI) and a coder (Anthropic + Copilot CLI) fix a bug.",
        "agents": {"planner": {"max_input_tokens": 128000}, "coder": {"max_input_tokens": 200000}},
        "budget": {"agent": "coder", "tokens": 20000, "window_seconds": 3600},
        "steps": steps,
        "expected": {"agents": expected, "total": total},
    }
    (OUT / "scenario.json").write_text(json.dumps(scenario, indent=1) + "\n")


if __name__ == "__main__":
    main()
