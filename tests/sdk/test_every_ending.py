"""Every backend x every way a call can end: each call that reached the backend ends exactly
once, with one span, one request counted (``gen_ai.client.operation.duration``) and one
ledger row, whether its answer was whole, carried usage that is not token counts, was cut
short, or (streams) was dropped unread or left by a caller that raised mid-stream.

The real client libraries talk over HTTP to a local server speaking each API's wire format
(documented format; ``tests/local_server.py`` cuts a body short by declaring a longer
``content-length`` and closing); agent-CLI runs are real subprocesses of a fake CLI on PATH,
``instrument_backend`` a real wrapped method. Scenarios that do not exist for a backend (a
non-streaming API dropped unread) are not generated.
"""

from __future__ import annotations

import asyncio
import base64
import gc
import json
import os
import subprocess
from typing import Any, Callable

import pytest
from opentelemetry.trace import StatusCode

from otel_tokens.account.agents import agents

from ..local_server import LocalServer
from ..telemetry.conftest import handling

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network at import

OK, INVALID, CUT, DROPPED, RAISES = (
    "ok",
    "invalid usage",
    "cut body",
    "dropped un-iterated",
    "caller raises",
)
BAD = -7  # a usage value that is not a token count


class Server(LocalServer):
    """Answers each request with the next queued (content type, payload, cut) reply."""

    def __init__(self) -> None:
        self.queue: list[tuple[str, bytes, bool]] = []
        super().__init__(self._answer)

    def _answer(self, path: str, body: Any) -> tuple[int, str, bytes, dict[str, str]]:
        kind, payload, cut = self.queue.pop(0)
        headers = {"content-length": str(len(payload) + 500)} if cut else {}
        return 200, kind, payload, headers

    def json(self, body: Any, cut: bool = False) -> None:
        payload = json.dumps(body).encode()
        self.queue.append(
            ("application/json", payload[: len(payload) // 2] if cut else payload, cut)
        )

    def sse(self, events: list[Any], cut: bool = False) -> None:
        # an event name as Anthropic's API sends it (its SDK reads events by name)
        text = "".join((f"event: {e['type']}\n" if "type" in e and "choices" not in e else "")
                       + f"data: {json.dumps(e)}\n\n" for e in events)  # fmt: skip
        payload = text.encode()
        self.queue.append(
            ("text/event-stream", payload[: len(payload) * 2 // 3] if cut else payload, cut)
        )

    def raw(self, kind: str, payload: bytes, cut: bool = False) -> None:
        self.queue.append((kind, payload[: len(payload) * 2 // 3] if cut else payload, cut))


def _drop(stream: Any) -> None:
    """Open a stream and drop it unread."""
    del stream


def _raise_midway(stream: Any) -> None:
    """Read one item, then raise from the caller's own loop."""
    with pytest.raises(RuntimeError):
        for _item in stream:
            raise RuntimeError("the caller's own failure")


# -- openai -------------------------------------------------------------------------------------
CHAT_USAGE = {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}


def _chat(usage: dict) -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                         "finish_reason": "stop"}], "usage": usage}  # fmt: skip


def _chat_chunks(usage: dict) -> list[dict]:
    base = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini",
    }
    words = [{**base, "choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}]}
             for w in ("one ", "two ", "three ", "four")]  # fmt: skip
    stop = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    return [*words, stop, {**base, "choices": [], "usage": usage}]


class OpenAIDriver:
    patches = "openai_patches"
    streams = True

    def __init__(self, server: Server) -> None:
        import openai

        self.server = server
        self.client = openai.OpenAI(api_key="test", base_url=server.url + "/v1", max_retries=0)

    def call(self, usage: dict, cut: bool = False) -> None:
        self.server.json(_chat(usage), cut)
        self.client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
        )

    def stream(self, usage: dict, cut: bool = False) -> Any:
        self.server.sse(_chat_chunks(usage), cut)
        return self.client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True,
            stream_options={"include_usage": True})  # fmt: skip

    ok_usage, bad_usage = CHAT_USAGE, {**CHAT_USAGE, "prompt_tokens": BAD}


# -- anthropic ----------------------------------------------------------------------------------
MESSAGE_USAGE = {"input_tokens": 20, "output_tokens": 4}


def _message(usage: dict) -> dict:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-3-5-haiku-20241022",
            "content": [{"type": "text", "text": "hey"}], "stop_reason": "end_turn",
            "stop_sequence": None, "usage": usage}  # fmt: skip


def _message_events(usage: dict) -> list[dict]:
    start = {**_message({**usage, "output_tokens": 1}), "content": [], "stop_reason": None}
    deltas = [{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}}
              for w in ("one ", "two ", "three ", "four")]  # fmt: skip
    return [{"type": "message_start", "message": start},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            *deltas, {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
             "usage": {"output_tokens": usage["output_tokens"]}},
            {"type": "message_stop"}]  # fmt: skip


