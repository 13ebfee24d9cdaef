"""Issue 48: what a request says of the tools the provider runs and of the context it
drops, read so that no estimate is wildly above the billed input; and an incomplete
estimate's bound, learnt per model from actuals."""

from __future__ import annotations

import pathlib

from otel_tokens.account.estimate import Estimator, Request
from otel_tokens.capture.sdk import openai as openai_sdk

from .. import cassettes, peer
from . import peer_rows

ASK = [{"role": "user", "content": "Which release fixed the cache bug?"}]
WEB_SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
TOOL_SEARCH = {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}
DEFERRED = {"name": "get_release_notes", "description": "Release notes of a version.",
            "defer_loading": True, "input_schema": {"type": "object", "properties": {
                "version": {"type": "string"}}, "required": ["version"]}}  # fmt: skip


def _anthropic(tools: list, messages: list = ASK) -> Request:  # type: ignore[type-arg]
    return Request("anthropic_messages", "claude-sonnet-4-5", messages, tools=tools)


def test_what_one_server_tool_returned_does_not_raise_a_request_with_another():
    """A web search's 20,000 tokens of results were learnt under the model alone and added
    to a tool-search request of the same model (issue 48: 19,625 estimated, 721 billed)."""
    estimator = Estimator()
    searched = estimator.estimate(_anthropic([WEB_SEARCH]), provider="anthropic")
    estimator.observe(searched, searched.estimate.input_tokens + 20_000)
    fresh = Estimator().estimate(_anthropic([TOOL_SEARCH, DEFERRED]), provider="anthropic")
    after = estimator.estimate(_anthropic([TOOL_SEARCH, DEFERRED]), provider="anthropic")
    assert after.estimate.input_tokens == fresh.estimate.input_tokens
    assert not after.complete


def test_server_tool_results_count_at_most_the_rest_of_the_request():
    """A call that does not run the tool again is billed about the rest: within 2x of it."""
    estimator = Estimator()
    first = estimator.estimate(_anthropic([WEB_SEARCH]), provider="anthropic")
    estimator.observe(first, first.estimate.input_tokens + 20_000)
    again = estimator.estimate(_anthropic([WEB_SEARCH]), provider="anthropic")
    assert again.estimate.input_tokens <= 2 * first.estimate.input_tokens
    assert again.input_max is not None and again.input_max >= first.estimate.input_tokens + 20_000


def test_no_delta_builds_on_the_input_of_a_call_that_ran_server_tools():
    """The reported input of a call that ran an image generation holds what the tool
    returned within it: the next request (its id only, resent) is not that plus more
    (held-out recording: 2,283 estimated against 587 billed)."""
    tools = [{"type": "image_generation"}]
    ask = [{"role": "user", "content": "Generate an image of an axolotl."}]
    estimator = Estimator()
    first = estimator.estimate(Request("openai_responses", "gpt-5", ask, tools=tools),
                               provider="openai")  # fmt: skip
    estimator.observe(first, 2253)
    follow = ask + [{"type": "image_generation_call", "id": "ig_1"},
                    {"role": "user", "content": "Now name it."}]  # fmt: skip
    after = estimator.estimate(Request("openai_responses", "gpt-5", follow, tools=tools),
                               provider="openai")  # fmt: skip
    assert after.estimate.source != "delta"
    assert after.estimate.input_tokens < 2253 / 2


def test_a_compaction_item_stands_for_the_items_before_it():
    """Responses drops the input items before a compaction item (the recorded request: the
    compaction of a conversation, then one question, 298 billed; the conversation it
    compacted, put before it, adds nothing)."""
    peer.require()
    name = "tests__models__test_openai_responses__test_openai_responses_compact_messages.yaml"
    path = peer.PEER / "pydantic-ai" / name
    recorded = cassettes.load(pathlib.Path(path))
    body = recorded[3].request_body
    assert body["input"][0]["type"] == "compaction"
    billed = cassettes.reported_input_tokens(recorded[3])
    alone = Estimator().estimate(openai_sdk.responses_request(body), provider="openai")
    prefixed = dict(body, input=recorded[2].request_body["input"] + body["input"])
    after = Estimator().estimate(openai_sdk.responses_request(prefixed), provider="openai")
    assert after.estimate.input_tokens == alone.estimate.input_tokens
    assert 0.5 <= alone.estimate.input_tokens / billed <= 2


def test_the_bound_is_learnt_per_model_and_kind_from_actuals_and_stays_bounded():
    estimator = Estimator(window=3)
    request = _anthropic([WEB_SEARCH])
    first = estimator.estimate(request, provider="anthropic")
    tokens = first.estimate.input_tokens
    assert not first.complete and first.input_max == tokens + 32_000  # nothing learnt: default
    for actual in (9_000, 3_000, 2_000, 2_500):
        made = estimator.estimate(request, provider="anthropic")
        estimator.observe(made, actual)
    bounded = estimator.estimate(request, provider="anthropic")
    assert bounded.estimate.input_tokens <= bounded.input_max
    # the 9,000 of the first call left the window of 3: the bound comes from the last three
    assert 2_500 <= bounded.input_max < 9_000
    other = estimator.estimate(Request("anthropic_messages", "claude-opus-4-5", ASK,
                                       tools=[WEB_SEARCH]), provider="anthropic")  # fmt: skip
    assert other.input_max == other.estimate.input_tokens + 32_000  # another model: its own
    complete = estimator.estimate(_anthropic([]), provider="anthropic")
    assert complete.complete and complete.input_max is None


