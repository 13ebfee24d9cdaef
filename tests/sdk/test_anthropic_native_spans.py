"""anthropic >= 2 emits its own call span: one instrumented call must still make exactly one
GenAI span, with the SDK's tracing on (the default once a tracer provider exists) and off.

Each scenario runs in a fresh interpreter, because OpenTelemetry's global tracer provider
can be set only once per process: the child sets a real SDK ``TracerProvider`` as the global
one, makes calls through real clients over a mock transport, and reports the spans it got.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent('''
    import asyncio, json, os, sys, warnings
    warnings.simplefilter("ignore")
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)

    from otel_tokens.capture.sdk import anthropic as anthropic_sdk
    from otel_tokens.handler import Handler, set_handler
    from otel_tokens.account.pricing import Pricer
    from otel_tokens.account.anomalies import AnomalyGuard
    from tests import cassettes
    from tests.sdk.replay import anthropic_client

    set_handler(Handler(pricer=Pricer(), guard=AnomalyGuard()))  # the global providers
    if os.environ["INSTRUMENT"] == "1":
        anthropic_sdk.install()

    MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
               "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
               "stop_sequence": None, "usage": {"input_tokens": 3, "output_tokens": 2,
               "cache_read_input_tokens": 4, "cache_creation_input_tokens": 0}}
    EVENTS = [
        {"type": "message_start", "message": {**MESSAGE, "content": [], "stop_reason": None,
         "usage": {"input_tokens": 3, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
        {"type": "message_stop"},
    ]
    SSE = "".join(f"event: {e['type']}\\ndata: {json.dumps(e)}\\n\\n" for e in EVENTS)

    def served(text, uri="https://api.anthropic.com/v1/messages"):
        return cassettes.Interaction("child", 0, "POST", uri, None, 200, {}, text)

    KW = dict(model="claude-x", max_tokens=5, messages=[{"role": "user", "content": "hello"}])
    options = {}
    if os.environ.get("EXPLICIT") == "1":
        options["open_telemetry"] = {"tracer_provider": provider}

    def client(text, is_async=False):
        return anthropic_client([served(text)], is_async=is_async, **options)

    def genai(spans):
        return [s for s in spans if any(k.startswith("gen_ai.") for k in s.attributes)]

    report = {}
    def call(name, fn):
        exporter.clear()
        result = fn()
        provider.force_flush()
        spans = exporter.get_finished_spans()
        report[name] = {
            "genai": len(genai(spans)),
            "names": sorted(s.name for s in genai(spans)),
            "scopes": sorted(s.instrumentation_scope.name for s in genai(spans)),
            "input": [s.attributes.get("gen_ai.usage.input_tokens") for s in genai(spans)],
        }
        return result

    call("create", lambda: client(json.dumps(MESSAGE))[0].messages.create(**KW))
    call("create_stream", lambda: list(client(SSE)[0].messages.create(**KW, stream=True)))
    def manager():
        with client(SSE)[0].messages.stream(**KW) as s:
            return s.get_final_message()
    call("stream_manager", manager)
    call("beta_create", lambda: client(json.dumps(MESSAGE))[0].beta.messages.create(**KW))
    async def acreate():
        c, _ = client(json.dumps(MESSAGE), is_async=True)
        return await c.messages.create(**KW)
    call("async_create", lambda: asyncio.run(acreate()))
    async def amanager():
        c, _ = client(SSE, is_async=True)
        async with c.messages.stream(**KW) as s:
            return await s.get_final_message()
    call("async_stream_manager", lambda: asyncio.run(amanager()))
    # a method otel_tokens does not instrument keeps the SDK's own span
    call("count_tokens", lambda: client('{"input_tokens": 7}')[0].messages.count_tokens(**{k: v for k, v in KW.items() if k != "max_tokens"}))

    # the untraced copy follows credentials the application assigns afterwards
    c, replay = anthropic_client([served(json.dumps(MESSAGE)), served(json.dumps(MESSAGE))], **options)
    c.messages.create(**KW)
    c.api_key = "rotated"
    c.messages.create(**KW)
    report["api_keys"] = [
        [k for k in ("test", "rotated") if any(v.endswith(k) for v in r.headers.values())]
        for r in replay.sent
    ]
    print(json.dumps(report))
''')

CALLS = ["create", "create_stream", "stream_manager", "beta_create", "async_create", "async_stream_manager"]


def run_child(instrument: bool, native: str | None, explicit: bool = False) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "ANTHROPIC_"))}
    env.update(PYTHONPATH=str(ROOT), INSTRUMENT="1" if instrument else "0", EXPLICIT="1" if explicit else "0")
    if native is not None:
        env["ANTHROPIC_OPEN_TELEMETRY"] = native
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _native_tracing() -> bool:
    import anthropic

    return hasattr(anthropic.Anthropic, "open_telemetry")


@pytest.mark.parametrize("native,explicit", [(None, False), ("true", False), (None, True), ("false", False)])
def test_one_genai_span_per_call(native, explicit):
    report = run_child(instrument=True, native=native, explicit=explicit)
    for name in CALLS:
        got = report[name]
        assert got["genai"] == 1, (name, got)
        assert got["scopes"] == ["otel_tokens"], (name, got)  # ours, with the usage on it
        assert got["names"] == ["chat claude-x"]
        assert got["input"][0] in (3, 7)  # 3 (+4 cache read for the non-streamed message)
    assert report["create"]["input"] == [7]
    assert report["api_keys"] == [["test"], ["rotated"]]
    native_on = _native_tracing() and native != "false"
    # the SDK keeps its own span for the methods otel_tokens leaves alone
    assert report["count_tokens"]["genai"] == (1 if native_on else 0)


@pytest.mark.skipif(not _native_tracing(), reason="this anthropic has no tracing of its own")
def test_the_sdk_does_trace_without_us():
    """The control: uninstrumented, the SDK's own span is there (so a double would show)."""
    report = run_child(instrument=False, native=None)
    for name in CALLS:
        assert report[name]["genai"] == 1, (name, report[name])
        assert report[name]["scopes"] == ["com.anthropic.sdk.python"]
    assert run_child(instrument=False, native="false")["create"]["genai"] == 0
