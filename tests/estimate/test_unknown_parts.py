"""Parts an estimate cannot count, said so and learnt from actuals; reasoning carried back
counted only within its turn; request options that add no prompt add no tokens."""

from __future__ import annotations

from otel_tokens.account.estimate import Estimator, Request

IMAGE = {"type": "image_url", "image_url": {"url": "https://example.com/chart.png"}}


def _with_image(text: str) -> Request:
    return Request("openai_chat", "gpt-4o", [{"role": "user", "content": [
        {"type": "text", "text": text}, IMAGE]}])  # fmt: skip


def test_an_image_by_url_is_marked_and_its_tokens_are_learnt_per_model():
    estimator = Estimator()
    first = estimator.estimate(_with_image("What does this chart show?"), provider="openai")
    assert not first.complete and first.guessed is not None
    kind, count, counted = first.guessed
    assert (kind, count) == ("image", 1)
    rest = first.estimate.input_tokens - counted
    estimator.observe(first, rest + 1105)  # the API billed 1,105 tokens for the image
    second = estimator.estimate(_with_image("And this one, in one word?"), provider="openai")
    assert not second.complete
    assert second.guessed[2] == 1105
    other = Estimator().estimate(_with_image("And this one, in one word?"), provider="openai")
    assert other.guessed[2] == counted  # learnt per estimator (process) and model only


def _responses(items: list) -> Request:
    return Request("openai_responses", "gpt-5", items)


def _tool_turn() -> tuple[dict, dict, dict, dict]:
    """A user's question, the reasoning carried back (5,700 characters of ciphertext), a tool
    call and its result: fresh items of one Responses turn."""
    reasoning = {"type": "reasoning", "summary": [], "encrypted_content": "g" * 5700}
    call = {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"}
    result = {"type": "function_call_output", "call_id": "c1", "output": "42"}
    ask = {"role": "user", "content": "What is the answer?"}
    return ask, reasoning, call, result


def test_reasoning_carried_back_counts_only_until_the_next_user_turn():
    ask, reasoning, call, result = _tool_turn()
    estimator = Estimator(use_tokenizer=False)
    within = estimator.estimate(_responses([ask, reasoning, call, result]), provider="openai")
    without = estimator.estimate(_responses([ask, call, result]), provider="openai")
    assert within.estimate.input_tokens - without.estimate.input_tokens == 1000
    assert within.complete  # sized from its ciphertext: 0.99x-1.01x measured (issue 48)
    later = [ask, reasoning, call, result, {"role": "user", "content": "Thanks. And twice that?"}]
    dropped = estimator.estimate(_responses(later), provider="openai")
    plain = estimator.estimate(_responses([ask, call, result, later[-1]]), provider="openai")
    assert dropped.estimate.input_tokens == plain.estimate.input_tokens


def test_a_delta_after_a_new_user_turn_drops_the_reasoning_the_reported_input_carried():
    ask, reasoning, call, result = _tool_turn()
    estimator = Estimator(use_tokenizer=False)
    first = estimator.estimate(_responses([ask, reasoning, call, result]), provider="openai")
    estimator.observe(first, 1200)  # reported: 1,000 of it the carried reasoning
    follow = estimator.estimate(_responses([ask, reasoning, call, result, {
        "role": "user", "content": "Thanks."}]), provider="openai")  # fmt: skip
    assert follow.estimate.source == "delta"
    assert follow.estimate.input_tokens < 1200 - 1000 + 20


def test_anthropic_effort_and_task_budgets_add_no_structured_output_prompt():
    ask = [{"role": "user", "content": "What is 2+2?"}]
    plain = Estimator().estimate(Request("anthropic_messages", "claude-opus-4-8", ask),
                                 provider="anthropic")  # fmt: skip
    effort = Estimator().estimate(Request("anthropic_messages", "claude-opus-4-8", ask,
                                          response_format={"effort": "xhigh"}),
                                  provider="anthropic")  # fmt: skip
    assert effort.estimate.input_tokens == plain.estimate.input_tokens


def test_server_run_tools_mark_the_estimate_incomplete():
    ask = [{"role": "user", "content": "Who won yesterday?"}]
    search = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
    anthropic = Estimator().estimate(Request("anthropic_messages", "claude-sonnet-4-5", ask,
                                             tools=[search]), provider="anthropic")  # fmt: skip
    responses = Estimator().estimate(Request("openai_responses", "gpt-5", ask, tools=[
        {"type": "code_interpreter", "container": {"type": "auto"}}]), provider="openai")
    custom = Estimator().estimate(Request("anthropic_messages", "claude-sonnet-4-5", ask, tools=[
        {"name": "lookup", "input_schema": {"type": "object", "properties": {}}}]),
        provider="anthropic")  # fmt: skip
    assert not anthropic.complete and anthropic.server_tools
    assert not responses.complete and responses.server_tools
    assert custom.complete and not custom.server_tools


def test_what_server_run_tools_return_is_learnt_per_model_and_goes_to_the_bound():
    ask = [{"role": "user", "content": "Who won yesterday?"}]
    tools = [{"type": "web_search"}]
    estimator = Estimator()
    first = estimator.estimate(Request("openai_responses", "gpt-5", ask, tools=tools),
                               provider="openai")  # fmt: skip
    assert first.guessed is not None and first.guessed[:2] == ("server:web_search", 1)
    estimator.observe(first, first.estimate.input_tokens + 8000)  # the search results
    again = estimator.estimate(Request("openai_responses", "gpt-5", [{"role": "user", "content":
                               "And the day before?"}], tools=tools), provider="openai")  # fmt: skip
    assert not again.complete
    rest = again.estimate.input_tokens - again.guessed[2]
    assert again.guessed[2] == rest  # counted at most as much as the rest of the request
    assert again.input_max >= rest + 8000  # what the search may return: in the bound
