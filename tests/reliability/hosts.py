"""Host programs for the reliability suite: each instrumentor's calls as an application makes
them, and what the application observes (value, exception type and message, stream content).

* ``openai`` / ``anthropic``: the real SDK clients on a mock transport answering with recorded
  bodies from the shared cassettes (a plain call, a stream, a 400 error);
* ``cli``: a fake ``copilot`` executable on PATH printing the shared sample, run through
  ``subprocess.run``, a ``Popen`` read line by line, and a failing run under ``check=True``;
* ``backend``: a framework-like backend wrapped with ``instrument_backend`` (sync, async, and
  a backend that raises).

``observe(name, scenario)`` runs one scenario and returns a comparable outcome.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .. import cassettes
from ..sdk.replay import http_module

ROOT = Path(__file__).resolve().parents[2]
CLI_SAMPLE = ROOT.parent / "shared" / "fixtures" / "cli" / "copilot" / "success.jsonl"

OPENAI_PLAIN = "openai-v2/test_chat_completion_with_content.yaml"
OPENAI_STREAM = "openai-openllmetry/test_chat__test_chat_streaming_with_events_with_content.yaml"
ANTHROPIC_PLAIN = "anthropic/test_messages__test_anthropic_message_create_legacy.yaml"
ANTHROPIC_STREAM = "anthropic/test_messages__test_anthropic_message_streaming_legacy.yaml"

OPENAI_ERROR = {"error": {"message": "The model `nope` does not exist", "type": "invalid_request_error",
                          "param": None, "code": "model_not_found"}}  # fmt: skip
ANTHROPIC_ERROR = {"type": "error", "error": {"type": "invalid_request_error",
                                              "message": "max_tokens: 10000000 > 8192"}}  # fmt: skip

SCENARIOS = ("plain", "stream", "error")
INSTRUMENTORS = ("openai", "anthropic", "cli", "backend")


def _body(name: str) -> str:
    return cassettes.load(cassettes.CASSETTES / name)[0].response_text


class Transport:
    """Answers by what the request asks: an error for model ``nope``, a stream for
    ``stream: true``, else the plain body. Counts requests."""

    def __init__(self, sdk: str, plain: str, stream: str, error: dict[str, Any]) -> None:
        self.http = http_module(sdk)
        self.plain, self.stream, self.error = plain.encode(), stream.encode(), json.dumps(error).encode()
        self.requests = 0

    def handler(self, request: Any) -> Any:
        self.requests += 1
        body = json.loads(request.content or b"{}")
        if body.get("model") == "nope":
            return self.http.Response(400, headers={"content-type": "application/json"}, content=self.error)
        if body.get("stream"):
            return self.http.Response(200, headers={"content-type": "text/event-stream"}, content=self.stream)
        return self.http.Response(200, headers={"content-type": "application/json"}, content=self.plain)

    def client(self, is_async: bool = False) -> Any:
        cls = self.http.AsyncClient if is_async else self.http.Client
        return cls(transport=self.http.MockTransport(self.handler))


def openai_client(is_async: bool = False) -> tuple[Any, Transport]:
    import openai

    transport = Transport("openai", _body(OPENAI_PLAIN), _body(OPENAI_STREAM), OPENAI_ERROR)
    cls = openai.AsyncOpenAI if is_async else openai.OpenAI
    return cls(api_key="test", http_client=transport.client(is_async), max_retries=0), transport


def anthropic_client(is_async: bool = False) -> tuple[Any, Transport]:
    import anthropic

    transport = Transport("anthropic", _body(ANTHROPIC_PLAIN), _body(ANTHROPIC_STREAM), ANTHROPIC_ERROR)
    cls = anthropic.AsyncAnthropic if is_async else anthropic.Anthropic
    return cls(api_key="test", http_client=transport.client(is_async), max_retries=0), transport


# -- outcomes ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Outcome:
    kind: str  # "value" | "raised"
    detail: Any

    def __repr__(self) -> str:
        text = repr(self.detail)
        return f"Outcome({self.kind}, {text[:300]}{'...' if len(text) > 300 else ''})"


def _raised(exc: BaseException) -> Outcome:
    return Outcome("raised", (type(exc), str(exc)))


def _dump(obj: Any) -> Any:
    return obj.model_dump() if hasattr(obj, "model_dump") else obj


# -- OpenAI -----------------------------------------------------------------------------------
MESSAGES = [{"role": "user", "content": "Tell me a joke about OpenTelemetry"}]


def openai_call(client: Any, scenario: str) -> Outcome:
    try:
        if scenario == "plain":
            return Outcome("value", _dump(client.chat.completions.create(model="gpt-4o", messages=MESSAGES)))
        if scenario == "stream":
            stream = client.chat.completions.create(model="gpt-4o", messages=MESSAGES, stream=True)
            return Outcome("value", [_dump(chunk) for chunk in stream])
        client.chat.completions.create(model="nope", messages=MESSAGES)
        return Outcome("value", None)
    except Exception as exc:
        return _raised(exc)


def anthropic_call(client: Any, scenario: str) -> Outcome:
    try:
        if scenario == "plain":
            return Outcome("value", _dump(client.messages.create(model="claude-3-5-sonnet-20241022",
                                                                 max_tokens=100, messages=MESSAGES)))  # fmt: skip
        if scenario == "stream":
            stream = client.messages.create(model="claude-3-5-sonnet-20241022", max_tokens=100,
                                            messages=MESSAGES, stream=True)  # fmt: skip
            return Outcome("value", [_dump(event) for event in stream])
        client.messages.create(model="nope", max_tokens=100, messages=MESSAGES)
        return Outcome("value", None)
    except Exception as exc:
        return _raised(exc)


# -- agent CLI --------------------------------------------------------------------------------
def write_fake_copilot(folder: Path, sample: Path = CLI_SAMPLE) -> Path:
    """A ``copilot`` on PATH that prints ``sample``; ``--fail`` makes it fail (exit 3)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "copilot"
    path.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--fail" ]; then echo "copilot: quota exhausted" >&2; exit 3; fi\n'
        f'cat "{sample}"\n'
    )
    path.chmod(0o755)
    return path


