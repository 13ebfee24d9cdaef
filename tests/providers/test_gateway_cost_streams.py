"""A LiteLLM proxy's reported cost on streams and raw responses, through the real ``openai``
client answered as the proxy answers: the ``x-litellm-response-cost`` header comes with the
stream's response headers (before its body), and is the call's cost
(``otel_tokens.cost.source=provider``); without it, a cost in the final usage chunk
(``usage.cost``, the proxy's ``include_cost_in_streaming_usage``) is; without either, the
price. How the proxy sends them (litellm 1.110, ``litellm/proxy/common_request_processing.py``):
``_stream_response_headers`` builds the stream's headers from ``get_custom_headers`` with the
cost known before the body (``_response_cost_header_value``: ``0.0`` on a cache hit, else
none, dropped by ``exclude_values``); ``_inject_cost_into_usage_dict`` writes
``{**usage, "cost": cost}`` into the usage chunk when asked."""

from __future__ import annotations

import asyncio
import json

import pytest

from .hosts import Host, chat_body, chat_events

openai = pytest.importorskip("openai")

PROXY = "http://litellm-proxy.example.com:4000"
USAGE = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
#: the proxy's own headers on a stream (get_custom_headers), the cost among them
HEADERS = {"x-litellm-call-id": "b5e5a1f6-0c2e-4d7a-9a43-1d2c3e4f5a6b", "x-litellm-model-id": "abc123",
           "x-litellm-response-cost": "0.000375", "x-litellm-key-spend": "0.012"}  # fmt: skip
MESSAGES = [{"role": "user", "content": "Say hello"}]


def span_of(t):
    (span,) = t.finished()
    return dict(span.attributes)


def client_of(host: Host, is_async: bool = False):
    cls = openai.AsyncOpenAI if is_async else openai.OpenAI
    return cls(api_key="sk-1234", base_url=PROXY, http_client=host.client(is_async), max_retries=0)


def assert_header_cost(attrs, cost: float = 0.000375) -> None:
    assert attrs["gen_ai.provider.name"] == "litellm-proxy.example.com"
    assert attrs["otel_tokens.cost.usd"] == pytest.approx(cost)
    assert attrs["otel_tokens.cost.source"] == "provider"


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_chat_stream_takes_the_cost_header(telemetry, is_async):
    host = Host("openai", events=chat_events("gpt-4o-mini", USAGE), headers=HEADERS)
    client = client_of(host, is_async)
    kwargs = {"model": "gpt-4o-mini", "messages": MESSAGES, "stream": True,
              "stream_options": {"include_usage": True}}

    async def run_async() -> str:
        got = await client.chat.completions.create(**kwargs)
        return "".join([c.choices[0].delta.content or "" async for c in got if c.choices])

    if is_async:
        text = asyncio.run(run_async())
    else:
        text = "".join(c.choices[0].delta.content or ""
                       for c in client.chat.completions.create(**kwargs) if c.choices)  # fmt: skip
    assert text == "Hello there"
    attrs = span_of(telemetry)
    assert_header_cost(attrs)
    assert attrs["gen_ai.usage.input_tokens"] == 100 and attrs["gen_ai.usage.output_tokens"] == 20


def test_chat_stream_helper_takes_the_cost_header(telemetry):
    """``chat.completions.stream()`` goes through the patched ``create``."""
    host = Host("openai", events=chat_events("gpt-4o-mini", USAGE), headers=HEADERS)
    with client_of(host).chat.completions.stream(model="gpt-4o-mini", messages=MESSAGES,
                                                  stream_options={"include_usage": True}) as stream:  # fmt: skip
        final = stream.get_final_completion()
    assert final.choices[0].message.content == "Hello there"
    assert_header_cost(span_of(telemetry))


def _response(usage):
    return {"id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-4o-mini",
            "status": "completed" if usage else "in_progress",
            "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": "Hello", "annotations": []}]}],
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "usage": usage}  # fmt: skip


