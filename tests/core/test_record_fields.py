"""The records a call is read into hold each value in its own field: the chat request and
response read from an openai object (its reading equals its JSON's), a computed price, an
agent's state figures and a request's estimate. (They were built by position once; a field
added or reordered without its reader fails here. The Outcome and its Line:
tests/core/test_account.py.)"""

from __future__ import annotations

import pytest

from otel_tokens.account.estimate import Estimator
from otel_tokens.account.pricing import Pricer
from otel_tokens.account.state import TokenState
from otel_tokens.capture.wire import openai as wire
from otel_tokens.request import Request
from otel_tokens.usage import Usage


def test_a_chat_request_has_every_field_in_its_slot():
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    schema = {"type": "json_schema", "json_schema": {"name": "s", "schema": {}}}
    messages = [{"role": "user", "content": "hi"}]
    made = wire.chat_request({"model": "gpt-4o", "messages": messages, "tools": tools,
                              "response_format": schema, "max_tokens": 64})  # fmt: skip
    assert type(made) is Request and len(made) == len(Request._fields)
    assert made == Request(api="openai_chat", model="gpt-4o", messages=messages, tools=tools,
                           response_format=schema, max_output_tokens=64)  # fmt: skip
    bare = wire.chat_request({"model": "gpt-4o", "messages": messages})
    assert bare == Request(api="openai_chat", model="gpt-4o", messages=messages)


def test_a_chat_completion_object_reads_as_its_json_does():
    """The SDK object's reading (plain attribute reads) gives what the field-by-field reading
    of the same body as JSON gives, field by field."""
    openai = pytest.importorskip("openai")
    body = {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-2024-08-06",
        "service_tier": "flex",
        "choices": [{"index": 0, "finish_reason": "length",
                     "message": {"role": "assistant", "content": "x"}}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150,
                  "prompt_tokens_details": {"cached_tokens": 64, "audio_tokens": 0},
                  "completion_tokens_details": {"reasoning_tokens": 10, "audio_tokens": 0}},
    }  # fmt: skip
    made = wire.chat_response(openai.types.chat.ChatCompletion.model_validate(body))
    read = wire.chat_response(body)
    assert len(made) == len(read) and made._fields == read._fields
    for name in read._fields:
        assert getattr(made, name) == getattr(read, name), name
    assert made.usage.input_tokens == 120 and made.usage.cache_read_tokens == 64
    assert made.model == "gpt-4o-2024-08-06" and made.response_id == "chatcmpl-1"
    assert made.finish_reasons == ("length",) and made.billing is not None


def test_a_computed_price_has_every_field_in_its_slot():
    pricer = Pricer()
    price = pricer.price(Usage(input_tokens=1000, output_tokens=100), "openai", "gpt-4o-2024-08-06")
    assert price.source == "computed" and price.unpriced is False
    assert price.cost_usd == pytest.approx(1000 * 2.5e-6 + 100 * 10e-6)
    assert price.components == () and price.unpriced_components == ()
    assert price.match is not None and isinstance(price.match, str)


def test_the_state_figures_have_every_field_in_their_slot():
    state = TokenState(max_input_tokens=1000)
    state.complete(Usage(input_tokens=400, output_tokens=30))
    done = state.complete(Usage(input_tokens=250, output_tokens=12))
    figures = state.figures()
    assert done == figures
    assert (figures.turn_count, figures.total_output_tokens) == (2, 42)
    assert figures.max_observed_input_tokens == 400
    assert figures.context_utilization == pytest.approx(0.25)


def test_a_request_estimate_has_every_field_in_its_slot():
    """The whole request's estimate, then a delta one from its cursor (both built by position)."""
    estimator = Estimator()
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello " * 50}]
    first = estimator.estimate(Request("openai_chat", "gpt-4o", messages), provider="openai")
    assert first.estimate.source in ("exact", "full") and first.estimate.input_tokens > 50
    assert first.model == "gpt-4o" and first.n_messages == 2 and first.calibration is None
    exact = first.estimate.source == "exact"  # tiktoken's encoding loaded (else the heuristic)
    assert (first.heuristic_raw == 0) is exact and first.fixed > 0 and first.complete is True
    assert (first.carried, first.guessed, first.server_tools, first.input_max) == (0, None, False, None)
    assert isinstance(first.preamble_digest, int) and isinstance(first.cursor_key, tuple)
    estimator.observe(first, first.estimate.input_tokens + 3)
    longer = [*messages, {"role": "assistant", "content": "hi"}, {"role": "user", "content": "more"}]
    delta = estimator.estimate(Request("openai_chat", "gpt-4o", longer), provider="openai")
    assert delta.estimate.source == "delta" and delta.n_messages == 4
    assert delta.estimate.input_tokens > first.estimate.input_tokens + 3
    assert delta.model == "gpt-4o" and delta.heuristic_raw == 0 and delta.complete is True
    assert (delta.guessed, delta.server_tools, delta.input_max) == (None, False, None)
