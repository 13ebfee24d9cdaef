"""The full bill, for what no recording in the corpus shows, built from the providers'
documented response formats (the fields of the SDKs' own types) and served to the real
clients: service tiers, hosted-tool fees, 1-hour cache writes, batch, Anthropic iterations
billed on top of a message, background responses polled to completion, compaction, audio by
the second; token-count endpoints record nothing; a billed component with no price is
named and counted, never a silent 0.

Expected costs come from genai-prices itself (``calc_price`` with the price context), not
from otel_tokens' code.
"""

from __future__ import annotations

import json

import genai_prices
import pytest

import otel_tokens
from otel_tokens.capture.sdk import anthropic as anthropic_sdk
from otel_tokens.capture.sdk import openai as openai_sdk

from .. import cassettes
from ..telemetry.conftest import handling
from .replay import anthropic_client, openai_client

OPENAI = "https://api.openai.com/v1"
ANTHROPIC = "https://api.anthropic.com/v1/messages"


@pytest.fixture
def telemetry():
    with handling(openai_sdk, anthropic_sdk) as t:
        yield t


def served(*bodies: dict, method: str = "POST", uri: str = OPENAI) -> list[cassettes.Interaction]:
    return [cassettes.Interaction("documented", i, method, uri, None, 200,
                                  {"content-type": ["application/json"]}, json.dumps(body))
            for i, body in enumerate(bodies)]  # fmt: skip


def price(model: str, provider: str = "openai", context: dict | None = None, **usage: int) -> float:
    return float(genai_prices.calc_price(genai_prices.Usage(**usage), model, provider_id=provider,
                                         price_context=context).total_price)  # fmt: skip


def chat(model: str, tier: str, prompt: int = 1200, completion: int = 300, **details) -> dict:
    return {
        "id": "chatcmpl-doc", "object": "chat.completion", "created": 1, "model": model,
        "service_tier": tier,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "ok"}}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion, **details},
    }  # fmt: skip


def response(model: str, output: list, usage: dict | None, status: str = "completed", **extra) -> dict:
    return {"id": "resp_doc", "object": "response", "created_at": 1, "status": status,
            "model": model, "output": output, "usage": usage, "parallel_tool_calls": True,
            "tool_choice": "auto", "tools": [], **extra}  # fmt: skip


def responses_usage(inp: int, out: int) -> dict:
    return {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0}}  # fmt: skip


MESSAGE = {"type": "message", "id": "msg_doc", "role": "assistant", "status": "completed",
           "content": [{"type": "output_text", "text": "ok", "annotations": []}]}  # fmt: skip


def test_flex_tier_is_priced_at_the_flex_rate(telemetry):
    client, _ = openai_client(served(chat("gpt-5", "flex")))
    client.chat.completions.create(model="gpt-5", messages=[{"role": "user", "content": "hi"}],
                                   service_tier="flex")  # fmt: skip
    attrs = telemetry.span().attributes
    flex = price("gpt-5", context={"service_tier": "flex"}, input_tokens=1200, output_tokens=300)
    assert attrs["otel_tokens.cost.usd"] == pytest.approx(flex, rel=1e-12)
    assert flex == pytest.approx(price("gpt-5", input_tokens=1200, output_tokens=300) / 2)
    assert attrs["otel_tokens.cost.components"] == ("service_tier=flex",)


def test_a_tier_without_its_own_price_is_named_and_counted_unpriced(telemetry):
    client, _ = openai_client(served(chat("gpt-4o-mini", "flex")))
    client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    attrs = telemetry.span().attributes
    assert attrs["otel_tokens.cost.unpriced"] == ("service_tier=flex",)
    assert attrs["otel_tokens.cost.usd"] == pytest.approx(price("gpt-4o-mini", input_tokens=1200, output_tokens=300))
    point = telemetry.point("otel_tokens.unpriced_requests", otel_tokens__cost__unpriced="service_tier=flex")
    assert point.value == 1


