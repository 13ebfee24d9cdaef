"""The ``openai`` SDK pointed at other providers, as a new user would: the real client at the
provider's real base URL, answered as that host answers (body and stream). Each call is
recorded under the endpoint's provider, priced at that provider's price (checked against
genai-prices' own calculation at that provider), with the provider's usage fields read
right; a reported bill wins; a self-hosted server is never priced as someone else."""

from __future__ import annotations

import asyncio
import math

import pytest

from .hosts import Host, chat_body, chat_events

openai = pytest.importorskip("openai")
genai_prices = pytest.importorskip("genai_prices")


def price_at(provider_id: str, model: str, **tokens: int) -> float:
    """genai-prices' own price of these tokens at that provider."""
    usage = genai_prices.Usage(**tokens)
    return float(genai_prices.calc_price(usage, model, provider_id=provider_id).total_price)


def call(base_url: str, host: Host, model: str, *, stream: bool = False, is_async: bool = False) -> str:
    """One chat completion through the real client; returns the text the caller got."""
    cls = openai.AsyncOpenAI if is_async else openai.OpenAI
    client = cls(api_key="test", base_url=base_url, http_client=host.client(is_async), max_retries=0)
    kwargs = {"model": model, "messages": [{"role": "user", "content": "Say hello"}]}
    if stream:
        kwargs.update(stream=True, stream_options={"include_usage": True})

    async def run_async() -> str:
        got = await client.chat.completions.create(**kwargs)
        if not stream:
            return got.choices[0].message.content
        return "".join([c.choices[0].delta.content or "" async for c in got if c.choices])

    if is_async:
        return asyncio.run(run_async())
    got = client.chat.completions.create(**kwargs)
    if not stream:
        return got.choices[0].message.content
    return "".join(c.choices[0].delta.content or "" for c in got if c.choices)


def span_of(t):
    (span,) = t.finished()
    return dict(span.attributes)


