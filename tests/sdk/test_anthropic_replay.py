"""Every recorded Anthropic cassette replayed through the real client, instrumented.

Each covered cassette is served to a real ``anthropic`` client (``tests/sdk/replay.py``: a
mock transport over httpx or httpx2, whichever the installed major uses) and called the way
it was recorded. For every call the span and the metric points must equal the usage numbers
in the recorded response, worked out here independently of the instrumentor:

* ``gen_ai.usage.input_tokens`` = ``input_tokens`` + ``cache_read_input_tokens`` +
  ``cache_creation_input_tokens``; ``gen_ai.usage.cache_read.input_tokens`` /
  ``gen_ai.usage.cache_write.input_tokens`` present exactly when recorded (0 included);
  ``gen_ai.usage.output_tokens``; ``otel_tokens.usage.source = reported``;
* streams: ``message_start`` for the input side, the last ``message_delta`` value of each field;
* ``gen_ai.response.id``, ``gen_ai.response.model``, ``gen_ai.response.finish_reasons``
  (``stop_reason``), span name, ``gen_ai.provider.name``, ``gen_ai.request.stream``;
* metric points: ``otel_tokens.tokens`` per token type (summed over the cassette's calls) and
  ``gen_ai.client.token.usage`` (input/output histogram sums and counts);
* no instrumentation fault, one span per call, the caller's result unchanged.

No recorded Anthropic response is a 4xx (``error.type`` is covered by a served 400/529 below).

CASSETTES lists each file: how it is replayed (sync/async, ``beta.`` for ``?beta=true``,
``create``, ``create:stream`` iterated, or ``messages.stream()`` consumed by iteration,
``text_stream`` or ``get_final_message()``), or ``None`` and the reason it is left out.
"""

from __future__ import annotations

import asyncio

import pytest

from otel_tokens.capture.sdk import anthropic as anthropic_sdk

from .. import cassettes
from ..telemetry.conftest import handling
from .replay import anthropic_client, call_kwargs

# the recorded models are deprecated; the SDK says so on every call
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

FOLDER = "anthropic"