def test_with_nothing_learnt_each_kind_has_its_default_bound():
    """Before its model completes a call of the kind, an incomplete estimate carries the
    documented default: an image by URL 2,500 tokens more, a tool search three times it."""
    picture = [{"role": "user", "content": [
        {"type": "text", "text": "What is in this picture?"},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}]}]  # fmt: skip
    image = Estimator().estimate(_anthropic([], picture), provider="anthropic")
    assert not image.complete and image.input_max == image.estimate.input_tokens + 2_500
    search = Estimator().estimate(_anthropic([TOOL_SEARCH, DEFERRED]), provider="anthropic")
    assert not search.complete and search.input_max == 3 * search.estimate.input_tokens


def test_a_few_learnt_calls_only_raise_the_default_bound():
    """One call that needed less than its estimate does not bring the bound down to the
    estimate (the next may search again); five do, and one that needed more raises it."""
    estimator = Estimator()
    request = _anthropic([WEB_SEARCH])
    default = estimator.estimate(request, provider="anthropic").input_max
    made = estimator.estimate(request, provider="anthropic")
    estimator.observe(made, made.estimate.input_tokens // 2)
    assert estimator.estimate(request, provider="anthropic").input_max == default
    for _ in range(4):
        estimator.observe(made, made.estimate.input_tokens // 2)
    assert estimator.estimate(request, provider="anthropic").input_max < default
    estimator.observe(made, 100_000)
    assert estimator.estimate(request, provider="anthropic").input_max >= 100_000


def test_the_bound_is_on_the_span_of_an_incomplete_estimate():
    """Replayed through the real openai client with otel_tokens installed: a recording of
    two web searches; the first call's span carries the default bound, the second's the
    bound its first taught, and each holds the billed input the estimate could not know."""
    peer.require()
    name = "test_openai_responses__test_openai_responses_model_web_search_tool_stream.yaml"
    files = {p: t for p, t in peer_rows.by_file(("pydantic-ai",)).items() if p.endswith(name)}
    first, second = peer_rows.replayed(files)
    assert not first.complete and first.bound == first.estimate + 32_000  # nothing learnt yet
    assert first.billed <= first.bound
    assert not second.complete and second.bound is not None
    assert second.estimate <= second.bound and second.billed <= second.bound


def test_a_tool_search_request_after_its_search_is_complete_and_carries_no_bound():
    """Replayed through the real anthropic client: the first request's tool search runs
    within the call (its results unknown: incomplete, bounded); the next one holds the
    search's result, so the tools it needs are loaded and counted: complete, within 10% of
    the bill (6.1%), and with no bound (a complete estimate carries none)."""
    peer.require()
    name = "tests__test_tool_search__test_anthropic_native_tool_search_streaming.yaml"
    files = {p: t for p, t in peer_rows.by_file(("pydantic-ai",)).items() if p.endswith(name)}
    first, second = peer_rows.replayed(files)
    assert not first.complete and first.bound is not None and first.billed <= first.bound
    assert second.complete and second.bound is None
    assert abs(second.estimate - second.billed) <= 0.10 * second.billed


def test_a_tool_search_result_completes_only_a_request_whose_server_tools_only_search():
    searched = [*ASK, {"role": "assistant", "content": [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "tool_search_tool_regex",
         "input": {"pattern": "release"}},
        {"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_1", "content": {
            "type": "tool_search_tool_search_result",
            "tool_references": [{"type": "tool_reference", "tool_name": "get_release_notes"}]}}]},
        {"role": "user", "content": "And the one before?"}]  # fmt: skip
    alone = Estimator().estimate(_anthropic([TOOL_SEARCH, DEFERRED], searched),
                                 provider="anthropic")  # fmt: skip
    assert alone.complete and alone.input_max is None
    with_web = Estimator().estimate(_anthropic([TOOL_SEARCH, WEB_SEARCH, DEFERRED], searched),
                                    provider="anthropic")  # fmt: skip
    assert not with_web.complete
    before = Estimator().estimate(_anthropic([TOOL_SEARCH, DEFERRED]), provider="anthropic")
    assert not before.complete
    added = [*ASK, {"role": "system", "content": [{"type": "tool_addition", "tool": {
        "type": "tool_reference", "name": "get_release_notes"}}]}]  # fmt: skip
    loaded = Estimator().estimate(_anthropic([TOOL_SEARCH, DEFERRED], added), provider="anthropic")
    assert loaded.complete
