"""Every name, unit, attribute and value of docs/telemetry-contract.md, on the in-memory SDK."""

from __future__ import annotations

import pytest
from genai_prices import Usage as PricesUsage
from genai_prices import calc_price
from opentelemetry.trace import SpanKind, StatusCode

import otel_tokens
from otel_tokens import Estimate, Pricer, Usage
from otel_tokens.emit.instruments import DURATION_BUCKETS, ESTIMATE_ERROR_BUCKETS, TOKEN_BUCKETS

from .conftest import make_telemetry

COMMON = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "gpt-4o",
    "gen_ai.agent.name": "planner",
    "server.address": "api.openai.com",
}
FULL = Usage(input_tokens=1000, output_tokens=200, cache_read_tokens=400, cache_write_tokens=100,
             reasoning_tokens=50)  # fmt: skip


def start(t, stream=False, estimate=None, model="gpt-4o"):
    return t.handler.start(
        operation="chat", provider="openai", request_model=model, stream=stream,
        server_address="api.openai.com", server_port=443, estimate=estimate,
        conversation_id="conv-1",
    )  # fmt: skip


def library_cost(usage: Usage, model: str) -> float:
    return float(calc_price(PricesUsage(
        input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens or 0,
        cache_write_tokens=usage.cache_write_tokens or 0,
    ), model, provider_id="openai").total_price)  # fmt: skip


def test_successful_call(telemetry):
    with otel_tokens.agent("planner", max_input_tokens=128_000):
        call = start(telemetry, estimate=Estimate(1100, "full"))
        call.stop(FULL, response_model="gpt-4o-2024-08-06", response_id="chatcmpl-1",
                      finish_reasons=["stop"])  # fmt: skip
    span = telemetry.span()
    cost = library_cost(FULL, "gpt-4o-2024-08-06")
    assert span.name == "chat gpt-4o"
    assert span.kind is SpanKind.CLIENT
    assert span.status.status_code is StatusCode.UNSET
    assert dict(span.attributes) == {
        **COMMON,
        "gen_ai.request.stream": False,
        "server.port": 443,
        "gen_ai.conversation.id": "conv-1",
        "gen_ai.response.model": "gpt-4o-2024-08-06",
        "gen_ai.response.id": "chatcmpl-1",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 1000,
        "gen_ai.usage.output_tokens": 200,
        "gen_ai.usage.cache_read.input_tokens": 400,
        "gen_ai.usage.cache_write.input_tokens": 100,
        "gen_ai.usage.reasoning.output_tokens": 50,
        "otel_tokens.usage.source": "reported",
        "otel_tokens.estimate.input_tokens": 1100,
        "otel_tokens.estimate.source": "full",
        "otel_tokens.estimate.error": pytest.approx(0.1),
        "otel_tokens.cost.usd": pytest.approx(cost),
        "otel_tokens.cost.source": "computed",
        "otel_tokens.cost.price_match": "endpoint",  # priced at the call's provider (openai)
        "otel_tokens.state.turn_count": 1,
        "otel_tokens.state.total_output_tokens": 200,
        "otel_tokens.state.max_observed_input_tokens": 1000,
        "otel_tokens.state.context_utilization": pytest.approx(1000 / 128_000),
    }
    metric_attrs = {**COMMON, "gen_ai.response.model": "gpt-4o-2024-08-06"}
    usage_in = telemetry.point("gen_ai.client.token.usage", gen_ai__token__type="input")
    usage_out = telemetry.point("gen_ai.client.token.usage", gen_ai__token__type="output")
    assert usage_in.unit == "{token}" and usage_in.attributes == {**metric_attrs, "gen_ai.token.type": "input"}
    assert (usage_in.sum, usage_in.count, usage_out.sum) == (1000, 1, 200)
    assert usage_in.bounds == TOKEN_BUCKETS
    assert len(telemetry.points("gen_ai.client.token.usage")) == 2
    for token_type, value in [("input", 1000), ("output", 200), ("cache_read", 400),
                              ("cache_write", 100), ("reasoning", 50)]:  # fmt: skip
        p = telemetry.point("otel_tokens.tokens", gen_ai__token__type=token_type)
        assert p.unit == "{token}"
        assert p.attributes == {**metric_attrs, "gen_ai.token.type": token_type,
                                "otel_tokens.usage.source": "reported"}  # fmt: skip
        assert p.value == value
    cost_point = telemetry.point("otel_tokens.cost")
    assert cost_point.unit == "USD"
    assert cost_point.attributes == {**metric_attrs, "otel_tokens.cost.source": "computed"}
    assert cost_point.value == pytest.approx(cost)
    duration = telemetry.point("gen_ai.client.operation.duration")
    assert duration.unit == "s" and duration.attributes == metric_attrs
    assert duration.count == 1 and duration.sum > 0 and duration.bounds == DURATION_BUCKETS
    error = telemetry.point("otel_tokens.estimate.error")
    assert error.unit == "1" and error.bounds == ESTIMATE_ERROR_BUCKETS
    assert error.attributes == {**metric_attrs, "otel_tokens.estimate.source": "full"}
    assert error.sum == pytest.approx(0.1)
    util = telemetry.point("otel_tokens.context.utilization")
    assert util.unit == "1" and util.attributes == {"gen_ai.agent.name": "planner"}
    assert util.value == pytest.approx(1000 / 128_000)
    assert telemetry.points("gen_ai.client.operation.time_to_first_chunk") == []
    assert telemetry.points("otel_tokens.unpriced_requests") == []
    assert telemetry.points("otel_tokens.premium_requests") == []
    assert telemetry.errors() == {}
    # the accounting core got the same call
    entry = otel_tokens.agents()[-1]
    assert entry.state.turn_count == 1
    (record,) = entry.ledger.history()
    assert record.request_id == "chatcmpl-1" and record.cost_usd == pytest.approx(cost)
    assert record.trace_id == f"{span.context.trace_id:032x}"