#: file -> (how it is replayed, note) or (None, why it is left out)
CASSETTES: dict[str, tuple[str | None, str]] = {
    "test_completion__test_anthropic_completion_legacy.yaml": (None, "legacy text completions (/v1/complete): out of scope"),
    "test_completion__test_anthropic_completion_with_events_with_content.yaml": (None, "legacy text completions (/v1/complete): out of scope"),
    "test_completion__test_anthropic_completion_with_events_with_no_content.yaml": (None, "legacy text completions (/v1/complete): out of scope"),
    "test_messages__test_anthropic_async_multi_modal_legacy.yaml": ("async create", "1 call(s)"),
    "test_messages__test_anthropic_async_multi_modal_with_events_with_content.yaml": ("async create", "1 call(s)"),
    "test_messages__test_anthropic_async_multi_modal_with_events_with_no_content.yaml": ("async create", "1 call(s)"),
    "test_messages__test_anthropic_image_with_history.yaml": ("sync create", "2 call(s)"),
    "test_messages__test_anthropic_message_create_legacy.yaml": ("sync create", "1 call(s)"),
    "test_messages__test_anthropic_message_create_with_events_with_content.yaml": ("sync create", "1 call(s)"),
    "test_messages__test_anthropic_message_create_with_events_with_no_content.yaml": ("sync create", "1 call(s)"),
    "test_messages__test_anthropic_message_stream_manager_legacy.yaml": ("sync stream:iterate", "1 call(s)"),
    "test_messages__test_anthropic_message_stream_manager_with_events_with_content.yaml": ("sync stream:iterate", "1 call(s)"),
    "test_messages__test_anthropic_message_stream_manager_with_events_with_no_content.yaml": ("sync stream:iterate", "1 call(s)"),
    "test_messages__test_anthropic_message_streaming_legacy.yaml": ("sync create:stream", "1 call(s)"),
    "test_messages__test_anthropic_message_streaming_with_events_with_content.yaml": ("sync create:stream", "1 call(s)"),
    "test_messages__test_anthropic_message_streaming_with_events_with_no_content.yaml": ("sync create:stream", "1 call(s)"),
    "test_messages__test_anthropic_multi_modal_legacy.yaml": ("sync create", "1 call(s)"),
    "test_messages__test_anthropic_multi_modal_with_events_with_content.yaml": ("sync create", "1 call(s)"),
    "test_messages__test_anthropic_multi_modal_with_events_with_no_content.yaml": ("sync create", "1 call(s)"),
    "test_messages__test_anthropic_streaming_helper_methods_legacy.yaml": ("sync stream:get_final_message", "1 call(s)"),
    "test_messages__test_anthropic_sync_streaming_helper_methods_legacy.yaml": ("sync stream:get_final_message", "1 call(s)"),
    "test_messages__test_anthropic_text_stream_helper_method_legacy.yaml": ("sync stream:text_stream", "1 call(s)"),
    "test_messages__test_anthropic_tools_history_legacy.yaml": ("sync create", "1 call(s)"),
    "test_messages__test_anthropic_tools_history_with_events_with_content.yaml": ("sync create", "1 call(s)"),
    "test_messages__test_anthropic_tools_history_with_events_with_no_content.yaml": ("sync create", "1 call(s)"),
    "test_messages__test_anthropic_tools_legacy.yaml": ("sync create", "1 call(s)"),
    "test_messages__test_anthropic_tools_streaming_legacy.yaml": ("sync create:stream", "1 call(s)"),
    "test_messages__test_anthropic_tools_streaming_with_events_with_content.yaml": ("sync create:stream", "1 call(s)"),
    "test_messages__test_anthropic_tools_streaming_with_events_with_no_content.yaml": ("sync create:stream", "1 call(s)"),
    "test_messages__test_anthropic_tools_with_events_with_content.yaml": ("sync create", "1 call(s)"),
    "test_messages__test_anthropic_tools_with_events_with_no_content.yaml": ("sync create", "1 call(s)"),
    "test_messages__test_async_anthropic_beta_message_stream_manager_legacy.yaml": ("async beta.stream:iterate", "1 call(s)"),
    "test_messages__test_async_anthropic_message_create_legacy.yaml": ("async create", "1 call(s)"),
    "test_messages__test_async_anthropic_message_create_with_events_with_content.yaml": ("async create", "1 call(s)"),
    "test_messages__test_async_anthropic_message_create_with_events_with_no_content.yaml": ("async create", "1 call(s)"),
    "test_messages__test_async_anthropic_message_stream_manager_legacy.yaml": ("async stream:iterate", "1 call(s)"),
    "test_messages__test_async_anthropic_message_stream_manager_with_events_with_content.yaml": ("async stream:iterate", "1 call(s)"),
    "test_messages__test_async_anthropic_message_stream_manager_with_events_with_no_content.yaml": ("async stream:iterate", "1 call(s)"),
    "test_messages__test_async_anthropic_message_streaming_legacy.yaml": ("async create:stream", "1 call(s)"),
    "test_messages__test_async_anthropic_message_streaming_with_events_with_content.yaml": ("async create:stream", "1 call(s)"),
    "test_messages__test_async_anthropic_message_streaming_with_events_with_no_content.yaml": ("async create:stream", "1 call(s)"),
    "test_messages__test_with_asyncio_run_legacy.yaml": ("async create", "1 call(s)"),
    "test_messages__test_with_asyncio_run_with_events_with_content.yaml": ("async create", "1 call(s)"),
    "test_messages__test_with_asyncio_run_with_events_with_no_content.yaml": ("async create", "1 call(s)"),
    "test_prompt_caching__test_anthropic_prompt_caching_async_legacy.yaml": ("async create", "2 call(s)"),
    "test_prompt_caching__test_anthropic_prompt_caching_async_stream_legacy.yaml": ("async create:stream", "2 call(s)"),
    "test_prompt_caching__test_anthropic_prompt_caching_async_stream_with_events_with_content.yaml": ("async create:stream", "2 call(s)"),
    "test_prompt_caching__test_anthropic_prompt_caching_async_stream_with_events_with_no_content.yaml": ("async create:stream", "2 call(s)"),
    "test_prompt_caching__test_anthropic_prompt_caching_async_with_events_with_content.yaml": ("async create", "2 call(s)"),
    "test_prompt_caching__test_anthropic_prompt_caching_async_with_events_with_no_content.yaml": ("async create", "2 call(s)"),
    "test_prompt_caching__test_anthropic_prompt_caching_legacy.yaml": ("sync create", "2 call(s)"),
    "test_prompt_caching__test_anthropic_prompt_caching_stream_legacy.yaml": ("sync create:stream", "2 call(s)"),
    "test_prompt_caching__test_anthropic_prompt_caching_stream_with_events_with_content.yaml": ("sync create:stream", "2 call(s)"),
    "test_prompt_caching__test_anthropic_prompt_caching_stream_with_events_with_no_content.yaml": ("sync create:stream", "2 call(s)"),
    "test_prompt_caching__test_anthropic_prompt_caching_with_events_with_content.yaml": ("sync create", "2 call(s)"),
    "test_prompt_caching__test_anthropic_prompt_caching_with_events_with_no_content.yaml": ("sync create", "2 call(s)"),
    "test_structured_outputs__test_anthropic_structured_outputs_legacy.yaml": ("sync beta.create", "1 call(s)"),
    "test_structured_outputs__test_anthropic_structured_outputs_with_events_with_content.yaml": ("sync beta.create", "1 call(s)"),
    "test_structured_outputs__test_anthropic_structured_outputs_with_events_with_no_content.yaml": ("sync beta.create", "1 call(s)"),
    "test_thinking__test_anthropic_thinking_legacy.yaml": ("sync create", "1 call(s)"),
    "test_thinking__test_anthropic_thinking_streaming_legacy.yaml": ("sync create:stream", "1 call(s)"),
    "test_thinking__test_anthropic_thinking_streaming_with_events_with_content.yaml": ("sync create:stream", "1 call(s)"),
    "test_thinking__test_anthropic_thinking_streaming_with_events_with_no_content.yaml": ("sync create:stream", "1 call(s)"),
    "test_thinking__test_anthropic_thinking_with_events_with_content.yaml": ("sync create", "1 call(s)"),
    "test_thinking__test_anthropic_thinking_with_events_with_no_content.yaml": ("sync create", "1 call(s)"),
    "test_thinking__test_async_anthropic_thinking_legacy.yaml": ("async create", "1 call(s)"),
    "test_thinking__test_async_anthropic_thinking_streaming_legacy.yaml": ("async create:stream", "1 call(s)"),
    "test_thinking__test_async_anthropic_thinking_streaming_with_events_with_content.yaml": ("async create:stream", "1 call(s)"),
    "test_thinking__test_async_anthropic_thinking_streaming_with_events_with_no_content.yaml": ("async create:stream", "1 call(s)"),
    "test_thinking__test_async_anthropic_thinking_with_events_with_content.yaml": ("async create", "1 call(s)"),
    "test_thinking__test_async_anthropic_thinking_with_events_with_no_content.yaml": ("async create", "1 call(s)"),
}


