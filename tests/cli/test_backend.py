"""instrument_backend and OTEL_TOKENS_BACKENDS on a small framework-like backend."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

import otel_tokens
from opentelemetry.trace import StatusCode

from otel_tokens.capture.methods.backend import instrument_backend, uninstrument_backend
from otel_tokens.entry_points import AgentBackendsInstrumentor as BackendInstrumentor
from otel_tokens.capture.agent_cli.parsers import AgentRun
from otel_tokens.usage import Usage

TARGET = "tests.cli.test_backend:CopilotBackend.invoke"


@dataclass
class AgentResult:
    stdout: str
    exit_code: int = 0
    token_usage: Any = 0
    premium_requests: float | None = None


class CopilotBackend:
    """What a framework's backend looks like: it returns the CLI's output in a result."""

    output = ""

    def invoke(self, prompt: str) -> AgentResult:
        return AgentResult(stdout=self.output)

    async def ainvoke(self, prompt: str) -> AgentResult:
        await asyncio.sleep(0)
        return AgentResult(stdout=self.output)

    def as_dict(self, prompt: str) -> dict:
        return {"stdout": self.output, "exit_code": 0}

    def as_text(self, prompt: str) -> bytes:
        return self.output.encode()

    def boom(self, prompt: str) -> None:
        raise RuntimeError("backend down")


@pytest.fixture
def backend(shared):
    CopilotBackend.output = (shared / "copilot/success.jsonl").read_text()
    yield CopilotBackend()
    uninstrument_backend()


def test_same_numbers_as_the_cli(telemetry, backend):
    instrument_backend(TARGET, parser="copilot")
    result = backend.invoke("SECRET")
    assert result.token_usage == 0  # not enriched unless asked
    span = telemetry.span()
    assert span.name == "invoke_agent copilot"
    assert span.attributes["gen_ai.usage.output_tokens"] == 293
    assert span.attributes["otel_tokens.premium_requests"] == 1.0
    assert span.attributes["otel_tokens.cli.tool_calls"] == 2
    assert span.attributes["otel_tokens.backend.target"] == TARGET
    assert telemetry.point("otel_tokens.tokens", gen_ai__token__type="output").value == 293
    assert telemetry.point("otel_tokens.premium_requests").value == 1.0


def test_enrich_result(telemetry, backend):
    instrument_backend(TARGET, parser="copilot", enrich_result=True)
    result = backend.invoke("x")
    assert isinstance(result.token_usage, Usage) and result.token_usage.output_tokens == 293
    assert result.token_usage.input_tokens is None
    assert result.premium_requests == 1.0
    assert result.stdout == CopilotBackend.output  # the output itself is left alone


def test_async_method(telemetry, backend):
    instrument_backend("tests.cli.test_backend:CopilotBackend.ainvoke", parser="copilot")
    result = asyncio.run(backend.ainvoke("x"))
    assert result.stdout == CopilotBackend.output
    assert telemetry.span().attributes["gen_ai.usage.output_tokens"] == 293


@pytest.mark.parametrize("method", ["as_dict", "as_text"])
def test_dict_and_text_results(telemetry, backend, method):
    instrument_backend(f"tests.cli.test_backend:CopilotBackend.{method}")
    getattr(backend, method)("x")
    assert telemetry.span().attributes["gen_ai.usage.output_tokens"] == 293


def test_user_callable_parser(telemetry, backend):
    def my_parser(result: AgentResult) -> Usage:
        return Usage(input_tokens=len(result.stdout), output_tokens=7, model="gpt-5")

    instrument_backend(TARGET, parser=my_parser, name="mine")
    backend.invoke("x")
    span = telemetry.span()
    assert span.name == "invoke_agent mine"
    assert span.attributes["gen_ai.usage.input_tokens"] == len(CopilotBackend.output)
    assert span.attributes["gen_ai.response.model"] == "gpt-5"


def test_broken_user_parser_is_counted(telemetry, backend):
    instrument_backend(TARGET, parser=lambda result: 1 / 0)
    assert backend.invoke("x").stdout == CopilotBackend.output
    assert telemetry.errors()["parse"] == 1


def test_exception_passes_through(telemetry, backend):
    instrument_backend("tests.cli.test_backend:CopilotBackend.boom")
    with pytest.raises(RuntimeError, match="backend down"):
        backend.boom("x")
    span = telemetry.span()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "RuntimeError"


def test_uninstrument_restores_the_original(telemetry, backend):
    original = CopilotBackend.__dict__["invoke"]
    instrument_backend(TARGET)
    assert CopilotBackend.__dict__["invoke"] is not original
    uninstrument_backend(TARGET)
    assert CopilotBackend.__dict__["invoke"] is original
    backend.invoke("x")
    assert telemetry.finished() == []


def test_bad_targets_are_one_warning_each_and_wrap_nothing(telemetry, caplog):
    """Wrong arguments never raise into the host (the OpenTelemetry API's rule)."""
    original = CopilotBackend.__dict__["invoke"]
    cases = [("no_colon", "copilot", "pkg.module:Class.method"),
             ("no_such_module_xyz:Thing.invoke", "copilot", "no_such_module_xyz"),
             (TARGET, "cursor", "unknown agent-CLI parser"), (42, "copilot", "must be a string"),
             (TARGET, 3.5, "parser must be")]  # fmt: skip
    for target, parser, words in cases:
        assert instrument_backend(target, parser=parser) is False  # type: ignore[arg-type]
        assert any(words in r.getMessage() for r in caplog.records), words
    assert CopilotBackend.__dict__["invoke"] is original
    assert telemetry.errors() == {"argument": len(cases)}


def test_env_variable(telemetry, backend, monkeypatch):
    monkeypatch.setenv("OTEL_TOKENS_BACKENDS", f"{TARGET}=copilot; tests.cli.test_backend:CopilotBackend.as_dict")
    otel_tokens.settings.reload()
    instrumentor = BackendInstrumentor()
    instrumentor.instrument()
    try:
        backend.invoke("x")
        backend.as_dict("x")
    finally:
        instrumentor.uninstrument()
    assert [s.attributes["gen_ai.usage.output_tokens"] for s in telemetry.finished()] == [293, 293]
    backend.invoke("x")
    assert len(telemetry.finished()) == 2  # restored


def test_env_variable_bad_target_is_one_warning_and_the_rest_still_wrapped(telemetry, backend,
                                                                          monkeypatch, caplog):
    monkeypatch.setenv("OTEL_TOKENS_BACKENDS", f"no_such_module_xyz:A.b=claude; {TARGET}=copilot")
    otel_tokens.settings.reload()
    BackendInstrumentor().instrument()  # never raises into the host
    try:
        backend.invoke("x")
    finally:
        BackendInstrumentor().uninstrument()
    assert len(telemetry.finished()) == 1
    assert telemetry.errors() == {"config": 1}
    assert [r for r in caplog.records if "no_such_module_xyz" in r.getMessage()]


def test_agent_run_result_from_callable(telemetry, backend):
    run = AgentRun(cli="x", usage=(Usage(output_tokens=3, model="a"), Usage(output_tokens=4, model="b")),
                   cost_usd=0.5)  # fmt: skip
    instrument_backend(TARGET, parser=lambda result: run, name="multi")
    backend.invoke("x")
    span = telemetry.span()
    assert span.attributes["gen_ai.usage.output_tokens"] == 7
    assert span.attributes["otel_tokens.cost.usd"] == 0.5
    assert span.attributes["otel_tokens.cli.models"] == ("a", "b")
