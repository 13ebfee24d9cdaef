"""``usage.source`` says ``reported`` only for figures the provider sent, on the span and in
the ledger row, through the real clients: litellm's made-up 0/0 usage is unknown and its
local count on streams ``estimated``; a row of a call whose usage is unknown does not claim ``reported``;
a Gemini stream cut inside its final chunk marks its partial usage (output unknown, not 0);
a 200 "stream" whose body is an HTML proxy page is an error (``error.type`` and a ``parse``
fault), never a silent 0-token success. Responses follow each provider's documented format."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3

import pytest

import otel_tokens
from otel_tokens.capture.sdk import anthropic as anthropic_sdk
from otel_tokens.capture.sdk import google_genai_patches
from otel_tokens.capture.sdk import litellm_patches
from otel_tokens.capture.sdk import openai as openai_sdk

from .. import cassettes
from ..telemetry.conftest import handling
from .replay import anthropic_client, openai_client
from .test_full_bill import chat, served

HTML = "<html><body><h1>Proxy authentication required</h1></body></html>"
MESSAGES = [{"role": "user", "content": "Say hello to the operator, please."}]


@pytest.fixture
def ledger_file(monkeypatch, tmp_path):
    db = tmp_path / "honest.db"
    monkeypatch.setenv("OTEL_TOKENS_LEDGER_PATH", str(db))
    otel_tokens.settings.reload()
    return db


def ledger_rows(db, agent: str) -> list[tuple]:
    """(source, input, output) of each of ``agent``'s rows, once its ledger is flushed."""
    otel_tokens.account.agents.get_agent(agent).ledger.flush()
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT source, input_tokens, output_tokens FROM otel_tokens_requests "
                            "WHERE ledger = ? ORDER BY id", (agent,)).fetchall()  # fmt: skip
    finally:
        conn.close()


def usage_attrs(span) -> dict:
    return {k: v for k, v in span.attributes.items() if k.startswith(("gen_ai.usage.", "otel_tokens.usage."))}


# -- litellm --------------------------------------------------------------------------------------

@pytest.fixture
def litellm_server():
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    pytest.importorskip("litellm", reason="litellm is an optional extra")
    from ..frameworks.test_litellm import Server

    server = Server()
    yield server
    server.close()