def cli_call(scenario: str) -> Outcome:
    try:
        if scenario == "plain":
            done = subprocess.run(["copilot", "-p", "do it"], capture_output=True)
            return Outcome("value", (done.args, done.returncode, done.stdout, done.stderr))
        if scenario == "stream":
            with subprocess.Popen(["copilot", "-p", "do it"], stdout=subprocess.PIPE) as proc:
                lines = [line for line in proc.stdout]  # type: ignore[union-attr]
            return Outcome("value", (lines, proc.returncode))
        subprocess.run(["copilot", "--fail", "-p", "x"], capture_output=True, check=True)
        return Outcome("value", None)
    except Exception as exc:
        return _raised(exc)


# -- instrument_backend -----------------------------------------------------------------------
BACKEND_TARGETS = (
    "tests.reliability.hosts:CopilotBackend.invoke",
    "tests.reliability.hosts:CopilotBackend.ainvoke",
    "tests.reliability.hosts:CopilotBackend.boom",
)


@dataclass
class AgentResult:
    stdout: str
    exit_code: int = 0


class CopilotBackend:
    """A framework's backend: it returns the CLI's output in a result object."""

    output = ""

    def invoke(self, prompt: str) -> AgentResult:
        return AgentResult(stdout=self.output)

    async def ainvoke(self, prompt: str) -> AgentResult:
        await asyncio.sleep(0)
        return AgentResult(stdout=self.output)

    def boom(self, prompt: str) -> AgentResult:
        raise ConnectionError(f"backend down while answering {len(prompt)} chars")


def backend_call(scenario: str) -> Outcome:
    CopilotBackend.output = CLI_SAMPLE.read_text()
    backend = CopilotBackend()
    try:
        if scenario == "plain":
            return Outcome("value", backend.invoke("do it"))
        if scenario == "stream":  # the async path
            return Outcome("value", asyncio.run(backend.ainvoke("do it")))
        return Outcome("value", backend.boom("do it"))
    except Exception as exc:
        return _raised(exc)


# -- switching instrumentation on and off -----------------------------------------------------
def install(name: str) -> None:
    if name == "openai":
        from otel_tokens.capture.sdk import openai as openai_sdk

        openai_sdk.install()
    elif name == "anthropic":
        from otel_tokens.capture.sdk import anthropic as anthropic_sdk

        anthropic_sdk.install()
    elif name == "cli":
        from otel_tokens.capture.agent_cli import commands as sp

        sp.install()
    else:
        from otel_tokens.capture.methods.backend import instrument_backend

        for target in BACKEND_TARGETS:
            instrument_backend(target, parser="copilot")


def uninstall(name: str) -> None:
    if name == "openai":
        from otel_tokens.capture.sdk import openai as openai_sdk

        openai_sdk.uninstall()
    elif name == "anthropic":
        from otel_tokens.capture.sdk import anthropic as anthropic_sdk

        anthropic_sdk.uninstall()
    elif name == "cli":
        from otel_tokens.capture.agent_cli import commands as sp

        sp.uninstall()
    else:
        from otel_tokens.capture.methods.backend import uninstrument_backend

        for target in BACKEND_TARGETS:
            uninstrument_backend(target)


def caller(name: str) -> Callable[[str], Outcome]:
    """``scenario -> Outcome`` for one instrumentor (clients made once, reused)."""
    if name == "openai":
        client, _ = openai_client()
        return lambda scenario: openai_call(client, scenario)
    if name == "anthropic":
        client, _ = anthropic_client()
        return lambda scenario: anthropic_call(client, scenario)
    if name == "cli":
        return cli_call
    return backend_call
