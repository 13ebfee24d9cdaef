"""A committed corpus of agent-style requests, for comparing the heuristic with tiktoken.

Written for this project: prose, code, JSON tool arguments, 1/4/8 parallel tool calls, tool
results, an image, in OpenAI chat, OpenAI Responses and Anthropic shapes. ``SEED_FOUR_CALLS``
rebuilds the shape of seed 003's case: one assistant turn fanning out into four tool calls
whose envelopes and arguments, not its (empty) text, carry the tokens.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib

from otel_tokens.account.estimate import Request

PROSE = (
    "The deployment handler failed twice this morning, both times during the database "
    "migration step. The first failure was a lock timeout: the migration tried to add a "
    "non-nullable column to the orders table while the nightly reporting job was still "
    "scanning it. The second failure happened after we re-ran the job manually, and this "
    "time the error was different: a foreign key constraint referenced a table that the "
    "previous, partially applied migration had already renamed.\n\n"
    "Before we try again I would like a plan that makes the migration safe to re-run. "
    "Please check which steps are idempotent, which ones need a guard, and whether the "
    "reporting job can be paused automatically for the duration of the migration. Keep "
    "the plan short, list the risky steps first, and tell me what you would monitor while "
    "it runs. If you need the schema, the last three migration files are in the "
    "repository under db/migrations, and the job definition is in ops/cron/reports.yaml."
)

CODE = '''def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from the first bytes of a PNG, JPEG, GIF or WebP file."""
    try:
        if data[:8] == b"\\x89PNG\\r\\n\\x1a\\n":
            return struct.unpack(">II", data[16:24])
        if data[:6] in (b"GIF87a", b"GIF89a"):
            return struct.unpack("<HH", data[6:10])
        if data[:2] == b"\\xff\\xd8":
            i = 2
            while i + 9 < len(data):
                if data[i] != 0xFF:
                    i += 1
                    continue
                marker = data[i + 1]
                length = struct.unpack(">H", data[i + 2 : i + 4])[0]
                if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                    h, w = struct.unpack(">HH", data[i + 5 : i + 9])
                    return w, h
                i += 2 + length
    except (struct.error, IndexError, ValueError):
        return None
    return None
