"""otel_tokens beside the official OpenTelemetry OpenAI instrumentation (openai-v2 with
opentelemetry-util-genai) and OpenLLMetry's openai and anthropic instrumentations, patched in
either order, each program in its own process (instrumentors patch process-wide): every call
counted exactly once by otel_tokens, every other instrumentation still producing its span,
and with ``OTEL_TOKENS_REUSE_GENAI_SPAN`` one GenAI span per call where the other
instrumentation makes its span current. ``.ci/run`` runs these in a virtualenv of their own
(``.venv-coexist``), since installing these instrumentations changes what
``opentelemetry-instrument`` loads for the rest of the suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("opentelemetry.instrumentation.openai_v2", reason="needs opentelemetry-instrumentation-openai-v2 (.venv-coexist)")
pytest.importorskip("opentelemetry.instrumentation.openai", reason="needs OpenLLMetry's instrumentations (.venv-coexist)")
pytest.importorskip("opentelemetry.instrumentation.anthropic", reason="needs OpenLLMetry's instrumentations (.venv-coexist)")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROGRAM = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, ROOT)
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    spans = InMemorySpanExporter(); provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans)); trace.set_tracer_provider(provider)
    reader = InMemoryMetricReader(); metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    import anthropic, openai
    import otel_tokens
    from tests.sdk.replay import http_module

    def turn_on(name):
        if name == "otel_tokens":
            otel_tokens.instrument()
        elif name == "openai-v2":
            from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
            OpenAIInstrumentor().instrument()
        elif name == "openllmetry":
            from opentelemetry.instrumentation.openai import OpenAIInstrumentor
            from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor
            OpenAIInstrumentor().instrument(); AnthropicInstrumentor().instrument()

    for name in ORDER:
        turn_on(name)
    chat = {"id": "c1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}}
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-3-5-haiku-20241022",
               "content": [{"type": "text", "text": "hey"}], "stop_reason": "end_turn", "stop_sequence": None,
               "usage": {"input_tokens": 20, "output_tokens": 4}}
    ho, ha = http_module("openai"), http_module("anthropic")
    oai = openai.OpenAI(api_key="k", http_client=ho.Client(transport=ho.MockTransport(lambda r: ho.Response(200, json=chat))))
    ant = anthropic.Anthropic(api_key="k", http_client=ha.Client(transport=ha.MockTransport(lambda r: ha.Response(200, json=message))))
    replies = []
    for _ in range(2):
        replies.append(oai.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}]).choices[0].message.content)
        replies.append(ant.messages.create(model="claude-3-5-haiku-20241022", max_tokens=9, messages=[{"role": "user", "content": "x"}]).content[0].text)
    totals = otel_tokens.current_agent().ledger.cumulative
    points = {}
    for rm in reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if m.name == "gen_ai.client.token.usage":
                    points[sm.scope.name] = sum(p.sum for p in m.data.data_points)
    print(json.dumps({
        "replies": replies, "requests": totals.requests, "input": totals.input_tokens,
        "spans": [[s.instrumentation_scope.name, s.name, s.attributes.get("otel_tokens.cost.usd") is not None]
                  for s in spans.get_finished_spans()],
        "token_points": points,
    }))
""")

OTHERS = ("openai-v2", "openllmetry")


def run(order: list[str], reuse: bool = False) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_TOKENS_REUSE_GENAI_SPAN"] = "true" if reuse else "false"
    env["OTEL_TOKENS_PROMETHEUS_PORT"] = "0"
    code = PROGRAM.replace("ROOT", repr(ROOT)).replace("ORDER", repr(order))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def scopes(result: dict, name_part: str) -> list[str]:
    return sorted(scope for scope, name, _ in result["spans"] if name_part in name)


@pytest.mark.parametrize("other", OTHERS)
@pytest.mark.parametrize("ours_first", [True, False], ids=["otel_tokens first", "otel_tokens last"])
def test_every_call_counted_once_and_no_instrumentation_bypassed(other, ours_first):
    order = ["otel_tokens", other] if ours_first else [other, "otel_tokens"]
    result = run(order)
    assert result["replies"] == ["hi", "hey"] * 2
    assert (result["requests"], result["input"]) == (4, 2 * (12 + 20))  # counted once each
    ours = [s for s in result["spans"] if s[0] == "otel_tokens"]
    assert len(ours) == 4 and all(priced for _, _, priced in ours)
    theirs = [s for s in result["spans"] if s[0] != "otel_tokens"]
    expected = 4 if other == "openllmetry" else 2  # openai-v2: OpenAI only; OpenLLMetry: both SDKs
    assert len(theirs) == expected, result["spans"]  # whichever patched first, theirs still runs
    # the dashboards read otel_tokens' scope only; the other's histogram points are its own
    assert result["token_points"]["otel_tokens"] == 2 * (12 + 3 + 20 + 4)