RESPONSES_EVENTS = [
    {"type": "response.created", "sequence_number": 0, "response": _response(None)},
    {"type": "response.output_text.delta", "sequence_number": 1, "item_id": "msg_1", "output_index": 0,
     "content_index": 0, "delta": "Hello", "logprobs": []},
    {"type": "response.completed", "sequence_number": 2, "response": _response(
        {"input_tokens": 100, "output_tokens": 20, "total_tokens": 120,
         "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}})},
]  # fmt: skip


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_responses_stream_takes_the_cost_header(telemetry, is_async):
    host = Host("openai", events=RESPONSES_EVENTS, headers=HEADERS, sse_names=True)
    client = client_of(host, is_async)

    async def run_async() -> list:
        return [e.type async for e in await client.responses.create(model="gpt-4o-mini", input="hi", stream=True)]

    kinds = asyncio.run(run_async()) if is_async else [
        e.type for e in client.responses.create(model="gpt-4o-mini", input="hi", stream=True)]
    assert kinds[-1] == "response.completed"
    attrs = span_of(telemetry)
    assert_header_cost(attrs)
    assert attrs["gen_ai.usage.input_tokens"] == 100


def test_raw_response_takes_the_cost_header(telemetry):
    host = Host("openai", chat_body("gpt-4o-mini", USAGE), headers=HEADERS)
    raw = client_of(host).chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=MESSAGES)
    assert raw.headers["x-litellm-response-cost"] == "0.000375"
    assert raw.parse().choices[0].message.content == "Hello there"
    assert_header_cost(span_of(telemetry))


def test_streaming_response_takes_the_cost_header(telemetry):
    """``with_streaming_response``, non-streamed (parsed) and streamed (events parsed)."""
    client = client_of(Host("openai", chat_body("gpt-4o-mini", USAGE), headers=HEADERS))
    with client.chat.completions.with_streaming_response.create(model="gpt-4o-mini", messages=MESSAGES) as raw:
        assert raw.parse().choices[0].message.content == "Hello there"
    client = client_of(Host("openai", events=chat_events("gpt-4o-mini", USAGE),
                            headers={**HEADERS, "x-litellm-response-cost": "0.0009"}))  # fmt: skip
    with client.chat.completions.with_streaming_response.create(
            model="gpt-4o-mini", messages=MESSAGES, stream=True,
            stream_options={"include_usage": True}) as raw:  # fmt: skip
        assert "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices) == "Hello there"
    first, second = (dict(s.attributes) for s in telemetry.finished())
    assert_header_cost(first)
    assert_header_cost(second, 0.0009)


def test_streaming_response_read_as_bytes_takes_the_cost_header(telemetry):
    """The caller reads the streamed body itself (``iter_lines``): decoded at its end."""
    client = client_of(Host("openai", events=chat_events("gpt-4o-mini", USAGE), headers=HEADERS))
    with client.chat.completions.with_streaming_response.create(
            model="gpt-4o-mini", messages=MESSAGES, stream=True,
            stream_options={"include_usage": True}) as raw:  # fmt: skip
        lines = [line for line in raw.iter_lines() if line.startswith("data: {")]
    assert json.loads(lines[-1][6:])["usage"] == USAGE
    assert_header_cost(span_of(telemetry))


def test_cache_hit_stream_costs_nothing(telemetry):
    """A cache hit: the proxy sends ``0.0`` (it did not call the model), a cost of 0, not
    an unknown and not the model's price."""
    host = Host("openai", events=chat_events("gpt-4o-mini", USAGE),
                headers={**HEADERS, "x-litellm-response-cost": "0.0", "x-litellm-cache-key": "k1"})  # fmt: skip
    got = client_of(host).chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, stream=True,
                                                  stream_options={"include_usage": True})  # fmt: skip
    assert "".join(c.choices[0].delta.content or "" for c in got if c.choices) == "Hello there"
    assert_header_cost(span_of(telemetry), 0.0)


def test_stream_without_usage_keeps_the_header_cost(telemetry):
    """No usage chunk asked for: the tokens are estimated from the text (marked), the cost is
    still the proxy's."""
    events = [e for e in chat_events("gpt-4o-mini", USAGE) if not (isinstance(e, dict) and "usage" in e)]
    host = Host("openai", events=events, headers=HEADERS)
    got = client_of(host).chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in got if c.choices) == "Hello there"
    attrs = span_of(telemetry)
    assert_header_cost(attrs)
    assert attrs["otel_tokens.usage.source"] == "estimated"