def _chunks_without_usage() -> bytes:
    from ..frameworks.test_litellm import CHAT

    chunk = {**CHAT, "object": "chat.completion.chunk", "usage": None}
    events = [{**chunk, "choices": [{"index": 0, "delta": {"content": "hello there"}, "finish_reason": None}]},
              {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]  # fmt: skip
    return ("".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n").encode()


def test_litellm_made_up_zero_usage_is_not_reported(litellm_server, ledger_file):
    import litellm

    from ..frameworks.test_litellm import CHAT

    litellm_server.json({k: v for k, v in CHAT.items() if k != "usage"})  # the provider sent none
    with handling(openai_sdk, litellm_patches) as t, otel_tokens.agent("honest-litellm"):
        response = litellm.completion(model="gpt-4o-mini", messages=MESSAGES,
                                      api_base=litellm_server.url + "/v1", api_key="k")  # fmt: skip
        assert response.usage.prompt_tokens == 0  # what litellm made up
        (span,) = t.finished()
    attrs = usage_attrs(span)
    assert attrs.get("otel_tokens.usage.source") != "reported", attrs
    assert attrs.get("gen_ai.usage.input_tokens") != 0, attrs  # unknown or a marked estimate, never 0
    assert [row[0] for row in ledger_rows(ledger_file, "honest-litellm")] != ["reported"]


def test_litellm_local_count_on_a_stream_is_estimated(litellm_server, ledger_file):
    import litellm

    litellm_server.queue.append(("text/event-stream", _chunks_without_usage()))
    with handling(openai_sdk, litellm_patches) as t, otel_tokens.agent("honest-litellm-stream"):
        for _ in litellm.completion(model="gpt-4o-mini", messages=MESSAGES, api_base=litellm_server.url + "/v1",
                                    api_key="k", stream=True, stream_options={"include_usage": True}):  # fmt: skip
            pass
        (span,) = t.finished()
    assert usage_attrs(span)["otel_tokens.usage.source"] == "estimated", usage_attrs(span)
    assert [row[0] for row in ledger_rows(ledger_file, "honest-litellm-stream")] == ["estimated"]


def test_litellm_html_page_for_a_stream_is_an_error(litellm_server):
    import litellm

    litellm_server.queue.append(("text/html", HTML.encode()))
    with handling(openai_sdk, litellm_patches) as t:
        with contextlib.suppress(Exception):  # litellm may raise its own error: passed through
            for _ in litellm.completion(model="gpt-4o-mini", messages=MESSAGES, api_base=litellm_server.url + "/v1",
                                        api_key="k", stream=True):  # fmt: skip
                pass
        (span,) = t.finished()
        assert span.attributes.get("error.type") or t.errors().get("parse"), span.attributes
        assert span.attributes.get("gen_ai.usage.output_tokens") != 0


# -- an HTML proxy page instead of an event stream, on the SDKs ----------------------------------------

def _html(uri: str) -> cassettes.Interaction:
    return cassettes.Interaction("documented", 0, "POST", uri, None, 200, {"content-type": ["text/html"]}, HTML)


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_an_html_page_for_a_stream_is_an_error_not_a_silent_success(sdk):
    module = openai_sdk if sdk == "openai" else anthropic_sdk
    with handling(module) as t:
        with contextlib.suppress(Exception):  # the client's own error, passed through as it was
            if sdk == "openai":
                client, _ = openai_client([_html("https://api.openai.com/v1")])
                stream = client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, stream=True)
            else:
                client, _ = anthropic_client([_html("https://api.anthropic.com/v1/messages")])
                stream = client.messages.create(model="claude-sonnet-4-6", max_tokens=64, messages=MESSAGES,
                                                stream=True)  # fmt: skip
            for _ in stream:
                pass
        (span,) = t.finished()
        assert span.attributes["error.type"] == "not_an_event_stream"
        assert t.errors()["parse"] == 1
        assert "gen_ai.usage.output_tokens" not in span.attributes


# -- a Gemini stream cut inside its final chunk ----------------------------------------------------

def test_a_gemini_stream_cut_in_its_final_chunk_marks_its_usage_partial():
    pytest.importorskip("google.genai", reason="google-genai is an optional extra")
    from .gemini_server import GeminiServer, answer

    class Cut(GeminiServer):
        def _answer(self, path, body):  # the final chunk stops halfway (a proxy timed out)
            first = answer("Par", {"promptTokenCount": 1200}, reason=None)
            last = json.dumps(answer("is.", {"promptTokenCount": 1200, "candidatesTokenCount": 300,
                                             "totalTokenCount": 1500}))  # fmt: skip
            return 200, "text/event-stream", (f"data: {json.dumps(first)}\r\n\r\ndata: {last[:len(last) // 2]}").encode(), {}

    server = Cut()
    try:
        client = server.client()  # kept: a closed client would fail for its own reason
        with handling(google_genai_patches) as t:
            with pytest.raises(Exception, match="parse"):  # google-genai's own error, passed through
                for _ in client.models.generate_content_stream(model="gemini-2.5-flash", contents="?"):
                    pass
            (span,) = t.finished()
    finally:
        server.close()
    attrs = usage_attrs(span)
    assert span.attributes.get("error.type")
    assert attrs.get("gen_ai.usage.output_tokens") != 0, attrs  # unknown (or a marked estimate), not 0
    marked = attrs.get("otel_tokens.usage.source") != "reported" or any(
        "partial" in k or "complete" in k for k in attrs)  # fmt: skip
    assert marked, attrs


# -- ledger rows of calls whose usage is unknown ---------------------------------------------------

def test_a_ledger_row_without_usage_does_not_say_reported(ledger_file):
    invalid = chat("gpt-4o-mini", "default", 100, 10)
    invalid["usage"]["prompt_tokens"] = -5  # not a count: usage unknown
    missing = chat("gpt-4o-mini", "default", 100, 10)
    del missing["usage"]
    with handling(openai_sdk), otel_tokens.agent("honest-ledger"):
        client, _ = openai_client(served(invalid, missing))
        for _ in range(2):
            client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    rows = ledger_rows(ledger_file, "honest-ledger")
    assert len(rows) == 2
    for source, inp, out in rows:
        assert source != "reported" or (inp, out) != (None, None), rows