@pytest.mark.parametrize("other", OTHERS)
@pytest.mark.parametrize("ours_first", [True, False], ids=["otel_tokens first", "otel_tokens last"])
def test_reusing_the_other_span_gives_one_genai_span_per_openai_call(other, ours_first):
    order = ["otel_tokens", other] if ours_first else [other, "otel_tokens"]
    result = run(order, reuse=True)
    assert (result["requests"], result["input"]) == (4, 64)
    openai_spans = [s for s in result["spans"] if "gpt-4o-mini" in s[1] or s[1] == "openai.chat"]
    assert len(openai_spans) == 2 and all(s[0] != "otel_tokens" and s[2] for s in openai_spans), result["spans"]


STYLES = textwrap.dedent("""
    import asyncio, json, sys
    sys.path.insert(0, ROOT)
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    provider = TracerProvider(); provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    import anthropic, openai
    import otel_tokens
    from tests.sdk.replay import http_module

    for name in ORDER:
        if name == "otel_tokens":
            otel_tokens.instrument()
        elif name == "openai-v2":
            from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
            OpenAIInstrumentor().instrument()
        else:
            from opentelemetry.instrumentation.openai import OpenAIInstrumentor
            from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor
            OpenAIInstrumentor().instrument(); AnthropicInstrumentor().instrument()

    def sse(events, named):
        return "".join((f"event: {e['type']}\\n" if named else "") + f"data: {json.dumps(e)}\\n\\n"
                       for e in events).encode() + (b"" if named else b"data: [DONE]\\n\\n")

    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-3-5-haiku-20241022",
               "content": [{"type": "text", "text": "hey"}], "stop_reason": "end_turn", "stop_sequence": None,
               "usage": {"input_tokens": 2000, "output_tokens": 258}}

    def message_events(inp, out):
        start = {**message, "content": [], "stop_reason": None, "usage": {"input_tokens": inp, "output_tokens": 1}}
        return [{"type": "message_start", "message": start},
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hey"}},
                {"type": "content_block_stop", "index": 0},
                {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                 "usage": {"output_tokens": out}},
                {"type": "message_stop"}]

    chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini"}
    chat_events = [{**chunk, "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]},
                   {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                   {**chunk, "choices": [], "usage": {"prompt_tokens": 300, "completion_tokens": 7, "total_tokens": 307}}]
    ha, ho = http_module("anthropic"), http_module("openai")

    def anthropic_answer(request):
        body = json.loads(request.content)
        if body.get("stream"):
            inp, out = (2100, 100) if "s1" in json.dumps(body) else (2200, 116)
            return ha.Response(200, headers={"content-type": "text/event-stream"},
                               content=sse(message_events(inp, out), True))
        return ha.Response(200, json=message)

    def openai_answer(request):
        return ho.Response(200, headers={"content-type": "text/event-stream"}, content=sse(chat_events, False))

    M = "claude-3-5-haiku-20241022"
    ant = anthropic.Anthropic(api_key="k", http_client=ha.Client(transport=ha.MockTransport(anthropic_answer)))
    oai = openai.OpenAI(api_key="k", http_client=ho.Client(transport=ho.MockTransport(openai_answer)))
    ant.messages.create(model=M, max_tokens=9, messages=[{"role": "user", "content": "x"}])
    for _ in ant.messages.create(model=M, max_tokens=9, stream=True, messages=[{"role": "user", "content": "s1"}]):
        pass
    with ant.messages.stream(model=M, max_tokens=9, messages=[{"role": "user", "content": "s2"}]) as s:
        for _ in s.text_stream:
            pass
    for _ in oai.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}],
                                         stream=True, stream_options={"include_usage": True}):
        pass

    async def async_stream():
        client = anthropic.AsyncAnthropic(api_key="k", http_client=ha.AsyncClient(
            transport=ha.MockTransport(anthropic_answer)))
        async with client.messages.stream(model=M, max_tokens=9, messages=[{"role": "user", "content": "s1"}]) as s:
            async for _ in s.text_stream:
                pass

    asyncio.run(async_stream())
    totals = otel_tokens.current_agent().ledger.cumulative
    print(json.dumps({"requests": totals.requests, "input": totals.input_tokens, "output": totals.output_tokens,
                      "faults": dict(otel_tokens.handler.get_handler().faults.counts)}))
""")


@pytest.mark.parametrize("other", OTHERS)
@pytest.mark.parametrize("ours_first", [True, False], ids=["otel_tokens first", "otel_tokens last"])
def test_every_call_style_counted_exactly_beside_the_other(other, ours_first):
    """The three Anthropic call styles (``create``, ``create(stream=True)``,
    ``messages.stream``, sync and async) and a streamed OpenAI chat, each counted once and
    exactly, whichever instrumentation patched first: OpenLLMetry returns its own stream
    manager around the SDK's, whose deferred request is still found."""
    order = ["otel_tokens", other] if ours_first else [other, "otel_tokens"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_TOKENS_PROMETHEUS_PORT"] = "0"
    code = STYLES.replace("ROOT", repr(ROOT)).replace("ORDER", repr(order))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                         check=False)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["faults"] == {}
    assert (result["requests"], result["input"], result["output"]) == (
        5, 2000 + 2100 + 2200 + 300 + 2100, 258 + 100 + 116 + 7 + 100)
