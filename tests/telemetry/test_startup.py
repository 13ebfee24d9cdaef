"""Start-up cost: ``instrument()`` installs only the patches; the per-call machinery, the
handler, the ledger, price data and the agent-CLI parsers load at the first call that needs
them, and a failure to load them never reaches the host. Each case runs in a fresh process
(what is in ``sys.modules`` is the point)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

#: loaded by neither ``import otel_tokens`` nor ``instrument()``
LAZY = (
    "opentelemetry.sdk", "opentelemetry.instrumentation", "genai_prices", "tiktoken",
    "otel_tokens.handler",
    "otel_tokens.emit", "otel_tokens.account.settle", "otel_tokens.account.estimate",
    "otel_tokens.account.state", "otel_tokens.account.ledger",
    "otel_tokens.capture.lifecycle", "otel_tokens.capture.stream", "otel_tokens.capture.sdk.openai",
    "otel_tokens.capture.sdk.anthropic", "otel_tokens.capture.agent_cli.commands",
    "otel_tokens.capture.agent_cli.runs", "otel_tokens.capture.methods.backend",
    "otel_tokens.capture.agent_cli.parsers.run", "otel_tokens.capture.sdk.google_genai", "google.genai",
    "otel_tokens.capture.sdk.bedrock", "botocore", "agents", "pydantic_ai", "langgraph", "langchain_core",
    "otel_tokens.capture.sdk.litellm", "litellm",
)  # fmt: skip
#: loaded by the first instrumented openai call
FIRST_SDK_CALL = (
    "genai_prices", "otel_tokens.handler", "otel_tokens.emit", "otel_tokens.account.settle",
    "otel_tokens.account.estimate", "otel_tokens.account.state", "otel_tokens.account.ledger",
    "otel_tokens.capture.lifecycle", "otel_tokens.capture.stream",
    "otel_tokens.capture.sdk.openai",
)  # fmt: skip
#: loaded by the first agent-CLI run
FIRST_CLI_RUN = (
    "otel_tokens.capture.agent_cli.commands", "otel_tokens.capture.agent_cli.runs",
    "otel_tokens.capture.agent_cli.parsers.run",
)  # fmt: skip

PRELUDE = """
import importlib, json, subprocess, sys
import openai, anthropic
import otel_tokens
import otel_tokens.registry as registry
registry._warm_up.__defaults__ = (60.0,)  # the background warm-up (after 0.5 s) loads it all
otel_tokens.instrument()

def loaded(names):
    return sorted(n for n in names if any(m == n or m.startswith(n + ".") for m in sys.modules))

http = importlib.import_module(
    "httpx2" if hasattr(importlib.import_module("openai._base_client"), "httpx2") else "httpx")

def answer(request):
    return http.Response(200, json={
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "hi"}}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}})

def chat():
    client = openai.OpenAI(api_key="test", base_url="http://test.invalid/v1", max_retries=0,
                           http_client=http.Client(transport=http.MockTransport(answer)))
    result = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hello"}])
    return result.choices[0].message.content

def claude():  # recognized as the claude CLI by name; really this Python
    return subprocess.run(["claude", "-c", "print('ok')"], executable=sys.executable,
                          capture_output=True, text=True).stdout.strip()
"""


def run_json(code: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OTEL_TOKENS_"))}
    result = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
                            capture_output=True, text=True, env=env, timeout=120, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_instrument_loads_only_the_patches_and_the_first_calls_load_the_rest():
    out = run_json("""
        after_instrument = loaded(LAZY)
        reply = chat()
        after_chat = loaded(LAZY)
        cli_out = claude()
        from otel_tokens.capture.agent_cli.runs import last_agent_run
        run = last_agent_run()
        totals = otel_tokens.current_agent().ledger.cumulative
        print(json.dumps({"after_instrument": after_instrument, "after_chat": after_chat,
                          "after_cli": loaded(LAZY), "reply": reply, "cli_out": cli_out,
                          "cli": run.cli if run else None, "requests": totals.requests,
                          "input": totals.input_tokens, "output": totals.output_tokens,
                          "faults": otel_tokens.get_handler().faults.counts}))
    """.replace("LAZY", repr(LAZY)))
    assert out["after_instrument"] == []
    assert set(FIRST_SDK_CALL) <= set(out["after_chat"])
    assert not set(FIRST_CLI_RUN) & set(out["after_chat"])
    assert set(FIRST_CLI_RUN) <= set(out["after_cli"])
    assert "opentelemetry.sdk" not in out["after_cli"]  # configure() was never called
    assert out["reply"] == "hi" and out["cli_out"] == "ok" and out["cli"] == "claude"
    assert (out["requests"], out["input"], out["output"]) == (2, 11, 3)  # the chat, the CLI run
    assert "internal" not in out["faults"]


def test_per_call_modules_that_cannot_load_are_counted_and_the_calls_go_through():
    out = run_json("""
        sys.modules["otel_tokens.capture.sdk.openai"] = None  # import raises
        sys.modules["otel_tokens.capture.agent_cli.commands"] = None
        replies = [chat(), chat()]
        cli_out = claude()
        faults = otel_tokens.get_handler().faults.counts
        print(json.dumps({"replies": replies, "cli_out": cli_out, "faults": faults,
                          "requests": otel_tokens.current_agent().ledger.cumulative.requests}))
    """)
    assert out["replies"] == ["hi", "hi"] and out["cli_out"] == "ok"
    # each attempt counted: two chats, one CLI run; the HTTP layer, whose OpenAI readers
    # (wire/openai.py) still load, records the two chats the SDK capture could not
    assert out["faults"].get("internal") == 3
    assert out["requests"] == 2


def test_uninstrument_before_any_call_restores_everything():
    out = run_json("""
        from openai.resources.chat.completions import Completions
        targets = [vars(Completions)["create"], vars(subprocess.Popen)["__init__"],
                   vars(subprocess.Popen)["wait"], vars(subprocess)["run"]]
        wrapped = ["FunctionWrapper" in type(f).__name__ for f in targets]
        otel_tokens.uninstrument()
        targets = [vars(Completions)["create"], vars(subprocess.Popen)["__init__"],
                   vars(subprocess.Popen)["wait"], vars(subprocess)["run"]]
        unwrapped = all(wrapped) and not any("FunctionWrapper" in type(f).__name__ for f in targets)
        reply = chat()
        print(json.dumps({"unwrapped": unwrapped, "reply": reply,
                          "loaded": loaded(["otel_tokens.capture.sdk.openai"])}))
    """)
    assert out == {"unwrapped": True, "reply": "hi", "loaded": []}