class AnthropicDriver:
    patches = "anthropic_patches"
    streams = True

    def __init__(self, server: Server) -> None:
        import anthropic

        self.server = server
        self.client = anthropic.Anthropic(api_key="test", base_url=server.url, max_retries=0)

    def call(self, usage: dict, cut: bool = False) -> None:
        self.server.json(_message(usage), cut)
        self.client.messages.create(model="claude-3-5-haiku-20241022", max_tokens=64,
                                    messages=[{"role": "user", "content": "hi"}])  # fmt: skip

    def stream(self, usage: dict, cut: bool = False) -> Any:
        self.server.sse(_message_events(usage), cut)
        return self.client.messages.create(model="claude-3-5-haiku-20241022", max_tokens=64, stream=True,
                                           messages=[{"role": "user", "content": "hi"}])  # fmt: skip

    ok_usage, bad_usage = MESSAGE_USAGE, {**MESSAGE_USAGE, "input_tokens": BAD}


# -- google-genai -------------------------------------------------------------------------------
GEMINI_USAGE = {"promptTokenCount": 9, "candidatesTokenCount": 3, "totalTokenCount": 12}


def _gemini(text: str, usage: dict) -> dict:
    return {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "index": 0,
                            "finishReason": "STOP"}],
            "modelVersion": "gemini-2.5-flash", "responseId": "resp-1", "usageMetadata": usage}  # fmt: skip


class GeminiDriver:
    patches = "google_genai_patches"
    streams = True
    #: the SDK sends a stream's request at its first read: one dropped unread never reached
    #: the backend, and is no call
    sent_at_first_read = True

    def __init__(self, server: Server) -> None:
        from google import genai
        from google.genai import types

        self.server = server
        options = types.HttpOptions(
            base_url=server.url, retry_options=types.HttpRetryOptions(attempts=1)
        )
        self.client = genai.Client(api_key="test-key", http_options=options)

    def call(self, usage: dict, cut: bool = False) -> None:
        self.server.json(_gemini("hi", usage), cut)
        self.client.models.generate_content(model="gemini-2.5-flash", contents="hi")

    def stream(self, usage: dict, cut: bool = False) -> Any:
        self.server.sse([_gemini(w, usage) for w in ("one ", "two ", "three ", "four")], cut)
        return self.client.models.generate_content_stream(model="gemini-2.5-flash", contents="hi")

    ok_usage, bad_usage = GEMINI_USAGE, {**GEMINI_USAGE, "promptTokenCount": BAD}


# -- bedrock ------------------------------------------------------------------------------------
BEDROCK_MODEL = "us.anthropic.claude-3-5-haiku-20241022-v1:0"


def _frame(event_type: str, payload: dict) -> bytes:
    from .bedrock_server import frame

    return frame(event_type, payload)


