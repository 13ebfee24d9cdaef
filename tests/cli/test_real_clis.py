"""What the real Claude Code, Codex, Gemini CLI and Copilot CLI printed
(``../shared/fixtures/cli-real``), replayed byte for byte by a fake executable of the same name
on PATH: the caller gets the same stdout, stderr and exit code, and the recorded figures are
the fixture README's (tokens per class per model, cost per model, the run span, failures).
Failures are replayed from tests/fixtures/cli-failures (the real formats, see its README)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from genai_prices import Usage as PricesUsage
from genai_prices import calc_price
from opentelemetry.trace import StatusCode

import otel_tokens
from otel_tokens.capture.agent_cli.parsers.copilot import silent_output

from .conftest import ROOT

REAL = ROOT.parent / "shared" / "fixtures" / "cli-real"
FAILURES = ROOT / "tests" / "fixtures" / "cli-failures"
CLAUDE = "claude-opus-5-5"
#: fixture -> {model: (input, cache read, cache write, output, reasoning)} (the README's table)
EXPECTED = {
    "claude/json": {CLAUDE: (33351, 30021, 3027, 93, None)},
    "claude/stream-json": {CLAUDE: (33351, 30021, 3027, 93, None)},
    "claude/json-thinking": {CLAUDE: (33351, 30021, 3027, 93, 51)},
    "codex/exec-json": {"gpt-5.5": (9003, 3009, None, 921, 303)},
    "gemini/json": {"gemini-3.5-flash-lite": (6007, 3001, None, 472, 401),
                    "gemini-3.8-flash": (36042, 18006, None, 2832, 2406)},
    "gemini/stream-json": {"gemini-3.5-flash-lite": (6007, 3001, None, 472, 401),
                           "gemini-3.8-flash": (36042, 18006, None, 2832, 2406)},
    "copilot/json": {"claude-sonnet-4.5": (12003, 6009, None, 1509, 633)},  # from the usage file
    "copilot/json-usage-file": {"claude-sonnet-4.5": (12003, 6009, None, 1509, 633)},
}  # fmt: skip
ARGS = {  # the command lines the fixtures were recorded with
    "claude/json": ["-p", "hi", "--output-format", "json"],
    "claude/stream-json": ["-p", "hi", "--output-format", "stream-json", "--verbose"],
    "claude/json-thinking": ["-p", "hi", "--output-format", "json"],
    "codex/exec-json": ["exec", "--json", "--skip-git-repo-check", "-m", "gpt-5.5", "hi"],
    "gemini/json": ["-p", "hi", "--output-format", "json"],
    "gemini/stream-json": ["-p", "hi", "--output-format", "stream-json"],
    "copilot/json": ["-p", "hi", "--output-format", "json"],
    "copilot/text": ["-p", "hi"],
    "copilot/silent": ["-p", "hi", "-s"],
}
CLASSES = ("input", "cache_read", "cache_write", "output", "reasoning")
PROVIDER = {"claude": "anthropic", "codex": "openai", "gemini": "google", "copilot": None}


@pytest.fixture
def real() -> Path:
    if not REAL.is_dir():
        pytest.skip(f"the real CLI outputs are not beside this clone ({REAL})")
    return REAL


def fake(bin_dir: Path, cli: str, out: Path | None, err: Path | None = None, code: int = 0,
         json_out: Path | None = None, usage: Path | None = None) -> None:  # fmt: skip
    """A ``cli`` on PATH printing ``out``/``err`` as they are and exiting ``code``; with
    ``--output-format json`` it prints ``json_out`` instead, and it writes ``usage`` to the file
    ``--usage-output-file`` names (as the real Copilot CLI does)."""
    script = bin_dir / cli
    script.write_text(f"#!{sys.executable}\n" + textwrap.dedent(f"""
        import shutil, sys
        args = sys.argv[1:]
        out, err, json_out, usage = {str(out) if out else None!r}, {str(err) if err else None!r}, {str(json_out) if json_out else None!r}, {str(usage) if usage else None!r}
        if usage and "--usage-output-file" in args:
            shutil.copyfile(usage, args[args.index("--usage-output-file") + 1])
        if json_out and "--output-format" in args and args[args.index("--output-format") + 1] == "json":
            out = json_out
        for path, stream in ((out, sys.stdout), (err, sys.stderr)):
            if path:
                stream.buffer.write(open(path, "rb").read())
        sys.exit({code})
    """))  # fmt: skip
    script.chmod(0o755)


def replay(bin_dir: Path, real: Path, name: str, args: list[str] | None = None,
           **options: Path) -> subprocess.CompletedProcess:  # fmt: skip
    cli = name.split("/")[0]
    err = real / f"{name}.err"
    fake(bin_dir, cli, real / f"{name}.out", err if err.exists() else None, **options)
    return subprocess.run([cli, *(args if args is not None else ARGS[name])], capture_output=True)


def per_model(t) -> dict[str, tuple]:
    """Tokens per model and class from the otel_tokens.tokens points."""
    found: dict[str, dict[str, int]] = {}
    for p in t.points("otel_tokens.tokens"):
        model = p.attributes.get("gen_ai.response.model") or p.attributes.get("gen_ai.request.model")
        found.setdefault(model, {})[p.attributes["gen_ai.token.type"]] = p.value
    return {model: tuple(v.get(c) for c in CLASSES) for model, v in found.items()}


def cost_per_model(t) -> dict[str, float]:
    return {p.attributes.get("gen_ai.response.model") or p.attributes.get("gen_ai.request.model"):
            p.value for p in t.points("otel_tokens.cost")}  # fmt: skip


def expected_cost(cli: str, model: str, figures: tuple) -> float:
    inp, read, write, out, _reasoning = figures
    return float(calc_price(PricesUsage(input_tokens=inp, cache_read_tokens=read or 0,
                                        cache_write_tokens=write or 0, output_tokens=out),
                            model, provider_id=PROVIDER[cli]).total_price)  # fmt: skip


@pytest.mark.parametrize("name", [n for n in EXPECTED if n != "copilot/json-usage-file"])
def test_replayed_output_is_byte_identical_and_the_figures_are_the_readmes(instrumented, bin_dir,
                                                                         real, name):  # fmt: skip
    cli = name.split("/")[0]
    usage = real / "copilot/json-usage-file.usage.json" if cli == "copilot" else None
    result = replay(bin_dir, real, name, usage=usage) if usage else replay(bin_dir, real, name)
    err = real / f"{name}.err"
    assert result.stdout == (real / f"{name}.out").read_bytes()
    assert result.stderr == (err.read_bytes() if err.exists() else b"")
    assert result.returncode == 0
    span = instrumented.span()
    assert span.name == f"invoke_agent {cli}" and span.status.status_code is not StatusCode.ERROR
    assert per_model(instrumented) == EXPECTED[name]
    costs = cost_per_model(instrumented)
    for model, figures in EXPECTED[name].items():
        want = (0.024211199999999995 if cli == "claude" else expected_cost(cli, model, figures))
        assert costs[model] == pytest.approx(want, rel=1e-9), model
    assert "<synthetic>" not in repr(dict(span.attributes)) and "auto" not in costs
    assert instrumented.errors() == {}


def test_codex_model_comes_from_the_command_line_and_unknown_when_none_says(instrumented, bin_dir,
                                                                          real, tmp_path, monkeypatch):  # fmt: skip
    monkeypatch.setenv("CODEX_HOME", str(tmp_path))  # an empty config: nothing else says
    replay(bin_dir, real, "codex/exec-json", ["exec", "--json", "-c", "model='gpt-5.5'", "hi"])
    replay(bin_dir, real, "codex/exec-json", ["exec", "--json", "hi"])
    (tmp_path / "config.toml").write_text('model = "gpt-5.4"\n[profiles.fast]\nmodel = "gpt-5.5-mini"\n')
    replay(bin_dir, real, "codex/exec-json", ["exec", "--json", "hi"])
    replay(bin_dir, real, "codex/exec-json", ["exec", "--json", "--profile", "fast", "hi"])
    models = [s.attributes.get("gen_ai.request.model") for s in instrumented.finished()]
    assert models == ["gpt-5.5", None, "gpt-5.4", "gpt-5.5-mini"]
    assert "otel_tokens.cost.usd" not in instrumented.finished()[1].attributes  # no model: no price


def test_codex_resume_records_only_this_runs_usage_in_one_process(instrumented, bin_dir, real):
    replay(bin_dir, real, "codex/exec-json")
    resume = ["exec", "--json", "--skip-git-repo-check", "-m", "gpt-5.5", "resume",
              "01a20446-e4fe-7bf3-8d5d-ad8a840150db", "again"]  # fmt: skip
    replay(bin_dir, real, "codex/exec-json-resume", resume)
    first, second = instrumented.finished()
    own = tuple(second.attributes.get(k) for k in (
        "gen_ai.usage.input_tokens", "gen_ai.usage.cache_read.input_tokens",
        "gen_ai.usage.cache_write.input_tokens", "gen_ai.usage.output_tokens",
        "gen_ai.usage.reasoning.output_tokens"))  # fmt: skip
    assert own == (12004, 4012, None, 1228, 404)
    assert per_model(instrumented) == {"gpt-5.5": (21007, 7021, None, 2149, 707)}  # the two runs


CHILD = """
import json, subprocess, sys
import otel_tokens
otel_tokens.instrument()
with otel_tokens.agent("coder") as entry:
    subprocess.run(sys.argv[1:], capture_output=True)