# (name, base URL, gen_ai.provider.name, server.address, genai-prices id, model, usage as sent,
#  tokens as priced)
CASES = [
    ("deepseek", "https://api.deepseek.com", "deepseek", "api.deepseek.com", "deepseek", "deepseek-chat",
     {"prompt_tokens": 1500, "completion_tokens": 200, "total_tokens": 1700,
      "prompt_cache_hit_tokens": 1024, "prompt_cache_miss_tokens": 476},
     {"input_tokens": 1500, "cache_read_tokens": 1024, "output_tokens": 200}),
    ("deepseek-reasoner", "https://api.deepseek.com/v1", "deepseek", "api.deepseek.com", "deepseek",
     "deepseek-reasoner",
     {"prompt_tokens": 40, "completion_tokens": 300, "total_tokens": 340, "prompt_cache_hit_tokens": 0,
      "prompt_cache_miss_tokens": 40, "completion_tokens_details": {"reasoning_tokens": 250}},
     {"input_tokens": 40, "cache_read_tokens": 0, "output_tokens": 300}),
    ("groq", "https://api.groq.com/openai/v1", "groq", "api.groq.com", "groq", "llama-3.3-70b-versatile",
     {"queue_time": 0.02, "prompt_tokens": 120, "prompt_time": 0.01, "completion_tokens": 30,
      "completion_time": 0.05, "total_tokens": 150, "total_time": 0.06},
     {"input_tokens": 120, "output_tokens": 30}),
    ("xai", "https://api.x.ai/v1", "x_ai", "api.x.ai", "x-ai", "grok-3-mini",
     {"prompt_tokens": 32, "completion_tokens": 9, "total_tokens": 135,
      "prompt_tokens_details": {"text_tokens": 32, "audio_tokens": 0, "image_tokens": 0, "cached_tokens": 6},
      "completion_tokens_details": {"reasoning_tokens": 94, "audio_tokens": 0,
                                    "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
      "num_sources_used": 0},
     {"input_tokens": 32, "cache_read_tokens": 6, "output_tokens": 103}),
    ("mistral", "https://api.mistral.ai/v1", "mistral_ai", "api.mistral.ai", "mistral", "mistral-small-latest",
     {"prompt_tokens": 80, "completion_tokens": 20, "total_tokens": 100},
     {"input_tokens": 80, "output_tokens": 20}),
    ("together", "https://api.together.xyz/v1", "together", "api.together.xyz", "together",
     "meta-llama/Llama-3.3-70B-Instruct-Turbo",
     {"prompt_tokens": 90, "completion_tokens": 10, "total_tokens": 100, "cached_tokens": 0},
     {"input_tokens": 90, "output_tokens": 10}),
    ("fireworks", "https://api.fireworks.ai/inference/v1", "fireworks", "api.fireworks.ai", "fireworks",
     "accounts/fireworks/models/llama-v3p1-8b-instruct",
     {"prompt_tokens": 70, "completion_tokens": 30, "total_tokens": 100},
     {"input_tokens": 70, "output_tokens": 30}),
    ("cerebras", "https://api.cerebras.ai/v1", "cerebras", "api.cerebras.ai", "cerebras", "llama-3.3-70b",
     {"prompt_tokens": 60, "completion_tokens": 40, "total_tokens": 100,
      "prompt_tokens_details": {"cached_tokens": 0}},
     {"input_tokens": 60, "cache_read_tokens": 0, "output_tokens": 40}),
    ("moonshot", "https://api.moonshot.ai/v1", "moonshotai", "api.moonshot.ai", "moonshotai",
     "kimi-k2-0711-preview",
     {"prompt_tokens": 500, "completion_tokens": 50, "total_tokens": 550,
      "prompt_tokens_details": {"cached_tokens": 256}},
     {"input_tokens": 500, "cache_read_tokens": 256, "output_tokens": 50}),
    ("moonshot-context-cache", "https://api.moonshot.cn/v1", "moonshotai", "api.moonshot.cn", "moonshotai",
     "kimi-k2-0711-preview",
     {"prompt_tokens": 500, "completion_tokens": 50, "total_tokens": 550, "cached_tokens": 384},
     {"input_tokens": 500, "cache_read_tokens": 384, "output_tokens": 50}),
    ("gemini", "https://generativelanguage.googleapis.com/v1beta/openai/", "gcp.gemini",
     "generativelanguage.googleapis.com", "google", "gemini-2.0-flash",
     {"prompt_tokens": 100, "completion_tokens": 25, "total_tokens": 125},
     {"input_tokens": 100, "output_tokens": 25}),
]  # fmt: skip


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_each_provider_is_named_and_priced_by_its_endpoint(telemetry, case, stream):
    _name, base, provider, address, price_id, model, usage, priced = case
    host = Host("openai", events=chat_events(model, usage)) if stream else Host("openai", chat_body(model, usage))
    assert call(base, host, model, stream=stream) == "Hello there"  # the caller's answer, unchanged
    attrs = span_of(telemetry)
    assert attrs["gen_ai.provider.name"] == provider
    assert attrs["server.address"] == address
    assert attrs["gen_ai.usage.input_tokens"] == priced["input_tokens"]
    assert attrs["gen_ai.usage.output_tokens"] == priced["output_tokens"]
    if priced.get("cache_read_tokens"):
        assert attrs["gen_ai.usage.cache_read.input_tokens"] == priced["cache_read_tokens"]
    assert attrs["otel_tokens.cost.source"] == "computed"
    assert attrs["otel_tokens.cost.price_match"] == "endpoint"
    tokens = dict(priced)
    reasoning = attrs.get("gen_ai.usage.reasoning.output_tokens")
    if reasoning:
        tokens["output_reasoning_tokens"] = reasoning
    assert math.isclose(attrs["otel_tokens.cost.usd"], price_at(price_id, model, **tokens), rel_tol=1e-9)


def test_deepseek_cache_hits_are_priced_as_cache_reads(telemetry):
    """1024 of 1500 prompt tokens hit DeepSeek's cache: cheaper than 1500 fresh ones."""
    usage = CASES[0][6]
    call("https://api.deepseek.com", Host("openai", chat_body("deepseek-chat", usage)), "deepseek-chat")
    cost = span_of(telemetry)["otel_tokens.cost.usd"]
    fresh = price_at("deepseek", "deepseek-chat", input_tokens=1500, output_tokens=200)
    assert cost < fresh


def test_groq_stream_usage_in_x_groq(telemetry):
    """Groq's streams carry usage in the last chunk's ``x_groq.usage``."""
    usage = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}
    host = Host("openai", events=chat_events("llama-3.3-70b-versatile", usage, usage_in="x_groq"))
    client = openai.OpenAI(api_key="t", base_url="https://api.groq.com/openai/v1",
                           http_client=host.client(), max_retries=0)  # fmt: skip
    chunks = list(client.chat.completions.create(model="llama-3.3-70b-versatile", stream=True,
                                                 messages=[{"role": "user", "content": "hi"}]))  # fmt: skip
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Hello there"
    attrs = span_of(telemetry)
    assert (attrs["gen_ai.provider.name"], attrs["gen_ai.usage.input_tokens"],
            attrs["gen_ai.usage.output_tokens"]) == ("groq", 120, 30)  # fmt: skip
    assert attrs["otel_tokens.usage.source"] == "reported"
    assert math.isclose(attrs["otel_tokens.cost.usd"],
                        price_at("groq", "llama-3.3-70b-versatile", input_tokens=120, output_tokens=30))