def _files():
    return cassettes.all_files(FOLDER)


@pytest.fixture
def telemetry():
    cassettes.require(cassettes.CASSETTES / FOLDER)
    with handling(anthropic_sdk) as t:
        yield t


def test_the_table_lists_every_cassette():
    cassettes.require(cassettes.CASSETTES / FOLDER)
    assert sorted(p.name for p in _files()) == sorted(CASSETTES)


# -- what the recording says, worked out independently ------------------------------------
def expected(it: cassettes.Interaction) -> dict:
    """Token fields, id, model and stop reason of one recorded response."""
    fields: dict = {}
    if it.is_stream:
        rid = model = reason = None
        for event in it.sse_events():
            kind = event.get("type")
            if kind == "message_start":
                message = event["message"]
                rid, model = message["id"], message["model"]
                usage = {k: v for k, v in (message.get("usage") or {}).items() if k != "output_tokens"}
            elif kind == "message_delta":
                reason = (event.get("delta") or {}).get("stop_reason") or reason
                usage = event.get("usage") or {}
            else:
                continue
            fields.update({k: v for k, v in usage.items() if isinstance(v, int)})
    else:
        body = it.response_json()
        rid, model, reason = body["id"], body["model"], body.get("stop_reason")
        fields = {k: v for k, v in body["usage"].items() if isinstance(v, int)}
    read = fields.get("cache_read_input_tokens")
    write = fields.get("cache_creation_input_tokens")
    tokens = {
        "input": fields["input_tokens"] + (read or 0) + (write or 0),
        "output": fields["output_tokens"],
    }
    if read is not None:
        tokens["cache_read"] = read
    if write is not None:
        tokens["cache_write"] = write
    return {"tokens": tokens, "id": rid, "model": model, "reason": reason}


SPAN_ATTR = {
    "input": "gen_ai.usage.input_tokens",
    "output": "gen_ai.usage.output_tokens",
    "cache_read": "gen_ai.usage.cache_read.input_tokens",
    "cache_write": "gen_ai.usage.cache_write.input_tokens",
}


# -- calling the real client the way the cassette was recorded -----------------------------
def _resource(client, it):
    return client.beta.messages if "beta=true" in it.uri else client.messages


def replay_sync(how: str, it: cassettes.Interaction) -> None:
    client, replay = anthropic_client([it])
    messages = _resource(client, it)
    body = dict(it.request_body)
    if how.endswith("create"):
        result = messages.create(**call_kwargs(messages.create, body))
        assert result.id == it.response_json()["id"]
    elif how.endswith("create:stream"):
        events = list(messages.create(**call_kwargs(messages.create, body)))
        assert len(events) == len([e for e in it.sse_events() if e.get("type") != "ping"])
    else:
        body.pop("stream", None)
        with messages.stream(**call_kwargs(messages.stream, body)) as stream:
            if how.endswith("text_stream"):
                text = "".join(stream.text_stream)
                assert text == stream.get_final_message().content[0].text
            elif how.endswith("get_final_message"):
                assert stream.get_final_message().id == expected(it)["id"]
            else:
                assert sum(1 for _ in stream) > 0
    assert not replay.interactions and len(replay.sent) == 1