def test_audio_tokens_are_priced_as_audio(telemetry):
    body = chat("gpt-4o-audio-preview", "default", 500, 100,
                prompt_tokens_details={"audio_tokens": 400, "cached_tokens": 0},
                completion_tokens_details={"audio_tokens": 80, "reasoning_tokens": 0})  # fmt: skip
    client, _ = openai_client(served(body))
    client.chat.completions.create(model="gpt-4o-audio-preview", messages=[{"role": "user", "content": "hi"}])
    attrs = telemetry.span().attributes
    expected = price("gpt-4o-audio-preview", input_tokens=500, output_tokens=100,
                     input_audio_tokens=400, output_audio_tokens=80)  # fmt: skip
    assert attrs["otel_tokens.cost.usd"] == pytest.approx(expected, rel=1e-12)
    assert set(attrs["otel_tokens.cost.components"]) == {"input_audio_tokens", "output_audio_tokens"}


def test_web_searches_count_what_was_billed(telemetry):
    """``tool_usage.web_search.num_requests`` (billable searches) wins over the items, which
    include actions that are not searches (opening a page)."""
    items = [{"type": "web_search_call", "id": f"ws_{i}", "status": "completed",
              "action": {"type": kind, "query": "q"} if kind == "search" else {"type": kind, "url": "https://x"}}
             for i, kind in enumerate(["search", "open_page", "search", "search"])]  # fmt: skip
    with_count = response("gpt-4.1", [*items, MESSAGE], responses_usage(900, 120),
                          tool_usage={"web_search": {"num_requests": 2},
                                      "image_gen": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0,
                                                    "input_tokens_details": {"image_tokens": 0, "text_tokens": 0}}})  # fmt: skip
    items_only = {**response("gpt-4.1", [*items, MESSAGE], responses_usage(900, 120)), "id": "resp_two"}
    client, _ = openai_client(served(with_count, items_only))
    client.responses.create(model="gpt-4.1", input="news?", tools=[{"type": "web_search"}])
    client.responses.create(model="gpt-4.1", input="news?", tools=[{"type": "web_search"}])
    tokens = price("gpt-4.1", input_tokens=900, output_tokens=120)
    first, second = (s.attributes for s in telemetry.finished())
    assert first["otel_tokens.cost.usd"] == pytest.approx(tokens + 2 * 0.010, rel=1e-9)
    assert second["otel_tokens.cost.usd"] == pytest.approx(tokens + 3 * 0.010, rel=1e-9)  # 3 searched
    assert first["otel_tokens.cost.components"] == ("web_searches",)


def test_file_searches_are_billed_per_call(telemetry):
    call = {"type": "file_search_call", "id": "fs_1", "status": "completed", "queries": ["q"], "results": None}
    client, _ = openai_client(served(response("gpt-4o", [call, {**call, "id": "fs_2"}, MESSAGE],
                                              responses_usage(1144, 38))))  # fmt: skip
    client.responses.create(model="gpt-4o", input="q", tools=[{"type": "file_search", "vector_store_ids": ["vs"]}])
    attrs = telemetry.span().attributes
    assert attrs["otel_tokens.cost.usd"] == pytest.approx(
        price("gpt-4o", input_tokens=1144, output_tokens=38) + 2 * 0.0025, rel=1e-9)
    assert attrs["otel_tokens.cost.components"] == ("storage_searches",)