OPENROUTER_USAGE = {"prompt_tokens": 194, "completion_tokens": 2, "total_tokens": 196,
                    "cost": 0.00009515, "is_byok": False,
                    "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                    "cost_details": {"upstream_inference_cost": None},
                    "completion_tokens_details": {"reasoning_tokens": 0, "image_tokens": 0}}  # fmt: skip


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_openrouter_reported_cost_wins(telemetry, stream, is_async):
    model = "anthropic/claude-3.5-sonnet"
    host = Host("openai", events=chat_events(model, OPENROUTER_USAGE)) if stream else \
        Host("openai", chat_body(model, OPENROUTER_USAGE, provider="Anthropic"))  # fmt: skip
    assert call("https://openrouter.ai/api/v1", host, model, stream=stream, is_async=is_async) == "Hello there"
    attrs = span_of(telemetry)
    assert attrs["gen_ai.provider.name"] == "openrouter" and attrs["server.address"] == "openrouter.ai"
    assert attrs["otel_tokens.cost.usd"] == pytest.approx(0.00009515)
    assert attrs["otel_tokens.cost.source"] == "provider"
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (194, 2)


def test_openrouter_byok_adds_the_upstream_bill(telemetry):
    usage = {**OPENROUTER_USAGE, "cost": 0.00001, "is_byok": True,
             "cost_details": {"upstream_inference_cost": 0.0002}}  # fmt: skip
    call("https://openrouter.ai/api/v1", Host("openai", chat_body("openai/gpt-4o-mini", usage)),
         "openai/gpt-4o-mini")  # fmt: skip
    assert span_of(telemetry)["otel_tokens.cost.usd"] == pytest.approx(0.00021)


def test_openrouter_without_cost_is_priced_at_openrouter(telemetry):
    usage = {k: v for k, v in OPENROUTER_USAGE.items() if k not in ("cost", "cost_details", "is_byok")}
    call("https://openrouter.ai/api/v1", Host("openai", chat_body("openai/gpt-4o-mini", usage)),
         "openai/gpt-4o-mini")  # fmt: skip
    attrs = span_of(telemetry)
    assert attrs["otel_tokens.cost.source"] == "computed" and attrs["otel_tokens.cost.price_match"] == "endpoint"
    assert math.isclose(attrs["otel_tokens.cost.usd"], price_at(
        "openrouter", "openai/gpt-4o-mini", input_tokens=194, cache_read_tokens=0, output_tokens=2))


def test_perplexity_citations_searches_and_reported_cost(telemetry):
    """sonar-pro: citation tokens are output beyond completion tokens; the searches are billed
    units; Perplexity's own ``usage.cost.total_cost`` is the cost."""
    usage = {"prompt_tokens": 12, "completion_tokens": 300, "total_tokens": 312, "citation_tokens": 40,
             "num_search_queries": 1, "search_context_size": "low",
             "cost": {"input_tokens_cost": 0.00004, "output_tokens_cost": 0.0045,
                      "request_cost": 0.006, "total_cost": 0.01054}}  # fmt: skip
    call("https://api.perplexity.ai", Host("openai", chat_body("sonar-pro", usage)), "sonar-pro")
    attrs = span_of(telemetry)
    assert attrs["gen_ai.provider.name"] == "perplexity"
    assert attrs["gen_ai.usage.output_tokens"] == 340
    assert attrs["otel_tokens.cost.usd"] == pytest.approx(0.01054)
    assert attrs["otel_tokens.cost.source"] == "provider"


