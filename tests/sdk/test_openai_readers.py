"""The OpenAI response readers: the attribute fast path for SDK objects and the field-by-field
path for every other shape (dicts, objects missing a field) read the same numbers."""

from __future__ import annotations

from types import SimpleNamespace

from otel_tokens.capture.wire.openai import chat_response

BODY = {
    "id": "chatcmpl-own-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-2024-08-06",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "a"}, "finish_reason": "stop"},
        {"index": 1, "message": {"role": "assistant", "content": "b"}, "finish_reason": "length"},
    ],
    "usage": {"prompt_tokens": 1200, "completion_tokens": 300, "total_tokens": 1500,
              "prompt_tokens_details": {"cached_tokens": 1024},
              "completion_tokens_details": {"reasoning_tokens": 128}},
}  # fmt: skip


def test_sdk_object_and_dict_read_alike():
    from openai.types.chat import ChatCompletion

    from_sdk = chat_response(ChatCompletion.model_validate(BODY))
    from_dict = chat_response(BODY)
    assert from_sdk == from_dict
    usage = from_sdk.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens,
            usage.reasoning_tokens, usage.cache_write_tokens) == (1200, 300, 1024, 128, None)  # fmt: skip
    assert from_sdk.finish_reasons == ("stop", "length") and from_sdk.response_id == "chatcmpl-own-1"


def test_an_object_missing_fields_falls_back_to_the_field_reader():
    """No ``choices`` and usage without details: the fast path raises AttributeError inside,
    the field-by-field reader takes over and reads what is there."""
    odd = SimpleNamespace(id="r-1", model="gpt-4o", usage=SimpleNamespace(prompt_tokens=7, completion_tokens=2))
    answer = chat_response(odd)
    assert answer.finish_reasons == () and answer.model == "gpt-4o"
    assert (answer.usage.input_tokens, answer.usage.output_tokens, answer.usage.cache_read_tokens) == (7, 2, None)