def test_background_response_counts_once_when_retrieved(telemetry):
    """``background=True``: the create returns ``queued`` without usage (no usage is missing
    yet), polls return it in progress, the completed one carries the usage; reading the
    completed response again does not bill it twice."""
    queued = response("gpt-5", [], None, status="queued", background=True)
    running = response("gpt-5", [], None, status="in_progress", background=True)
    done = response("gpt-5", [MESSAGE], responses_usage(2000, 700), background=True)
    client, _ = openai_client(served(queued) + served(running, done, done, method="GET",
                                                      uri=f"{OPENAI}/responses/resp_doc"))  # fmt: skip
    with otel_tokens.agent("bg") as entry:
        client.responses.create(model="gpt-5", input="long job", background=True)
        for _ in range(3):
            client.responses.retrieve("resp_doc")
    spans = [s.attributes for s in telemetry.finished()]
    assert [a.get("gen_ai.usage.input_tokens") for a in spans] == [None, None, 2000, None]
    assert spans[3]["otel_tokens.usage.counted_before"] is True
    assert telemetry.point("otel_tokens.tokens", gen_ai__token__type="input").value == 2000
    assert entry.state.turn_count == 1  # polls and the re-read are not turns
    assert telemetry.points("otel_tokens.usage.missing") == [] and telemetry.errors() == {}


def test_compact_is_recorded(telemetry):
    compacted = {"id": "cmp_doc", "object": "response.compaction", "created_at": 1, "model": "gpt-5",
                 "output": [], "usage": responses_usage(30000, 1500)}  # fmt: skip
    client, _ = openai_client(served(compacted, uri=f"{OPENAI}/responses/compact"))
    client.responses.compact(model="gpt-5", input=[{"role": "user", "content": "a long conversation"}])
    attrs = telemetry.span().attributes
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (30000, 1500)
    assert attrs["otel_tokens.cost.usd"] == pytest.approx(price("gpt-5", input_tokens=30000, output_tokens=1500))


def test_transcription_billed_by_the_second(telemetry):
    body = {"text": "hello", "usage": {"type": "duration", "seconds": 30}}
    client, _ = openai_client(served(body, uri=f"{OPENAI}/audio/transcriptions"))
    client.audio.transcriptions.create(model="whisper-1", file=("a.wav", b"RIFF"))
    attrs = telemetry.span().attributes
    assert "gen_ai.usage.input_tokens" not in attrs  # billed by time, not tokens
    assert attrs["otel_tokens.cost.usd"] == pytest.approx(price("whisper-1", audio_seconds=30))
    assert attrs["otel_tokens.cost.components"] == ("audio_seconds",)
    assert telemetry.errors() == {} and telemetry.points("otel_tokens.usage.missing") == []


def test_token_count_endpoints_record_nothing(telemetry):
    client, _ = openai_client(served({"object": "response.input_tokens", "input_tokens": 12},
                                     uri=f"{OPENAI}/responses/input_tokens"))  # fmt: skip
    assert client.responses.input_tokens.count(model="gpt-5", input="hi").input_tokens == 12
    aclient, _ = anthropic_client(served({"input_tokens": 14}, uri=f"{ANTHROPIC}/count_tokens"))
    assert aclient.messages.count_tokens(model="claude-sonnet-4-6", messages=[
        {"role": "user", "content": "hi"}]).input_tokens == 14
    assert telemetry.finished() == [] and telemetry.points("otel_tokens.tokens") == []


def message(usage: dict, model: str = "claude-sonnet-4-6") -> dict:
    return {"id": "msg_doc", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
            "stop_sequence": None, "usage": usage}  # fmt: skip


