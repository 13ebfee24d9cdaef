"""Every call style of every operation records the same exact usage, once, with one span, and
the caller receives exactly what the uninstrumented client gives.

Each case replays a real recorded interaction (the peer corpus) through the real client
twice: uninstrumented, then instrumented. What the caller received (parsed objects, events,
bytes, lines, text, JSON) must be identical; the span's tokens by class, response id and
model must equal the interaction's true usage; no coroutine may be left un-awaited (a
``RuntimeWarning`` fails the test) and no instrumentation fault may be counted. Runs on
both supported majors of each SDK (the second venv of ``.ci/run``).
"""

from __future__ import annotations

import contextlib
import gc
import warnings

import pytest

from otel_tokens.capture.sdk import anthropic as anthropic_sdk
from otel_tokens.capture.sdk import openai as openai_sdk

from .. import peer
from ..telemetry.conftest import handling
from . import drive

#: (case, file in the peer corpus, interaction index)
CASES = {
    "openai-chat": ("agno__openinference__instrumentation__agno__fixtures__agent_run.yaml", 0),
    "openai-chat-stream": ("agno__test_agent__test_agent_run_streaming.yaml", 0),
    "openai-responses": ("test_processor__test_agent_with_different_model.yaml", 0),
    "openai-responses-stream": ("test_openai__test_responses_stream.yaml", 0),
    "openai-responses-reasoning-stream": ("agent_run_reasoning_stream.yaml", 0),
    "anthropic-messages": ("test_anthropic_instrumentation_messages.yaml", 0),
    "anthropic-messages-stream": ("opentelemetry-instrumentation-anthropic__test_sync_messages_create_streaming.yaml", 0),
    "anthropic-beta-messages": ("test_anthropic_instrumentation_beta_messages_create.yaml", 0),
}

PLAIN_STYLES = ("plain", "raw:parse", "raw:text", "streaming:parse", "streaming:read",
                "streaming:text", "streaming:json", "streaming:iter_bytes")  # fmt: skip
STREAM_STYLES = ("plain", "raw:parse", "raw:text", "streaming:parse", "streaming:iter_bytes",
                 "streaming:iter_lines", "streaming:iter_text", "streaming:read",
                 "streaming:text", "helper:events")  # fmt: skip
EXTRA = {
    "anthropic-messages-stream": ("helper:text_stream", "helper:until_done"),
    "openai-chat": ("raw:content",),  # openai's legacy raw response: content, a property
}


def _truth(case: str) -> peer.Truth:
    name, index = CASES[case]
    for truth in peer.truths():
        if truth.file.endswith(name) and truth.index == index:
            return truth
    raise LookupError(name)


def _params():
    for case, (name, _) in CASES.items():
        stream = "stream" in case
        for style in (STREAM_STYLES if stream else PLAIN_STYLES) + EXTRA.get(case, ()):
            for is_async in (False, True):
                yield pytest.param(case, style, is_async,
                                   id=f"{case}-{style}-{'async' if is_async else 'sync'}")  # fmt: skip


@pytest.fixture
def instrumented():
    """Install both SDK instrumentors around a fresh in-memory telemetry (after the bare run)."""
    with contextlib.ExitStack() as stack:
        yield lambda: stack.enter_context(handling(openai_sdk, anthropic_sdk))


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize(("case", "style", "is_async"), list(_params()))
def test_call_style_records_exact_usage_once_and_is_transparent(case, style, is_async, instrumented):
    peer.require()
    truth = _truth(case)
    it = peer.interaction(truth)
    bare = drive.run(it, style, is_async)

    telemetry = instrumented()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = drive.run(it, style, is_async)
        gc.collect()  # an un-awaited coroutine warns when collected
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in caught]
    assert drive.as_text(got) == drive.as_text(bare), "the caller must receive what the SDK returns"

    (span,) = telemetry.finished()
    attributes = span.attributes
    for cls, attribute in peer.ATTRIBUTES.items():
        assert attributes.get(attribute) == truth.usage[cls], (cls, dict(attributes))
    assert attributes["otel_tokens.usage.source"] == "reported"
    assert attributes["gen_ai.response.model"] == truth.response_model
    assert attributes["gen_ai.response.id"]
    assert telemetry.errors() == {}


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_streaming_response_closed_unread_ends_the_call_once(is_async, instrumented):
    """``with_streaming_response`` left without reading the body: one span, no usage (the
    body was never read, so nothing was billed that we could see), ending ``closed``."""
    peer.require()
    it = peer.interaction(_truth("openai-chat-stream"))
    t = drive.target(it)
    telemetry = instrumented()
    client, _ = drive.client_for(it, "openai", is_async)
    method = drive.resolve(client, "chat.completions.with_streaming_response.create")
    kwargs = drive.arguments(t, drive.resolve(client, t.path))
    if is_async:
        import asyncio

        async def main():
            async with method(**kwargs) as response:
                assert response.status_code == 200

        asyncio.run(main())
    else:
        with method(**kwargs) as response:
            assert response.status_code == 200
    gc.collect()
    (span,) = telemetry.finished()
    assert span.attributes["otel_tokens.stream.end"] == "closed"
    assert "gen_ai.usage.input_tokens" not in span.attributes