def test_perplexity_without_cost_is_priced_at_perplexity(telemetry):
    usage = {"prompt_tokens": 12, "completion_tokens": 300, "total_tokens": 312}
    call("https://api.perplexity.ai", Host("openai", chat_body("sonar-pro", usage)), "sonar-pro")
    attrs = span_of(telemetry)
    assert attrs["otel_tokens.cost.price_match"] == "endpoint"
    assert math.isclose(attrs["otel_tokens.cost.usd"],
                        price_at("perplexity", "sonar-pro", input_tokens=12, output_tokens=300))


@pytest.mark.parametrize("base", ["http://localhost:11434/v1", "http://127.0.0.1:8000/v1",
                                  "http://10.0.0.7:8000/v1", "http://ollama:11434/v1",
                                  "http://lmstudio.local:1234/v1"])  # fmt: skip
@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_self_hosted_is_never_billed_as_someone_else(telemetry, base, stream):
    """Ollama, vLLM, LM Studio, llama.cpp serving a model whose name another provider prices:
    tokens recorded, no cost, the span saying why."""
    model, usage = "gpt-4o-mini", {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    host = Host("openai", events=chat_events(model, usage)) if stream else Host("openai", chat_body(model, usage))
    call(base, host, model, stream=stream)
    attrs = span_of(telemetry)
    hostname = base.split("//")[1].split(":")[0]
    assert attrs["gen_ai.provider.name"] == hostname == attrs["server.address"]
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (100, 20)
    assert "otel_tokens.cost.usd" not in attrs
    assert attrs["otel_tokens.cost.price_match"] == "self_hosted"
    # counted unpriced, marked self-hosted: the unpriced alert and stat leave it out
    unpriced = telemetry.point("otel_tokens.unpriced_requests")
    assert unpriced.value == 1
    assert unpriced.attributes["otel_tokens.cost.price_match"] == "self_hosted"


def test_unknown_endpoint_is_priced_by_model_name_and_marked(telemetry):
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    call("https://llm-gateway.example.com/v1", Host("openai", chat_body("gpt-4o-mini", usage)), "gpt-4o-mini")
    attrs = span_of(telemetry)
    assert attrs["gen_ai.provider.name"] == "llm-gateway.example.com"
    assert attrs["otel_tokens.cost.price_match"] == "model_name"
    assert math.isclose(attrs["otel_tokens.cost.usd"],
                        price_at("openai", "gpt-4o-mini", input_tokens=100, output_tokens=20))


def test_a_model_the_endpoint_does_not_sell_is_not_priced_elsewhere(telemetry):
    """Groq serving a model name genai-prices only knows elsewhere: unpriced, not OpenAI's price."""
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    call("https://api.groq.com/openai/v1", Host("openai", chat_body("gpt-4o", usage)), "gpt-4o")
    attrs = span_of(telemetry)
    assert attrs["gen_ai.provider.name"] == "groq" and "otel_tokens.cost.usd" not in attrs
    assert telemetry.point("otel_tokens.unpriced_requests").value == 1


def test_openai_itself_and_azure_keep_their_names(telemetry):
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    call("https://api.openai.com/v1", Host("openai", chat_body("gpt-4o-mini", usage)), "gpt-4o-mini")
    attrs = span_of(telemetry)
    assert attrs["gen_ai.provider.name"] == "openai" and attrs["otel_tokens.cost.price_match"] == "endpoint"


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_litellm_proxy_cost_header_wins(telemetry, is_async):
    """A LiteLLM proxy reports each response's cost in ``x-litellm-response-cost``."""
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    host = Host("openai", chat_body("claude-3-5-haiku", usage), headers={"x-litellm-response-cost": "0.000375"})
    assert call("http://litellm-proxy.example.com:4000", host, "claude-3-5-haiku", is_async=is_async) == "Hello there"
    attrs = span_of(telemetry)
    assert attrs["gen_ai.provider.name"] == "litellm-proxy.example.com"
    assert attrs["otel_tokens.cost.usd"] == pytest.approx(0.000375)
    assert attrs["otel_tokens.cost.source"] == "provider"


def test_a_cost_header_is_this_calls_only(telemetry):
    """A malformed header is no cost; a second call without the header is priced again."""
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    bad = Host("openai", chat_body("gpt-4o-mini", usage), headers={"x-litellm-response-cost": "nan"})
    call("https://proxy.example.com", bad, "gpt-4o-mini")
    good = Host("openai", chat_body("gpt-4o-mini", usage), headers={"x-litellm-response-cost": "0.5"})
    call("https://proxy.example.com", good, "gpt-4o-mini")
    call("https://proxy.example.com", Host("openai", chat_body("gpt-4o-mini", usage)), "gpt-4o-mini")
    first, second, third = (dict(s.attributes) for s in telemetry.finished())
    assert first["otel_tokens.cost.source"] == "computed"
    assert second["otel_tokens.cost.usd"] == 0.5 and second["otel_tokens.cost.source"] == "provider"
    assert third["otel_tokens.cost.source"] == "computed"


def test_azure_client_is_azure(telemetry):
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120,
             "prompt_tokens_details": {"cached_tokens": 0}}  # fmt: skip
    host = Host("openai", chat_body("gpt-4o-mini", usage))
    client = openai.AzureOpenAI(api_key="t", api_version="2024-10-21", http_client=host.client(),
                                azure_endpoint="https://my-resource.openai.azure.com", max_retries=0)  # fmt: skip
    client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    attrs = span_of(telemetry)
    assert attrs["gen_ai.provider.name"] == "azure.ai.openai"
    assert attrs["server.address"] == "my-resource.openai.azure.com"
    assert math.isclose(attrs["otel_tokens.cost.usd"], price_at(
        "azure", "gpt-4o-mini", input_tokens=100, cache_read_tokens=0, output_tokens=20))