def anthropic_usage(inp: int, out: int, **extra) -> dict:
    return {"input_tokens": inp, "output_tokens": out, "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0, **extra}  # fmt: skip


def ask(client, beta: bool = False):
    messages = client.beta.messages if beta else client.messages
    return messages.create(model="claude-sonnet-4-6", max_tokens=1024,
                           messages=[{"role": "user", "content": "hi"}])  # fmt: skip


def test_compaction_iteration_is_billed_on_top_of_the_message(telemetry):
    """The documented compaction example: top-level usage 23,000 in / 1,000 out holds only the
    message; the compaction iteration's 180,000 / 3,500 is billed besides."""
    usage = anthropic_usage(23000, 1000, iterations=[
        {"type": "compaction", "input_tokens": 180000, "output_tokens": 3500,
         "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
        {"type": "message", "input_tokens": 23000, "output_tokens": 1000,
         "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
    ])  # fmt: skip
    client, _ = anthropic_client(served(message(usage), uri=f"{ANTHROPIC}?beta=true"))
    ask(client, beta=True)
    attrs = telemetry.span().attributes
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (203000, 4500)
    expected = (price("claude-sonnet-4-6", "anthropic", input_tokens=23000, output_tokens=1000)
                + price("claude-sonnet-4-6", "anthropic", input_tokens=180000, output_tokens=3500))  # fmt: skip
    assert attrs["otel_tokens.cost.usd"] == pytest.approx(expected, rel=1e-9)
    assert telemetry.point("otel_tokens.tokens", gen_ai__token__type="input").value == 203000


def test_advisor_iteration_is_priced_at_the_advisor_model(telemetry):
    usage = anthropic_usage(4000, 600, iterations=[
        {"type": "message", "input_tokens": 2000, "output_tokens": 100, "cache_read_input_tokens": 0,
         "cache_creation_input_tokens": 0},
        {"type": "advisor_message", "model": "claude-opus-4-6", "input_tokens": 2100,
         "output_tokens": 1500, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
        {"type": "message", "input_tokens": 2000, "output_tokens": 500, "cache_read_input_tokens": 0,
         "cache_creation_input_tokens": 0},
    ])  # fmt: skip
    client, _ = anthropic_client(served(message(usage), uri=f"{ANTHROPIC}?beta=true"))
    ask(client, beta=True)
    attrs = telemetry.span().attributes
    expected = (price("claude-sonnet-4-6", "anthropic", input_tokens=4000, output_tokens=600)
                + price("claude-opus-4-6", "anthropic", input_tokens=2100, output_tokens=1500))  # fmt: skip
    assert attrs["otel_tokens.cost.usd"] == pytest.approx(expected, rel=1e-9)
    opus = telemetry.point("otel_tokens.cost", gen_ai__response__model="claude-opus-4-6")
    assert opus.value == pytest.approx(price("claude-opus-4-6", "anthropic", input_tokens=2100, output_tokens=1500))


def test_anthropic_web_searches_hour_cache_writes_and_batch(telemetry):
    usage = anthropic_usage(1000, 200, cache_creation_input_tokens=5000,
                            cache_creation={"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 4000},
                            server_tool_use={"web_search_requests": 3, "web_fetch_requests": 1},
                            service_tier="batch")  # fmt: skip
    client, _ = anthropic_client(served(message(usage)))
    ask(client)
    attrs = telemetry.span().attributes
    expected = price("claude-sonnet-4-6", "anthropic", {"processing": "batch"}, input_tokens=6000,
                     output_tokens=200, cache_write_tokens=5000, cache_write_5m_tokens=1000,
                     cache_write_1h_tokens=4000, web_searches=3)  # fmt: skip
    assert attrs["otel_tokens.cost.usd"] == pytest.approx(expected, rel=1e-9)
    assert set(attrs["otel_tokens.cost.components"]) == {
        "processing=batch", "web_searches", "cache_write_1h_tokens", "cache_write_5m_tokens"}


def test_a_bad_billed_count_is_counted_and_the_rest_stands(telemetry):
    usage = anthropic_usage(1000, 200, server_tool_use={"web_search_requests": -2, "web_fetch_requests": 0})
    client, _ = anthropic_client(served(message(usage)))
    ask(client)
    attrs = telemetry.span().attributes
    assert attrs["gen_ai.usage.input_tokens"] == 1000
    assert attrs["otel_tokens.cost.usd"] == pytest.approx(price("claude-sonnet-4-6", "anthropic",
                                                                input_tokens=1000, output_tokens=200))  # fmt: skip
    assert telemetry.errors() == {"usage_invalid": 1}
