"""End-to-end: fake agent CLIs on PATH, run through subprocess.run, Popen and asyncio."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

import otel_tokens
from opentelemetry.trace import StatusCode

from otel_tokens.capture.agent_cli.runs import last_agent_run
from otel_tokens.entry_points import AgentCliInstrumentor as SubprocessInstrumentor
from otel_tokens.capture.agent_cli.commands import agent_run
from otel_tokens.capture.agent_cli.parsers.copilot import silent_output

from ..telemetry.conftest import handling
from .conftest import OWN, instrumenting

# cli -> (sample under the shared folder, span attributes the sample must give)
EXPECTED = {
    "copilot": ("copilot/success.jsonl", {
        "gen_ai.usage.output_tokens": 293, "otel_tokens.premium_requests": 1.0,
        "otel_tokens.cli.tool_calls": 2, "otel_tokens.cli.api_duration_ms": 9421.0,
        "gen_ai.response.model": "claude-sonnet-4.5"}),
    "claude": ("claude/success_stream.jsonl", {
        "gen_ai.usage.output_tokens": 343, "gen_ai.usage.cache_read.input_tokens": 45454,
        "gen_ai.usage.cache_write.input_tokens": 5045, "otel_tokens.cli.tool_calls": 2,
        "otel_tokens.cli.turns": 3, "otel_tokens.cost.source": "provider"}),
    "codex": ("codex/success.jsonl", {
        "gen_ai.usage.input_tokens": 48213, "gen_ai.usage.cache_read.input_tokens": 35840,
        "gen_ai.usage.output_tokens": 1187, "gen_ai.usage.reasoning.output_tokens": 768}),
    "gemini": ("gemini/success_stream.jsonl", {
        "gen_ai.usage.input_tokens": 26537, "gen_ai.usage.cache_read.input_tokens": 16204,
        "gen_ai.usage.output_tokens": 832, "gen_ai.usage.reasoning.output_tokens": 655,
        "otel_tokens.cli.tool_calls": 2}),
}  # fmt: skip
TOKEN_TOTALS = {
    "copilot": {"output": 293},
    "claude": {"input": 50916, "output": 343, "cache_read": 45454, "cache_write": 5045},
    "codex": {"input": 48213, "output": 1187, "cache_read": 35840, "reasoning": 768},
    "gemini": {"input": 26537, "output": 832, "cache_read": 16204, "reasoning": 655},
}


def write_cli(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


@pytest.fixture
def fake_clis(bin_dir, shared) -> Path:
    for cli, (sample, _attrs) in EXPECTED.items():
        write_cli(bin_dir, cli, f'cat "{shared / sample}"\nexit 0\n')
    return bin_dir


def token_totals(t) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in t.points("otel_tokens.tokens"):
        kind = p.attributes["gen_ai.token.type"]
        out[kind] = out.get(kind, 0) + p.value
    return out


def check_span(t, cli: str) -> None:
    span = t.span()
    assert span.name == f"invoke_agent {cli}"
    assert span.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert span.attributes["otel_tokens.cli.name"] == cli
    assert span.attributes["otel_tokens.cli.exit_code"] == 0
    assert span.status.status_code is not StatusCode.ERROR
    for key, value in EXPECTED[cli][1].items():
        assert span.attributes[key] == pytest.approx(value), key
    assert token_totals(t) == TOKEN_TOTALS[cli]
    assert "SECRET" not in repr(dict(span.attributes))  # prompt text is never recorded
    assert span.attributes["otel_tokens.cli.flags"] == ("-p",)
    assert t.errors() == {}


@pytest.mark.parametrize("cli", sorted(EXPECTED))
def test_subprocess_run(instrumented, fake_clis, shared, cli):
    result = subprocess.run([cli, "-p", "SECRET prompt"], capture_output=True)
    assert result.stdout == (shared / EXPECTED[cli][0]).read_bytes()  # untouched
    check_span(instrumented, cli)
    assert last_agent_run().cli == cli


@pytest.mark.parametrize("cli", sorted(EXPECTED))
def test_popen_communicate(instrumented, fake_clis, shared, cli):
    proc = subprocess.Popen([cli, "-p", "SECRET prompt"], stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate()
    assert out == (shared / EXPECTED[cli][0]).read_text()
    check_span(instrumented, cli)
    assert agent_run(proc).raw == out


@pytest.mark.parametrize("cli", sorted(EXPECTED))
def test_popen_caller_reads_the_pipe(instrumented, fake_clis, shared, cli):
    with subprocess.Popen([cli, "-p", "SECRET"], stdout=subprocess.PIPE) as proc:
        got = b"".join(line for line in proc.stdout)
    assert got == (shared / EXPECTED[cli][0]).read_bytes()  # every byte, unchanged
    check_span(instrumented, cli)


@pytest.mark.parametrize("cli", sorted(EXPECTED))
def test_asyncio_subprocess(instrumented, fake_clis, shared, cli):
    async def main() -> tuple[bytes, object]:
        proc = await asyncio.create_subprocess_exec(
            cli, "-p", "SECRET", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, _ = await proc.communicate()
        return out, agent_run(proc)

    out, run = asyncio.run(main())
    assert out == (shared / EXPECTED[cli][0]).read_bytes()
    assert run is not None and run.cli == cli
    check_span(instrumented, cli)


def test_asyncio_run_known_before_the_exit_callback(instrumented, fake_clis, shared, monkeypatch):
    """asyncio may let ``communicate()`` return (exit status known) in the loop turn of the
    exit, before the protocol's ``process_exited`` callback: forced here by delaying that
    callback. ``agent_run`` still gives the run, and the late callback ends nothing twice."""
    from asyncio.base_subprocess import BaseSubprocessTransport

    original = BaseSubprocessTransport._call

    def delayed(self, callback, *data):  # type: ignore[no-untyped-def]
        if getattr(callback, "__name__", "") == "process_exited":
            self._loop.call_later(0.2, callback, *data)
        else:
            original(self, callback, *data)

    monkeypatch.setattr(BaseSubprocessTransport, "_call", delayed)

    async def main() -> tuple[object, object]:
        proc = await asyncio.create_subprocess_exec(
            "codex", "-p", "SECRET", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        await proc.communicate()
        early = agent_run(proc)
        await asyncio.sleep(0.4)  # the delayed callback runs
        return early, agent_run(proc)

    early, late = asyncio.run(main())
    assert early is not None and early.cli == "codex" and late is early
    check_span(instrumented, "codex")  # exactly one span, with the sample's numbers


def test_asyncio_caller_reads_the_stream(instrumented, fake_clis, shared):
    async def main() -> bytes:
        proc = await asyncio.create_subprocess_exec("codex", "-p", "x", stdout=asyncio.subprocess.PIPE)
        data = b"".join([line async for line in proc.stdout])
        await proc.wait()
        return data

    assert asyncio.run(main()) == (shared / "codex/success.jsonl").read_bytes()
    assert instrumented.span().attributes["gen_ai.usage.input_tokens"] == 48213


# -- Copilot opt-ins (seed 002) ---------------------------------------------------------------
@pytest.fixture
def copilot_modes(bin_dir, shared) -> Path:
    """A copilot that prints JSONL with --output-format json and plain text otherwise, and
    writes the usage file when asked."""
    write_cli(bin_dir, "copilot", f'''
json=0; usage=""
while [ $# -gt 0 ]; do
  case "$1" in
    --output-format) [ "$2" = json ] && json=1; shift ;;
    --usage-output-file) usage="$2"; shift ;;
  esac
  shift
done
[ -n "$usage" ] && cp "{shared / 'copilot/usage_output_file.json'}" "$usage"
if [ $json = 1 ]; then cat "{shared / 'copilot/success.jsonl'}"; else echo "PLAIN ANSWER"; fi
''')
    return bin_dir


def test_silent_rewrite_returns_what_silent_prints(instrumented, copilot_modes, shared, monkeypatch):
    monkeypatch.setenv("OTEL_TOKENS_COPILOT_JSON", "true")
    otel_tokens.settings.reload()
    result = subprocess.run(["copilot", "-p", "fix it", "-s"], capture_output=True, text=True)
    sample = (shared / "copilot/success.jsonl").read_text()
    assert result.stdout == silent_output(sample)  # every message, each and a blank line
    assert result.stdout.endswith("`test_add` should now pass.\n\n")
    assert last_agent_run().raw == sample
    span = instrumented.span()
    assert span.attributes["otel_tokens.cli.output_rewritten"] is True
    assert span.attributes["gen_ai.usage.output_tokens"] == 293
    assert span.attributes["otel_tokens.premium_requests"] == 1.0
    assert subprocess.check_output(["copilot", "-p", "x", "-s"]).startswith(b"I'll run the tests")


def test_silent_not_rewritten_without_opt_in(instrumented, copilot_modes):
    result = subprocess.run(["copilot", "-p", "fix it", "-s"], capture_output=True, text=True)
    assert result.stdout == "PLAIN ANSWER\n"
    assert "otel_tokens.cli.output_rewritten" not in instrumented.span().attributes


def test_silent_not_rewritten_when_caller_reads_pipes(instrumented, copilot_modes, monkeypatch):
    monkeypatch.setenv("OTEL_TOKENS_COPILOT_JSON", "true")
    otel_tokens.settings.reload()
    proc = subprocess.Popen(["copilot", "-p", "x", "-s"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.read() == "PLAIN ANSWER\n"
    proc.wait()
    assert instrumented.span().attributes["otel_tokens.cli.flags"] == ("-p", "-s")


def test_usage_file_opt_in(instrumented, copilot_modes, monkeypatch, tmp_path):
    monkeypatch.setenv("OTEL_TOKENS_COPILOT_USAGE_FILE", "true")
    otel_tokens.settings.reload()
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    subprocess.run(["copilot", "-p", "x", "--output-format", "json"], capture_output=True)
    span = instrumented.span()
    assert span.attributes["gen_ai.usage.input_tokens"] == 56606
    assert span.attributes["gen_ai.usage.cache_read.input_tokens"] == 36992
    assert span.attributes["otel_tokens.cli.usage_file"] is True
    assert not list(tmp_path.glob("otel_tokens-copilot-*"))  # read and removed


# -- failures, wrappers, everything else ------------------------------------------------------
def test_turn_failed_with_exit_zero_is_an_error(instrumented, bin_dir):
    write_cli(bin_dir, "codex", f'cat "{OWN / "codex/turn_failed.jsonl"}"\nexit 0\n')
    assert subprocess.run(["codex", "exec", "--json", "x"], capture_output=True).returncode == 0
    span = instrumented.span()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "agent_error"


def test_non_zero_exit(instrumented, bin_dir):
    write_cli(bin_dir, "gemini", "echo 'quota exceeded' >&2\nexit 3\n")
    result = subprocess.run(["gemini", "-p", "x"], capture_output=True)
    assert result.returncode == 3 and result.stderr == b"quota exceeded\n"
    span = instrumented.span()
    assert span.attributes["error.type"] == "exit_code"
    assert span.attributes["otel_tokens.cli.exit_code"] == 3


def test_check_output_raises_unchanged(instrumented, bin_dir):
    write_cli(bin_dir, "claude", "exit 2\n")
    with pytest.raises(subprocess.CalledProcessError) as info:
        subprocess.check_output(["claude", "-p", "x"])
    assert info.value.returncode == 2
    assert instrumented.span().status.status_code is StatusCode.ERROR


def test_missing_executable_raises_unchanged(instrumented, bin_dir):
    with pytest.raises(FileNotFoundError):
        subprocess.run([str(bin_dir / "copilot"), "-p", "x"])
    assert instrumented.span().status.status_code is StatusCode.ERROR


def test_wrapper_names_from_env(telemetry, bin_dir, shared, monkeypatch):
    monkeypatch.setenv("OTEL_TOKENS_CLI_NAMES", "my-agent=claude")
    otel_tokens.settings.reload()
    write_cli(bin_dir, "my-agent", f'cat "{shared / "claude/success.json"}"\n')
    with instrumenting():
        subprocess.run(["my-agent", "-p", "x"], capture_output=True)
    span = telemetry.span()
    assert span.name == "invoke_agent claude"
    assert span.attributes["otel_tokens.cli.executable"] == "my-agent"
    assert span.attributes["otel_tokens.cost.usd"] == pytest.approx(0.03794695)


def test_bad_wrapper_entry_is_one_problem_and_left_out(telemetry, monkeypatch):
    monkeypatch.setenv("OTEL_TOKENS_CLI_NAMES", "my-agent=cursor,my-claude=claude")
    problems = otel_tokens.settings.reload().problems
    assert [(p.name, p.value) for p in problems] == [("OTEL_TOKENS_CLI_NAMES", "my-agent=cursor")]
    assert otel_tokens.settings.current().cli_names == {"my-claude": "claude"}
    SubprocessInstrumentor().instrument()  # never raises into the host
    SubprocessInstrumentor().uninstrument()


def test_other_commands_and_version_are_not_instrumented(instrumented, fake_clis):
    assert subprocess.run([sys.executable, "-c", "print(1)"], capture_output=True).stdout == b"1\n"
    subprocess.run(["copilot", "--version"], capture_output=True)
    assert instrumented.finished() == []


def test_codex_resumed_thread_reports_delta(instrumented, bin_dir, tmp_path):
    first = tmp_path / "first.jsonl"
    first.write_text('{"type":"thread.started","thread_id":"t-resume"}\n'
                     '{"type":"turn.completed","usage":{"input_tokens":50000,"cached_input_tokens":30000,'
                     '"output_tokens":1000,"reasoning_output_tokens":600}}\n')  # fmt: skip
    write_cli(bin_dir, "codex", f'cat "{first}"\n')
    subprocess.run(["codex", "exec", "--json", "x"], capture_output=True)
    write_cli(bin_dir, "codex", f'cat "{OWN / "codex/resumed.jsonl"}"\n')
    subprocess.run(["codex", "exec", "resume", "--last", "--json"], capture_output=True)
    _first, second = instrumented.finished()
    assert second.attributes["gen_ai.usage.input_tokens"] == 10000
    assert second.attributes["gen_ai.usage.output_tokens"] == 500
    assert second.attributes["gen_ai.usage.reasoning.output_tokens"] == 300
    assert second.attributes["otel_tokens.cli.notices"] == 1


def test_parse_faults_are_counted(instrumented, bin_dir):
    write_cli(bin_dir, "copilot", """printf '%s\\n' '{"type":"assistant.message","data":{"content":"a","outputTokens":5}}' '{"type":"res'\n""")
    result = subprocess.run(["copilot", "-p", "x"], capture_output=True)
    assert result.returncode == 0
    assert instrumented.errors() == {"parse": 1}
    assert instrumented.span().attributes["otel_tokens.cli.parse_errors"] == 1


def test_uninstrument_restores_popen(telemetry, fake_clis):
    original = subprocess.Popen.__init__
    instrumentor = SubprocessInstrumentor()
    instrumentor.instrument()
    assert subprocess.Popen.__init__ is not original
    instrumentor.uninstrument()
    assert subprocess.Popen.__init__ is original
    subprocess.run(["copilot", "-p", "x"], capture_output=True)
    assert telemetry.finished() == []


def test_content_capture_opt_in(fake_clis, monkeypatch):
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    otel_tokens.settings.reload()
    with handling() as t, instrumenting():  # the handler made with the setting on
        subprocess.run(["codex", "exec", "SECRET prompt"], capture_output=True)
    span = t.span()
    assert span.attributes["otel_tokens.cli.argv"] == ("codex", "exec", "SECRET prompt")
    assert span.attributes["otel_tokens.cli.output_text"].startswith("Fixed the sign error")