@pytest.mark.parametrize("base, provider, address", [
    ("https://bedrock-runtime.us-west-2.amazonaws.com/openai/v1", "aws.bedrock",
     "bedrock-runtime.us-west-2.amazonaws.com"),
    ("https://us-central1-aiplatform.googleapis.com/v1/projects/my-proj/locations/us-central1/endpoints/openapi",
     "gcp.vertex_ai", "us-central1-aiplatform.googleapis.com"),
])  # fmt: skip
def test_bedrock_and_vertex_openai_endpoints(telemetry, base, provider, address):
    """The region (and the Vertex project) are in the base URL: the provider and host follow."""
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    call(base, Host("openai", chat_body("some-model", usage)), "some-model")
    attrs = span_of(telemetry)
    assert (attrs["gen_ai.provider.name"], attrs["server.address"]) == (provider, address)


def test_a_local_host_named_like_a_provider_is_still_self_hosted(telemetry):
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    call("http://openai-proxy:8080/v1", Host("openai", chat_body("gpt-4o-mini", usage)), "gpt-4o-mini")
    attrs = span_of(telemetry)
    assert attrs["gen_ai.provider.name"] == "openai-proxy"
    assert "otel_tokens.cost.usd" not in attrs and attrs["otel_tokens.cost.price_match"] == "self_hosted"


def test_raw_response_reads_the_same_provider_fields(telemetry):
    """``with_raw_response``: DeepSeek's cache hits and OpenRouter-style cost read alike."""
    usage = {"prompt_tokens": 1500, "completion_tokens": 200, "total_tokens": 1700,
             "prompt_cache_hit_tokens": 1024, "prompt_cache_miss_tokens": 476}  # fmt: skip
    host = Host("openai", chat_body("deepseek-chat", usage))
    client = openai.OpenAI(api_key="t", base_url="https://api.deepseek.com", http_client=host.client(),
                           max_retries=0)  # fmt: skip
    raw = client.chat.completions.with_raw_response.create(
        model="deepseek-chat", messages=[{"role": "user", "content": "hi"}])
    assert raw.parse().choices[0].message.content == "Hello there"
    attrs = span_of(telemetry)
    assert attrs["gen_ai.provider.name"] == "deepseek"
    assert attrs["gen_ai.usage.cache_read.input_tokens"] == 1024
    assert math.isclose(attrs["otel_tokens.cost.usd"], price_at(
        "deepseek", "deepseek-chat", input_tokens=1500, cache_read_tokens=1024, output_tokens=200))