'''

LOG = "\n".join(
    f"2026-11-21T0{h}:{m:02d}:17Z worker-{m % 4} INFO job=reports rows={1200 + 37 * m} "
    f"elapsed_ms={310 + 13 * m} status=ok"
    for h in range(3) for m in range(0, 60, 7)
)

LISTING = json.dumps({
    "path": "db/migrations",
    "entries": [{"name": f"2026_11_{d:02d}_{n}.sql", "size": 1024 + 97 * d, "modified": f"2026-11-{d:02d}"}
                for d, n in [(12, "add_orders_region"), (17, "rename_customers"), (20, "orders_not_null")]],
}, indent=2)  # fmt: skip

TOOLS = [
    {"type": "function", "function": {
        "name": "read_file", "description": "Read a text file from the repository.",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string", "description": "Path relative to the repository root."},
            "start_line": {"type": "integer"}, "end_line": {"type": "integer"}},
            "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "run_command", "description": "Run a shell command in the sandbox and return its output.",
        "parameters": {"type": "object", "properties": {
            "command": {"type": "string"}, "timeout_seconds": {"type": "number"},
            "mode": {"type": "string", "enum": ["read-only", "write"]}},
            "required": ["command"]}}},
]  # fmt: skip


def _call(i: int, name: str, arguments: dict) -> dict:
    return {"id": f"call_{i:02d}a7Qx9LmP3vT0ZkR8sNb2Wd", "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}  # fmt: skip


SEED_FOUR_CALLS = {
    "role": "assistant", "content": None,
    "tool_calls": [
        _call(1, "write_file", {"path": "agent/context_compressor.py", "content": CODE}),
        _call(2, "run_command", {"command": "python -m pytest tests/agent/test_context_compressor.py "
                                            "-k TokenBudget -x -q --no-header -p no:cacheprovider",
                                 "timeout_seconds": 600, "mode": "read-only"}),
        _call(3, "search", {"query": "_estimate_msg_tokens_for_budget OR _content_length_for_budget",
                            "paths": ["agent/", "tests/agent/"], "max_results": 50, "regex": False}),
        _call(4, "write_file", {"path": "tests/agent/test_context_compressor.py",
                                "content": CODE.replace("image_size", "probe_size")}),
    ],
}  # fmt: skip


def _png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"".join(b"\x00" + b"\x80" * 3 * width for _ in range(height)))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


IMAGE_URL = "data:image/png;base64," + base64.b64encode(_png(1200, 800)).decode()

CHAT_SYSTEM = {"role": "system", "content": "You are a careful senior engineer. Prefer small, "
               "reversible steps and say what you verified."}  # fmt: skip


def corpus() -> dict[str, Request]:
    """name -> request."""
    eight = {"role": "assistant", "content": "Reading the migration files and the job config.",
             "tool_calls": [_call(10 + i, "read_file", {"path": f"db/migrations/2026_11_{12 + i:02d}.sql",
                                                         "start_line": 1, "end_line": 80 + i})
                            for i in range(8)]}  # fmt: skip
    one = {"role": "assistant", "content": None, "tool_calls": [_call(
        30, "run_command", {"command": "psql -c \"SELECT pid, state, query_start, left(query, 60) "
                            "FROM pg_stat_activity WHERE datname = 'orders'\"", "mode": "read-only"})]}  # fmt: skip
    return {
        "prose": Request("openai_chat", "gpt-4o", [CHAT_SYSTEM, {"role": "user", "content": PROSE}]),
        "code": Request("openai_chat", "gpt-4o", [
            {"role": "user", "content": f"Review this function for bugs:\n\n```python\n{CODE}```"}]),
        "json tool arguments": Request("openai_chat", "gpt-4o", [
            {"role": "user", "content": "Which sessions hold locks on orders?"}, one], tools=TOOLS),
        "1 tool call + result": Request("openai_chat", "gpt-4o", [
            {"role": "user", "content": "Which sessions hold locks on orders?"}, one,
            {"role": "tool", "tool_call_id": one["tool_calls"][0]["id"], "content": LOG}], tools=TOOLS),
        "4 parallel tool calls (seed 003)": Request("openai_chat", "gpt-4o", [SEED_FOUR_CALLS]),
        "8 parallel tool calls + results": Request("openai_chat", "gpt-4o", [
            CHAT_SYSTEM, {"role": "user", "content": PROSE}, eight,
            *({"role": "tool", "tool_call_id": c["id"], "content": LISTING} for c in eight["tool_calls"])],
            tools=TOOLS),
        "image": Request("openai_chat", "gpt-4o", [{"role": "user", "content": [
            {"type": "text", "text": "What does this dashboard screenshot show about the failed job?"},
            {"type": "image_url", "image_url": {"url": IMAGE_URL, "detail": "high"}}]}]),
        "responses items": Request("openai_responses", "gpt-4.1", [
            {"role": "user", "content": [{"type": "input_text", "text": PROSE}]},
            {"type": "function_call", "call_id": "call_r1", "name": "read_file",
             "arguments": json.dumps({"path": "ops/cron/reports.yaml"})},
            {"type": "function_call_output", "call_id": "call_r1", "output": LOG}],
            system="Answer as a database reliability engineer."),
        "anthropic tools": Request("anthropic_messages", "claude-sonnet-4-5", [
            {"role": "user", "content": PROSE},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Let me look at the migrations first."},
                {"type": "tool_use", "id": "toolu_01A", "name": "read_file",
                 "input": {"path": "db/migrations/2026_11_20_orders_not_null.sql"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01A",
                                          "content": CODE}]}],
            system=[{"type": "text", "text": "You are a careful senior engineer."}],
            tools=[{"name": t["function"]["name"], "description": t["function"]["description"],
                    "input_schema": t["function"]["parameters"]} for t in TOOLS]),
    }  # fmt: skip