class BedrockInvokeDriver:
    """``invoke_model`` (a body the caller reads) and ``invoke_model_with_response_stream``."""

    patches = "bedrock_patches"
    streams = True

    def __init__(self, server: Server) -> None:
        import boto3
        from botocore.config import Config

        self.server = server
        self.client = boto3.client("bedrock-runtime", region_name="us-east-1", endpoint_url=server.url,
                                   aws_access_key_id="test", aws_secret_access_key="test",
                                   config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))  # fmt: skip

    def call(self, usage: dict, cut: bool = False) -> None:
        self.server.json(_message(usage), cut)
        body = json.dumps({"anthropic_version": "bedrock-2023-05-31", "max_tokens": 64,
                           "messages": [{"role": "user", "content": "hi"}]})  # fmt: skip
        result = self.client.invoke_model(modelId=BEDROCK_MODEL, body=body)
        result["body"].read()  # the caller reads the body (cut: botocore raises here)

    def stream(self, usage: dict, cut: bool = False) -> Any:
        frames = [_frame("chunk", {"bytes": base64.b64encode(json.dumps(e).encode()).decode()})
                  for e in _message_events(usage)]  # fmt: skip
        self.server.raw("application/vnd.amazon.eventstream", b"".join(frames), cut)
        result = self.client.invoke_model_with_response_stream(modelId=BEDROCK_MODEL, body=json.dumps(
            {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 64, "messages": []}))  # fmt: skip
        return result["body"]

    ok_usage, bad_usage = MESSAGE_USAGE, {**MESSAGE_USAGE, "input_tokens": BAD}


CONVERSE_USAGE = {"inputTokens": 30, "outputTokens": 6, "totalTokens": 36}


class BedrockConverseDriver(BedrockInvokeDriver):
    """``converse`` and ``converse_stream``."""

    def call(self, usage: dict, cut: bool = False) -> None:
        self.server.json({"output": {"message": {"role": "assistant", "content": [{"text": "hi"}]}},
                          "stopReason": "end_turn", "usage": usage, "metrics": {"latencyMs": 1}}, cut)  # fmt: skip
        self.client.converse(
            modelId=BEDROCK_MODEL, messages=[{"role": "user", "content": [{"text": "hi"}]}]
        )

    def stream(self, usage: dict, cut: bool = False) -> Any:
        frames = [_frame("messageStart", {"role": "assistant"}),
                  *[_frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": w}})
                    for w in ("one ", "two ", "three ", "four")],
                  _frame("messageStop", {"stopReason": "end_turn"}),
                  _frame("metadata", {"usage": usage, "metrics": {"latencyMs": 1}})]  # fmt: skip
        self.server.raw("application/vnd.amazon.eventstream", b"".join(frames), cut)
        result = self.client.converse_stream(modelId=BEDROCK_MODEL,
                                             messages=[{"role": "user", "content": [{"text": "hi"}]}])  # fmt: skip
        return result["stream"]

    ok_usage, bad_usage = CONVERSE_USAGE, {**CONVERSE_USAGE, "inputTokens": BAD}


# -- litellm ------------------------------------------------------------------------------------
class LiteLLMDriver(OpenAIDriver):
    patches = "litellm_patches"

    def __init__(self, server: Server) -> None:
        import litellm

        self.server, self.litellm = server, litellm

    def call(self, usage: dict, cut: bool = False) -> None:
        self.server.json(_chat(usage), cut)
        self.litellm.completion(model="openai/gpt-4o-mini", api_base=self.server.url, api_key="test",
                                messages=[{"role": "user", "content": "hi"}], max_retries=0)  # fmt: skip

    def stream(self, usage: dict, cut: bool = False) -> Any:
        self.server.sse(_chat_chunks(usage), cut)
        return self.litellm.completion(model="openai/gpt-4o-mini", api_base=self.server.url, api_key="test",
                                       messages=[{"role": "user", "content": "hi"}], stream=True,
                                       stream_options={"include_usage": True}, max_retries=0)  # fmt: skip


# -- agent CLIs: a real subprocess, and instrument_backend ---------------------------------------
def _claude_result(usage: dict) -> str:
    return json.dumps({"type": "result", "subtype": "success", "is_error": False, "num_turns": 1,
                       "result": "done", "session_id": "s-1", "usage": usage})  # fmt: skip


CLAUDE_USAGE = {"input_tokens": 40, "output_tokens": 8}