async def replay_async(how: str, it: cassettes.Interaction) -> None:
    client, replay = anthropic_client([it], is_async=True)
    messages = _resource(client, it)
    body = dict(it.request_body)
    if how.endswith("create"):
        result = await messages.create(**call_kwargs(messages.create, body))
        assert result.id == it.response_json()["id"]
    elif how.endswith("create:stream"):
        events = [e async for e in await messages.create(**call_kwargs(messages.create, body))]
        assert len(events) == len([e for e in it.sse_events() if e.get("type") != "ping"])
    else:
        body.pop("stream", None)
        async with messages.stream(**call_kwargs(messages.stream, body)) as stream:
            if how.endswith("text_stream"):
                text = "".join([t async for t in stream.text_stream])
                assert text == (await stream.get_final_message()).content[0].text
            elif how.endswith("get_final_message"):
                assert (await stream.get_final_message()).id == expected(it)["id"]
            else:
                assert len([e async for e in stream]) > 0
    assert not replay.interactions and len(replay.sent) == 1


COVERED = sorted(name for name, (how, _) in CASSETTES.items() if how is not None)


@pytest.mark.parametrize("name", COVERED)
def test_replay(telemetry, name):
    how = CASSETTES[name][0]
    recorded = cassettes.load(cassettes.require(cassettes.CASSETTES / FOLDER) / name)
    for it in recorded:
        if how.startswith("async"):
            asyncio.run(replay_async(how, it))
        else:
            replay_sync(how, it)

    spans = telemetry.finished()
    assert len(spans) == len(recorded)
    totals: dict[str, int] = {}
    for span, it in zip(spans, recorded):
        want = expected(it)
        attrs = dict(span.attributes)
        for token_type, attribute in SPAN_ATTR.items():
            assert attrs.get(attribute) == want["tokens"].get(token_type), (token_type, attrs)
        assert "gen_ai.usage.reasoning.output_tokens" not in attrs  # not reported by these
        assert attrs["otel_tokens.usage.source"] == "reported"
        assert attrs["gen_ai.response.id"] == want["id"]
        assert attrs["gen_ai.response.model"] == want["model"]
        assert attrs["gen_ai.response.finish_reasons"] == (want["reason"],)
        assert attrs["gen_ai.provider.name"] == "anthropic"
        assert attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.request.model"] == it.request_body["model"]
        assert attrs["gen_ai.request.stream"] is it.is_stream
        assert span.name == f"chat {it.request_body['model']}"
        assert "error.type" not in attrs
        if it.is_stream:
            assert attrs["otel_tokens.stream.end"] == "exhausted"
        for token_type, value in want["tokens"].items():
            totals[token_type] = totals.get(token_type, 0) + value

    for token_type, value in totals.items():
        point = telemetry.point("otel_tokens.tokens", gen_ai__token__type=token_type)
        assert point.value == value, token_type
    assert {p.attributes["gen_ai.token.type"] for p in telemetry.points("otel_tokens.tokens")} == set(totals)
    for token_type in ("input", "output"):
        hist = telemetry.point("gen_ai.client.token.usage", gen_ai__token__type=token_type)
        assert hist.sum == totals[token_type] and hist.count == len(recorded)
    assert telemetry.errors() == {}


# -- recorded errors -----------------------------------------------------------------------
def _served(status: int, body: str) -> cassettes.Interaction:
    return cassettes.Interaction(
        cassette="served", index=0, method="POST", uri="https://api.anthropic.com/v1/messages",
        request_body=None, status=status, response_headers={"content-type": ["application/json"]},
        response_text=body,
    )  # fmt: skip


@pytest.mark.parametrize("status,kind", [(400, "invalid_request_error"), (529, "overloaded_error")])
@pytest.mark.parametrize("is_async", [False, True])
def test_error_responses(telemetry, status, kind, is_async):
    import anthropic

    body = '{"type":"error","error":{"type":"%s","message":"nope"}}' % kind
    client, _ = anthropic_client([_served(status, body)], is_async=is_async)
    kwargs = dict(model="claude-3-5-haiku-latest", max_tokens=10,
                  messages=[{"role": "user", "content": "hi"}])  # fmt: skip
    with pytest.raises(anthropic.APIStatusError) as raised:
        if is_async:
            asyncio.run(client.messages.create(**kwargs))
        else:
            client.messages.create(**kwargs)
    cls = type(raised.value)
    error_type = f"{cls.__module__}.{cls.__qualname__}"  # BadRequestError, OverloadedError...
    assert raised.value.status_code == status
    attrs = dict(telemetry.span().attributes)
    assert attrs["error.type"] == error_type
    assert "gen_ai.usage.input_tokens" not in attrs
    point = telemetry.point("gen_ai.client.operation.duration")
    assert point.attributes["error.type"] == error_type and point.count == 1