def test_streamed_call(telemetry):
    with otel_tokens.agent("planner", max_input_tokens=10_000) as entry:
        call = start(telemetry, stream=True, estimate=Estimate(900, "delta"))
        assert entry.state.status == "streaming"
        assert entry.state.display().tokens == 900 and entry.state.display().is_estimate
        call.first_chunk()
        call.stream_usage(Usage(input_tokens=1000, output_tokens=1))
        assert entry.ledger.cumulative.output_tokens == 1
        call.stream_usage(Usage(input_tokens=1000, output_tokens=150))
        assert entry.ledger.cumulative.output_tokens == 150  # replaced, never added
        call.stop(Usage(input_tokens=1000, output_tokens=150), response_model="gpt-4o")
    assert entry.state.status == "idle" and entry.state.current_estimate is None
    assert entry.ledger.cumulative.output_tokens == 150 and len(entry.ledger) == 1
    span = telemetry.span()
    assert span.attributes["gen_ai.request.stream"] is True
    ttfc = span.attributes["gen_ai.response.time_to_first_chunk"]
    assert 0 < ttfc < 5
    hist = telemetry.point("gen_ai.client.operation.time_to_first_chunk")
    assert hist.unit == "s" and hist.count == 1 and hist.sum == pytest.approx(ttfc)
    assert hist.bounds == DURATION_BUCKETS
    error = telemetry.point("otel_tokens.estimate.error")
    assert error.sum == pytest.approx(-0.1)  # an under-estimate lands in a negative bucket
    assert error.bucket_counts[ESTIMATE_ERROR_BUCKETS.index(-0.25) + 1] == 1


def test_failed_call(telemetry):
    with otel_tokens.agent("planner") as entry:
        call = start(telemetry, stream=True, estimate=Estimate(50, "full"))
        call.fail(TimeoutError("upstream timed out"))
        call.stop(FULL)  # a second end is ignored
    assert entry.state.turn_count == 0 and entry.state.current_estimate is None
    (row,) = entry.ledger.history()  # one row, its tokens unknown; nothing left in flight
    assert row.input_tokens is None and entry.ledger.in_flight == {}
    span = telemetry.span()
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "upstream timed out"
    assert span.attributes["error.type"] == "TimeoutError"
    assert "gen_ai.usage.input_tokens" not in span.attributes
    duration = telemetry.point("gen_ai.client.operation.duration")
    assert duration.attributes == {**COMMON, "error.type": "TimeoutError"} and duration.count == 1
    assert telemetry.points("otel_tokens.tokens") == []
    assert telemetry.points("otel_tokens.cost") == []
    assert telemetry.errors() == {}


def test_failed_call_keeps_billed_usage(telemetry):
    class ProviderError(Exception):
        pass

    with otel_tokens.agent("planner") as entry:
        call = start(telemetry, stream=True)
        call.stream_usage(Usage(input_tokens=300, output_tokens=20))
        call.fail(ProviderError("connection reset"), Usage(input_tokens=300, output_tokens=20))
    assert entry.state.turn_count == 0
    assert entry.ledger.cumulative.input_tokens == 300  # billed tokens are kept
    span = telemetry.span()
    assert span.attributes["error.type"].endswith("test_failed_call_keeps_billed_usage.<locals>.ProviderError")
    assert span.attributes["gen_ai.usage.input_tokens"] == 300