row = entry.ledger.history()[-1]
print(json.dumps([row.input_tokens, row.cache_read_tokens, row.cache_write_tokens,
                  row.output_tokens, row.reasoning_tokens]))
"""


def test_codex_resume_in_a_later_process_subtracts_the_threads_earlier_totals(bin_dir, real, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(OTEL_TOKENS_LEDGER_PATH=str(tmp_path / "ledger.db"), OTEL_METRICS_EXPORTER="none")
    rows = []
    for name, args in (("codex/exec-json", ARGS["codex/exec-json"]),
                       ("codex/exec-json-resume", ["exec", "--json", "-m", "gpt-5.5", "resume",
                                                   "01a20446-e4fe-7bf3-8d5d-ad8a840150db", "again"])):  # fmt: skip
        fake(bin_dir, "codex", real / f"{name}.out", real / f"{name}.err")
        out = subprocess.run([sys.executable, "-c", CHILD, "codex", *args], capture_output=True,
                             text=True, env=env, timeout=120, check=True)  # fmt: skip
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    assert rows == [[9003, 3009, None, 921, 303], [12004, 4012, None, 1228, 404]]


def test_copilot_usage_file_is_the_default_and_private(instrumented, bin_dir, real, tmp_path,
                                                        monkeypatch):  # fmt: skip
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setenv("TMPDIR", str(private))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    result = replay(bin_dir, real, "copilot/json", usage=real / "copilot/json-usage-file.usage.json")
    assert result.stdout == (real / "copilot/json.out").read_bytes()
    assert list(private.iterdir()) == []  # read, then deleted
    assert instrumented.span().attributes["otel_tokens.cli.usage_file"] is True


def test_a_callers_own_usage_file_is_read_and_left(instrumented, bin_dir, real, tmp_path):
    mine = tmp_path / "mine.json"
    args = ["-p", "hi", "--output-format", "json", "--usage-output-file", str(mine)]
    result = replay(bin_dir, real, "copilot/json-usage-file", args,
                    usage=real / "copilot/json-usage-file.usage.json")  # fmt: skip
    assert result.stdout == (real / "copilot/json-usage-file.out").read_bytes()
    assert mine.read_bytes() == (real / "copilot/json-usage-file.usage.json").read_bytes()
    assert per_model(instrumented) == EXPECTED["copilot/json-usage-file"]
    assert instrumented.span().attributes["otel_tokens.cli.model_calls"] == 2


def test_copilot_without_the_usage_file_records_no_usage_not_a_zero(instrumented, bin_dir, real,
                                                                      monkeypatch):  # fmt: skip
    monkeypatch.setenv("OTEL_TOKENS_COPILOT_USAGE_FILE", "false")
    otel_tokens.settings.reload()
    replay(bin_dir, real, "copilot/json")
    span = instrumented.span()
    assert "gen_ai.usage.input_tokens" not in span.attributes
    assert "gen_ai.usage.output_tokens" not in span.attributes
    assert span.attributes["gen_ai.response.model"] == "claude-sonnet-4.5"
    assert instrumented.errors() == {"usage_missing": 1}


def test_copilot_text_summary_is_an_estimate_with_the_exact_reasoning(instrumented, bin_dir, real,
                                                                       monkeypatch):  # fmt: skip
    monkeypatch.setenv("OTEL_TOKENS_COPILOT_USAGE_FILE", "off")
    otel_tokens.settings.reload()
    result = replay(bin_dir, real, "copilot/text")
    assert (result.stdout, result.stderr) == ((real / "copilot/text.out").read_bytes(),
                                              (real / "copilot/text.err").read_bytes())  # fmt: skip
    attrs = instrumented.span().attributes
    assert attrs["otel_tokens.usage.source"] == "estimated"
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.cache_read.input_tokens"],
            attrs["gen_ai.usage.output_tokens"], attrs["gen_ai.usage.reasoning.output_tokens"]) == (
        12000, 6000, 1500, 633)  # fmt: skip


@pytest.mark.parametrize("rewrite", [False, True])
def test_copilot_silent_stdout_is_byte_identical_rewritten_or_not(instrumented, bin_dir, real,
                                                                   monkeypatch, rewrite):  # fmt: skip
    monkeypatch.setenv("OTEL_TOKENS_COPILOT_JSON", str(rewrite).lower())
    otel_tokens.settings.reload()
    fake(bin_dir, "copilot", real / "copilot/silent.out", json_out=real / "copilot/json.out",
         usage=real / "copilot/json-usage-file.usage.json")  # fmt: skip
    result = subprocess.run(["copilot", "-p", "hi", "-s"], capture_output=True)
    assert result.stdout == (real / "copilot/silent.out").read_bytes()
    assert silent_output((real / "copilot/json.out").read_bytes()).encode() == result.stdout
    assert per_model(instrumented) == EXPECTED["copilot/json"]  # exact either way (usage file)


@pytest.mark.parametrize("name", ["copilot/help", "copilot/version"])
def test_help_and_version_are_not_runs(instrumented, bin_dir, real, name):
    fake(bin_dir, "copilot", real / f"{name}.out")
    result = subprocess.run(["copilot", f"--{name.split('/')[1]}"], capture_output=True)
    assert result.stdout == (real / f"{name}.out").read_bytes()
    assert instrumented.finished() == [] and instrumented.points("otel_tokens.tokens") == []


def test_asyncio_subprocess_of_a_real_output(instrumented, bin_dir, real):
    fake(bin_dir, "gemini", real / "gemini/stream-json.out", real / "gemini/stream-json.err")

    async def main() -> bytes:
        proc = await asyncio.create_subprocess_exec(
            "gemini", *ARGS["gemini/stream-json"], stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE)  # fmt: skip
        out, _err = await proc.communicate()
        return out

    assert asyncio.run(main()) == (real / "gemini/stream-json.out").read_bytes()
    assert per_model(instrumented) == EXPECTED["gemini/stream-json"]


# -- failures ----------------------------------------------------------------------------------
FAILED = {  # (cli, stdout file, stderr file, exit code) -> error.type
    ("claude", "claude/api_error.json", None, 1): "400",
    ("claude", "claude/api_error_stream.jsonl", None, 1): "400",
    ("codex", "codex/turn_failed.out", "codex/turn_failed.err", 1): "400",
    ("gemini", None, "gemini/api_error.err", 144): "400",
    ("gemini", None, "gemini/untrusted.err", 55): "untrusted_workspace",
    ("copilot", "copilot/session_error.out", None, 1): "400",
}


@pytest.mark.parametrize("case", sorted(FAILED, key=str))
def test_failed_runs_carry_their_status_and_no_tokens(instrumented, bin_dir, case, monkeypatch):
    monkeypatch.setenv("OTEL_TOKENS_COPILOT_USAGE_FILE", "false")
    otel_tokens.settings.reload()
    cli, out, err, code = case
    fake(bin_dir, cli, FAILURES / out if out else None, FAILURES / err if err else None, code)
    result = subprocess.run([cli, "-p", "hi"], capture_output=True)
    assert result.returncode == code
    assert result.stdout == ((FAILURES / out).read_bytes() if out else b"")
    assert result.stderr == ((FAILURES / err).read_bytes() if err else b"")
    span = instrumented.span()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == FAILED[case]
    assert instrumented.points("otel_tokens.tokens") == []
    assert "<synthetic>" not in repr(dict(span.attributes))


def test_a_claude_run_cut_before_its_result_is_failed_and_its_figures_estimated(instrumented,
                                                                                bin_dir, real, tmp_path):  # fmt: skip
    lines = (real / "claude/stream-json.out").read_bytes().splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"".join(lines[:-1]))  # killed before the result line
    fake(bin_dir, "claude", cut, code=137)  # as a shell reports a kill (128 + 9)
    result = subprocess.run(["claude", *ARGS["claude/stream-json"]], capture_output=True)
    assert result.stdout == cut.read_bytes()
    span = instrumented.span()
    assert span.attributes["error.type"] == "truncated_output"
    assert span.attributes["otel_tokens.usage.source"] == "estimated"
    assert span.attributes["gen_ai.usage.input_tokens"] == 33351  # as each message started
    assert span.attributes["gen_ai.usage.output_tokens"] not in (2, 93)  # not message_start's 1s
    points = {p.attributes["gen_ai.token.type"]: p for p in instrumented.points("otel_tokens.tokens")}
    assert {p.attributes["otel_tokens.usage.source"] for p in points.values()} == {"estimated"}