def test_cost_in_the_usage_chunk_without_a_header(telemetry):
    """``include_cost_in_streaming_usage``: no cost header (unknown before the body), the bill
    in the usage chunk as ``_inject_cost_into_usage_dict`` writes it."""
    events = chat_events("gpt-4o-mini", {**USAGE, "cost": 0.00042})
    headers = {k: v for k, v in HEADERS.items() if k != "x-litellm-response-cost"}
    host = Host("openai", events=events, headers=headers)
    got = client_of(host).chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, stream=True,
                                                  stream_options={"include_usage": True})  # fmt: skip
    assert "".join(c.choices[0].delta.content or "" for c in got if c.choices) == "Hello there"
    assert_header_cost(span_of(telemetry), 0.00042)


def test_a_stream_header_is_its_calls_only(telemetry):
    """A stream's header is not the next call's cost: that one is priced; a malformed header
    is no cost."""
    client = client_of(Host("openai", events=chat_events("gpt-4o-mini", USAGE), headers=HEADERS))
    stream = client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, stream=True,
                                            stream_options={"include_usage": True})  # fmt: skip
    plain = client_of(Host("openai", chat_body("gpt-4o-mini", USAGE)))
    plain.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    list(stream)
    bad = client_of(Host("openai", events=chat_events("gpt-4o-mini", USAGE),
                         headers={"x-litellm-response-cost": "-1"}))  # fmt: skip
    list(bad.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, stream=True,
                                     stream_options={"include_usage": True}))  # fmt: skip
    first, second, third = (dict(s.attributes) for s in telemetry.finished())
    assert first["otel_tokens.cost.source"] == "computed"  # the plain call, ended first
    assert_header_cost(second)
    assert third["otel_tokens.cost.source"] == "computed"


@pytest.mark.parametrize("cost", [1e308, 10_000.01])
def test_an_implausible_reported_cost_is_rejected_and_the_tokens_kept(telemetry, cost):
    """A gateway's bill beyond any real request (issue 44: 1e308 dropped the ledger row and
    poisoned the cost counter for good): the cost is rejected (``usage_invalid``), the tokens
    are kept and priced, and the next call's cost still adds up."""
    usage = {**USAGE, "cost": cost}
    got = client_of(Host("openai", chat_body("gpt-4o-mini", usage))).chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES)
    assert got.usage.prompt_tokens == 100  # the answer passes through as sent
    fair = client_of(Host("openai", chat_body("gpt-4o-mini", {**USAGE, "cost": 0.0005})))
    fair.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    rejected, accepted = (dict(s.attributes) for s in telemetry.finished())
    assert rejected["gen_ai.usage.input_tokens"] == 100
    assert rejected["gen_ai.usage.output_tokens"] == 20
    assert rejected["otel_tokens.cost.source"] == "computed"
    assert 0 < rejected["otel_tokens.cost.usd"] < 0.001
    assert accepted["otel_tokens.cost.usd"] == pytest.approx(0.0005)
    assert telemetry.errors().get("usage_invalid") == 1
    total = sum(p.value for p in telemetry.points("otel_tokens.cost"))
    assert total == pytest.approx(rejected["otel_tokens.cost.usd"] + 0.0005)