def test_unknown_token_classes_are_absent_never_zero(telemetry):
    with otel_tokens.agent("planner"):
        start(telemetry).stop(Usage(input_tokens=10))
    span = telemetry.span()
    assert span.attributes["gen_ai.usage.input_tokens"] == 10
    for absent in ("gen_ai.usage.output_tokens", "gen_ai.usage.cache_read.input_tokens",
                   "gen_ai.usage.cache_write.input_tokens",
                   "gen_ai.usage.reasoning.output_tokens"):  # fmt: skip
        assert absent not in span.attributes
    types = {p.attributes["gen_ai.token.type"] for p in telemetry.points("otel_tokens.tokens")}
    assert types == {"input"}
    assert [p.attributes["gen_ai.token.type"]
            for p in telemetry.points("gen_ai.client.token.usage")] == ["input"]


def test_missing_usage_is_counted(telemetry):
    with otel_tokens.agent("planner") as entry:
        start(telemetry).stop(None)
    assert telemetry.errors() == {"usage_missing": 1}
    assert entry.state.turn_count == 1
    assert "gen_ai.usage.input_tokens" not in telemetry.span().attributes


def test_provider_reported_cost_wins(telemetry):
    with otel_tokens.agent("planner"):
        start(telemetry).stop(FULL.replace(cost_usd=0.5, premium_requests=0.33))
    span = telemetry.span()
    assert span.attributes["otel_tokens.cost.usd"] == 0.5
    assert span.attributes["otel_tokens.cost.source"] == "provider"
    assert span.attributes["otel_tokens.premium_requests"] == 0.33
    cost = telemetry.point("otel_tokens.cost")
    assert cost.value == 0.5 and cost.attributes["otel_tokens.cost.source"] == "provider"
    premium = telemetry.point("otel_tokens.premium_requests")
    assert premium.unit == "{request}" and premium.value == pytest.approx(0.33)


def test_unpriced_model(telemetry):
    with otel_tokens.agent("planner"):
        start(telemetry, model="my-private-model-7b").stop(Usage(input_tokens=5, output_tokens=5))
    span = telemetry.span()
    assert "otel_tokens.cost.usd" not in span.attributes
    assert "otel_tokens.cost.source" not in span.attributes
    unpriced = telemetry.point("otel_tokens.unpriced_requests")
    assert unpriced.unit == "{request}" and unpriced.value == 1
    assert unpriced.attributes["gen_ai.request.model"] == "my-private-model-7b"
    assert telemetry.points("otel_tokens.cost") == []


def test_override_price_file(tmp_path, monkeypatch):
    prices = tmp_path / "prices.toml"
    prices.write_text(
        '[models."my-private-model-7b"]\ninput = 2.0\noutput = 8.0\ncache_read = 0.5\n'
        '[models."gpt-4o"]\ninput = 1.0\noutput = 1.0\nprovider = "openai"\n'
    )
    monkeypatch.setenv("OTEL_TOKENS_PRICES_FILE", str(prices))
    t = make_telemetry(pricer=Pricer.from_settings(otel_tokens.settings.reload()))
    with otel_tokens.agent("planner"):
        call = t.handler.start(operation="chat", provider="openai",
                                     request_model="my-private-model-7b")  # fmt: skip
        call.stop(Usage(input_tokens=1_000_000, cache_read_tokens=200_000, output_tokens=10_000))
        t.handler.start(operation="chat", provider="openai", request_model="gpt-4o").stop(
            Usage(input_tokens=1_000_000, output_tokens=1_000_000))
    first, second = t.finished()
    # 800k fresh x $2/M + 200k cache read x $0.5/M + 10k output x $8/M
    assert first.attributes["otel_tokens.cost.usd"] == pytest.approx(1.6 + 0.1 + 0.08)
    assert first.attributes["otel_tokens.cost.source"] == "computed"
    assert second.attributes["otel_tokens.cost.usd"] == pytest.approx(2.0)  # the discounted rate
    assert t.points("otel_tokens.unpriced_requests") == []


def test_two_agents_are_separate(telemetry):
    with otel_tokens.agent("planner", max_input_tokens=1000):
        start(telemetry).stop(Usage(input_tokens=100, output_tokens=1))
    with otel_tokens.agent("coder", max_input_tokens=1000):
        start(telemetry).stop(Usage(input_tokens=500, output_tokens=1))
    start(telemetry).stop(Usage(input_tokens=7, output_tokens=1))  # unbound: "default"
    utilization = {p.attributes["gen_ai.agent.name"]: p.value
                   for p in telemetry.points("otel_tokens.context.utilization")}
    assert utilization == {"planner": 0.1, "coder": 0.5}
    agents = sorted(p.attributes["gen_ai.agent.name"]
                    for p in telemetry.points("gen_ai.client.operation.duration"))
    assert agents == ["coder", "default", "planner"]