def test_provider_fields_that_are_not_counts_make_the_usage_unusable(telemetry):
    """Untrusted values: a cache-hit count that is a string is not a count (the call still
    ends, its usage rejected and counted), and the caller's answer is unchanged."""
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120,
             "prompt_cache_hit_tokens": "64"}  # fmt: skip
    assert call("https://api.deepseek.com", Host("openai", chat_body("deepseek-chat", usage)),
                "deepseek-chat") == "Hello there"  # fmt: skip
    attrs = span_of(telemetry)
    assert "otel_tokens.cost.usd" not in attrs
    assert telemetry.errors().get("usage_invalid") == 1


@pytest.mark.parametrize(("base", "named"), [
    ("https://api.deepseek.com.evil.example/v1", "api.deepseek.com.evil.example"),
    ("https://api.openai.com.attacker.net/v1", "api.openai.com.attacker.net"),
    ("https://api.groq.comx.evil/openai/v1", "api.groq.comx.evil"),
    ("https://evil.example/x.googleapis.com/v1", "evil.example"),
    ("http://api.openai.com@127.0.0.1:8000/v1", "127.0.0.1"),
])  # fmt: skip
def test_a_look_alike_host_is_not_the_provider(telemetry, base, named):
    """The provider is matched on the URL's parsed host (issue 44): a host that only begins
    with a provider's, or a user name before '@', is not that provider nor at its price."""
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    call(base, Host("openai", chat_body("deepseek-chat", usage)), "deepseek-chat")
    attrs = span_of(telemetry)
    assert attrs["gen_ai.provider.name"] == named == attrs["server.address"]
    assert attrs["otel_tokens.cost.price_match"] != "endpoint"


def test_a_provider_url_prefix_matches_up_to_a_boundary():
    """OTEL_TOKENS_PROVIDER_URLS=https://gw.corp=corp names gw.corp's URLs, not a longer host
    that begins the same, nor one hidden behind a user name."""
    from otel_tokens.endpoints import clear_cache, endpoint

    clear_cache()
    rules = (("https://gw.corp", "corp"),)
    assert endpoint("https://gw.corp/v1", "gw.corp", "openai", overrides=rules).provider == "corp"
    assert endpoint("https://gw.corp:8443/v1", "gw.corp", "openai", overrides=rules).provider == "corp"
    assert endpoint("https://gw.corp.evil.example/v1", "gw.corp.evil.example", "openai",
                    overrides=rules).provider == "gw.corp.evil.example"  # fmt: skip
    assert endpoint("https://gw.corp@evil.example/v1", "evil.example", "openai",
                    overrides=rules).provider == "evil.example"  # fmt: skip


@pytest.mark.parametrize(("url", "provider"), [
    ("https://res.services.ai.azure.com/models", "azure.ai.inference"),
    ("https://res.services.ai.azure.com:443/models/chat/completions", "azure.ai.inference"),
    ("https://llama.eastus2.inference.ai.azure.com/v1", "azure.ai.inference"),
    ("https://res.services.ai.azure.com/openai/v1", "azure.ai.openai"),
    ("https://res.openai.azure.com/openai/deployments/gpt", "azure.ai.openai"),
    ("https://evil.example/models", "evil.example"),
])  # fmt: skip
def test_azure_ai_model_inference_is_named_apart_from_azure_openai(url, provider):
    """azure-ai-inference's routes (Foundry ``/models``, serverless ``*.inference.ai.azure.com``)
    are ``azure.ai.inference``, priced at Azure; Azure OpenAI's on the same host are not."""
    from urllib.parse import urlsplit

    from otel_tokens.endpoints import clear_cache, endpoint

    clear_cache()
    found = endpoint(url, urlsplit(url).hostname, "openai")
    assert found.provider == provider
    assert found.price_id == ("azure" if "azure" in url else None)