class CliDriver:
    """``claude -p ... --output-format json`` run through ``subprocess.run``. Its output is
    text parsed field by field: a value that is not a token count is that field's parse error
    (the others are kept), not the whole usage rejected."""

    patches = "agent_cli_patches"
    streams = False
    parsed = True
    ok_usage, bad_usage = CLAUDE_USAGE, {**CLAUDE_USAGE, "output_tokens": BAD}

    def __init__(self, server: Server, folder: Any) -> None:
        self.folder = folder

    def call(self, usage: dict, cut: bool = False) -> None:
        output = _claude_result(usage)
        output = output[: len(output) // 2] if cut else output
        (self.folder / "out.json").write_text(output)
        script = self.folder / "claude"
        script.write_text(f"#!/bin/sh\ncat '{self.folder / 'out.json'}'\nexit 0\n")
        script.chmod(0o755)
        subprocess.run([str(script), "-p", "hi", "--output-format", "json"], capture_output=True)


class Agent:
    """A framework's backend: returns the CLI's output in a result object."""

    output = ""

    def invoke(self, prompt: str) -> Any:
        return {"stdout": self.output, "exit_code": 0}


class BackendDriver(CliDriver):
    """``instrument_backend`` on :meth:`Agent.invoke`, parsed as Claude Code's output."""

    patches = None

    def call(self, usage: dict, cut: bool = False) -> None:
        output = _claude_result(usage)
        Agent.output = output[: len(output) // 2] if cut else output
        Agent().invoke("hi")


DRIVERS: dict[str, type] = {
    "openai": OpenAIDriver, "anthropic": AnthropicDriver, "google_genai": GeminiDriver,
    "bedrock_invoke": BedrockInvokeDriver, "bedrock_converse": BedrockConverseDriver,
    "litellm": LiteLLMDriver, "agent_cli": CliDriver, "instrument_backend": BackendDriver,
}  # fmt: skip
LIBRARIES = {"openai": "openai", "anthropic": "anthropic", "google_genai": "google.genai",
             "bedrock_invoke": "boto3", "bedrock_converse": "boto3", "litellm": "litellm"}  # fmt: skip

CASES = [(name, scenario) for name, driver in DRIVERS.items()
         for scenario in (OK, INVALID, CUT, *((DROPPED, RAISES) if driver.streams else ()))]  # fmt: skip


@pytest.fixture
def driven(request, tmp_path):
    """(driver, telemetry) for the backend named by the test's parameter."""
    name = request.param
    if name in LIBRARIES:
        pytest.importorskip(LIBRARIES[name], reason=f"{LIBRARIES[name]} is an optional extra")
    from importlib import import_module

    from otel_tokens.capture import BACKENDS

    driver_class = DRIVERS[name]
    patches = (
        [import_module(BACKENDS[driver_class.patches.removesuffix("_patches")])]
        if driver_class.patches
        else []
    )
    if name == "litellm":  # as under instrument(): litellm's own SDK use must not count twice
        patches.insert(0, import_module("otel_tokens.capture.sdk.openai_patches"))
    server = Server()
    with handling(*patches) as telemetry:
        if name == "instrument_backend":
            from otel_tokens.capture.methods.backend import instrument_backend, uninstrument_backend

            assert instrument_backend("tests.sdk.test_every_ending:Agent.invoke", parser="claude")
        try:
            yield (driver_class(server, tmp_path) if driver_class.patches in ("agent_cli_patches", None)
                   else driver_class(server)), telemetry  # fmt: skip
        finally:
            if name == "instrument_backend":
                uninstrument_backend()
            server.close()


def _act(driver: Any, scenario: str) -> None:
    usage = driver.bad_usage if scenario == INVALID else driver.ok_usage
    if not driver.streams:
        driver.call(usage, cut=scenario == CUT)
        return
    actions: dict[str, Callable[[], Any]] = {
        OK: lambda: list(driver.stream(usage)),
        INVALID: lambda: list(driver.stream(usage)),
        CUT: lambda: list(driver.stream(usage, cut=True)),
        DROPPED: lambda: _drop(driver.stream(usage)),
        RAISES: lambda: _raise_midway(driver.stream(usage)),
    }
    actions[scenario]()


def _ledger_rows() -> int:
    return sum(len(entry.ledger) for entry in agents())


@pytest.mark.parametrize(("driven", "scenario"), CASES, indirect=["driven"],
                         ids=[f"{n}-{s.replace(' ', '_')}" for n, s in CASES])  # fmt: skip
def test_every_call_ends_once_with_a_span_a_request_and_a_ledger_row(driven, scenario):
    driver, telemetry = driven
    parsed = getattr(driver, "parsed", False)
    if scenario == DROPPED and getattr(driver, "sent_at_first_read", False):
        _run(lambda: _act(driver, scenario))
        assert telemetry.finished() == [] and _ledger_rows() == 0  # nothing was sent
        return
    if scenario in (OK, INVALID, CUT):  # the non-streamed form too, where the backend has one
        _run(
            driver.call,
            driver.bad_usage if scenario == INVALID else driver.ok_usage,
            scenario == CUT,
        )
        _check(telemetry, scenario, streamed=False, parsed=parsed)
        if not driver.streams:
            return
        telemetry.spans.clear()
        telemetry.reader.get_metrics_data()  # cumulative: compared by difference below
        before = _ledger_rows()
        _run(lambda: _act(driver, scenario))
        _check(telemetry, scenario, streamed=True, calls=2, rows=before + 1)
        return
    _run(lambda: _act(driver, scenario))
    _check(telemetry, scenario, streamed=driver.streams)


def _run(action: Callable[..., Any], *args: Any) -> None:
    """Run the caller's code; a cut body may raise into the caller (the library's own error)."""
    try:
        action(*args)
    except RuntimeError:
        raise
    except Exception:  # noqa: BLE001 - the client library's error for a cut body
        pass
    gc.collect()


def _check(telemetry: Any, scenario: str, streamed: bool, calls: int = 1, rows: int = 1,
           parsed: bool = False) -> None:  # fmt: skip
    (span,) = telemetry.finished()
    counted = sum(p.count for p in telemetry.points("gen_ai.client.operation.duration"))
    assert counted == calls, "one request counted per call"
    assert _ledger_rows() == rows, "one ledger row per call"
    attrs = span.attributes
    errors = telemetry.errors()
    if scenario == INVALID and parsed:
        assert BAD not in attrs.values() and errors.get("parse"), errors
    elif scenario == INVALID:
        assert "gen_ai.usage.input_tokens" not in attrs
        assert errors.get("usage_invalid"), errors
        assert not telemetry.points("otel_tokens.usage.missing"), (
            "unusable usage is not missing usage"
        )
    elif scenario == OK:
        assert attrs.get("gen_ai.usage.input_tokens") is not None, attrs
        assert span.status.status_code is not StatusCode.ERROR
    if streamed and scenario == DROPPED:
        assert attrs["otel_tokens.stream.end"] == "abandoned"


def test_async_litellm_and_openai_streams_dropped_unread_end_once():
    pytest.importorskip("litellm", reason="litellm is an optional extra")
    import litellm
    import openai

    from otel_tokens.capture.sdk import litellm_patches
    from otel_tokens.capture.sdk import openai_patches

    server = Server()
    try:
        with handling(openai_patches, litellm_patches) as telemetry:

            async def main() -> None:
                server.sse(_chat_chunks(CHAT_USAGE))
                stream = await litellm.acompletion(
                    model="openai/gpt-4o-mini", api_base=server.url, api_key="test", stream=True,
                    messages=[{"role": "user", "content": "hi"}], stream_options={"include_usage": True})  # fmt: skip
                del stream
                server.sse(_chat_chunks(CHAT_USAGE))
                client = openai.AsyncOpenAI(
                    api_key="test", base_url=server.url + "/v1", max_retries=0
                )
                stream = await client.chat.completions.create(
                    model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True
                )
                del stream
                gc.collect()

            asyncio.run(main())
            gc.collect()
            spans = telemetry.finished()
            assert [s.attributes["otel_tokens.stream.end"] for s in spans] == [
                "abandoned",
                "abandoned",
            ]
            assert _ledger_rows() == 2
    finally:
        server.close()