def test_a_run_with_several_models(telemetry):
    """An agent-CLI run: per-model parts, priced per model; one turn and one span in all."""
    opus = Usage(input_tokens=2000, output_tokens=300, model="claude-opus-4-1-20250805")
    haiku = Usage(input_tokens=500, output_tokens=40, model="claude-3-5-haiku-20241022")
    with otel_tokens.agent("cli") as entry:
        call = telemetry.handler.start(operation="invoke_agent", provider="anthropic",
                                             request_model=None, span_name="invoke_agent claude")  # fmt: skip
        call.stop(None, parts=[opus, haiku], response_id="session-1")
    assert entry.state.turn_count == 1 and entry.state.input_tokens == 2500
    records = entry.ledger.history()
    assert [(r.model, r.input_tokens, r.request_id) for r in records] == [
        ("claude-opus-4-1-20250805", 2000, "session-1/claude-opus-4-1-20250805"),
        ("claude-3-5-haiku-20241022", 500, "session-1/claude-3-5-haiku-20241022"),
    ]
    pricer = otel_tokens.Pricer()
    opus_cost = pricer.price(opus, "anthropic", opus.model).cost_usd
    haiku_cost = pricer.price(haiku, "anthropic", haiku.model).cost_usd
    assert [r.cost_usd for r in records] == [pytest.approx(opus_cost), pytest.approx(haiku_cost)]
    span = telemetry.span()
    assert span.name == "invoke_agent claude"
    assert span.attributes["gen_ai.usage.input_tokens"] == 2500
    assert span.attributes["otel_tokens.cost.usd"] == pytest.approx(opus_cost + haiku_cost)
    by_model = {p.attributes["gen_ai.response.model"]: p.value
                for p in telemetry.points("otel_tokens.tokens")
                if p.attributes["gen_ai.token.type"] == "input"}  # fmt: skip
    assert by_model == {opus.model: 2000, haiku.model: 500}
    costs = {p.attributes["gen_ai.response.model"]: p.value for p in telemetry.points("otel_tokens.cost")}
    assert costs == {opus.model: pytest.approx(opus_cost), haiku.model: pytest.approx(haiku_cost)}


def test_a_run_with_a_provider_total_and_premium_requests(telemetry):
    """Parts without a cost of their own: the run's total goes on the call's line, and the
    ledger shares it out; premium requests alike."""
    parts = [Usage(output_tokens=100, model="gpt-5"),
             Usage(output_tokens=50, model="claude-sonnet-4.5")]  # fmt: skip
    total = Usage(output_tokens=150, cost_usd=0.05, premium_requests=2.0)
    with otel_tokens.agent("cli") as entry:
        call = telemetry.handler.start(operation="invoke_agent", provider="github_copilot",
                                       request_model=None)  # fmt: skip
        call.stop(total, parts=parts)
    span = telemetry.span()
    assert span.attributes["otel_tokens.cost.usd"] == 0.05  # the run's own total
    assert span.attributes["otel_tokens.cost.source"] == "provider"
    assert span.attributes["otel_tokens.premium_requests"] == 2.0
    (cost,) = telemetry.points("otel_tokens.cost")
    assert cost.value == 0.05 and "gen_ai.response.model" not in cost.attributes
    (premium,) = telemetry.points("otel_tokens.premium_requests")
    assert premium.value == 2.0
    costs = [r.cost_usd for r in entry.ledger.history()]
    assert sum(costs) == pytest.approx(0.05) and len(costs) == 2
    assert entry.ledger.cumulative.output_tokens == 150


def test_each_models_own_cost_goes_on_its_own_line(telemetry):
    """Claude Code's modelUsage: each model's tokens and its own costUSD, never the whole run
    on the main model."""
    parts = [Usage(input_tokens=1000, output_tokens=100, model="claude-opus-5-5", cost_usd=0.01),
             Usage(input_tokens=400, output_tokens=50, model="claude-haiku-5-5", cost_usd=0.002)]  # fmt: skip
    total = (parts[0] + parts[1]).replace(cost_usd=0.012)
    with otel_tokens.agent("cli") as entry:
        call = telemetry.handler.start(operation="invoke_agent", provider="anthropic",
                                       request_model=None)  # fmt: skip
        call.stop(total, parts=parts)
    assert telemetry.span().attributes["otel_tokens.cost.usd"] == pytest.approx(0.012)
    costs = {p.attributes["gen_ai.response.model"]: p.value for p in telemetry.points("otel_tokens.cost")}
    assert costs == {"claude-opus-5-5": 0.01, "claude-haiku-5-5": 0.002}
    inputs = {p.attributes["gen_ai.response.model"]: p.value for p in telemetry.points("otel_tokens.tokens")
              if p.attributes["gen_ai.token.type"] == "input"}  # fmt: skip
    assert inputs == {"claude-opus-5-5": 1000, "claude-haiku-5-5": 400}
    assert [r.cost_usd for r in entry.ledger.history()] == [0.01, 0.002]