"""``otel-tokens check`` lists the model clients installed and whether each is recorded: real
distributions of this environment, and made-up ones (a ``*.dist-info`` folder on the path, as
pip leaves it) for a client that is not recorded, one whose capture is disabled and one whose
instrumentor cannot turn on. This worktree's code runs (PYTHONPATH), not an installed copy."""

from __future__ import annotations

import importlib.metadata as md
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import clean_env

ROOT = Path(__file__).resolve().parents[2]


def check(*paths: Path, **env: str) -> subprocess.CompletedProcess:
    """``otel-tokens check`` of this source tree, with ``paths`` on sys.path too."""
    path = ":".join([str(ROOT), *map(str, paths)])
    return subprocess.run(
        [sys.executable, "-m", "otel_tokens.cli", "check"],
        cwd=ROOT,
        env=clean_env(PYTHONPATH=path, **env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def clients(out: str) -> dict[str, str]:
    """The ``model clients`` section: row label (name and version) -> its verdict."""
    section = out.split("model clients", 1)[1].split("\ntelemetry:", 1)[0]
    rows = {}
    for line in section.splitlines()[1:]:
        if line.startswith("  ") and not line.startswith("  ("):
            label, _, verdict = line.strip().partition("  ")
            rows[label.strip()] = verdict.strip()
    return rows


def fake_distribution(folder: Path, name: str, version: str) -> Path:
    """A distribution as pip records it (its metadata only: nothing to import)."""
    info = folder / f"{name.replace('-', '_')}-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return folder


@pytest.fixture(scope="module")
def made_up(tmp_path_factory) -> Path:
    """A folder of distributions as pip records them: google-generativeai (nothing records it),
    replicate with an untrusted version (escape codes, 10 kB), claude-agent-sdk, and crewai's
    metadata without its package (a broken install: its instrumentor cannot turn on)."""
    folder = tmp_path_factory.mktemp("site")
    fake_distribution(folder, "google-generativeai", "0.8.5")
    fake_distribution(folder, "replicate", "1.0\x1b[31m" + "9" * 10_000)
    fake_distribution(folder, "claude-agent-sdk", "0.1.0")
    fake_distribution(folder, "crewai", "1.2.0")
    return folder


@pytest.fixture(scope="module")
def checked(made_up) -> subprocess.CompletedProcess:
    return check(made_up)


def test_the_installed_clients_are_listed_with_how_each_is_recorded(checked):
    assert checked.returncode == 0, checked.stderr
    rows = clients(checked.stdout)
    for name, verdict in (("groq", "yes: the HTTP layer (OpenAI format)"),
                          ("mistralai", "yes: the HTTP layer (OpenAI format)"),
                          ("cohere", "yes: the HTTP layer (Cohere format)"),
                          ("ollama", "yes: the HTTP layer (Ollama format)"),
                          ("azure-ai-inference", "yes: the HTTP layer (OpenAI format)"),
                          ("openai", "yes: its SDK capture"),
                          ("anthropic", "yes: its SDK capture")):  # fmt: skip
        assert rows[f"{name} {md.version(name)}"] == verdict
    assert rows["anthropic Message Batches results"] == (
        "yes: its SDK capture (each row once, at batch prices)")
    assert rows["huggingface_hub other tasks"] == "NOT recorded: their answers carry no usage"
    assert rows["claude-agent-sdk 0.1.0"] == "yes: through the Claude Code CLI parser (exact)"


def test_a_client_that_is_not_recorded_is_said_and_is_no_failure(checked):
    """google-generativeai's gRPC service is not mapped: nothing records it. The check says so
    and still passes; the
    version string from the metadata is printed bounded, without its escape codes."""
    assert checked.returncode == 0, checked.stderr
    rows = clients(checked.stdout)
    assert rows["google-generativeai 0.8.5"] == (
        "NOT recorded: gRPC (a deprecated SDK: use google-genai)")
    (replicate,) = [label for label in rows if label.startswith("replicate ")]
    assert "\x1b" not in replicate and len(replicate) < 60
    assert rows[replicate] == "NOT recorded: its predictions API is no known wire format"
    assert "installed, not recorded: their calls are missing from the telemetry" in checked.stdout


def test_a_client_whose_instrumentor_cannot_turn_on_is_not_recorded(checked):
    """The check says crewai's calls go unnamed rather than listing it as covered."""
    assert clients(checked.stdout)["crewai 1.2.0"] == (
        "NOT recorded: the crewai instrumentor is off (see instrumentors)"
    )


def test_a_capture_disabled_for_opentelemetry_instrument_is_said(made_up):
    """claude-agent-sdk is recorded through the Claude Code CLI parser, groq by the HTTP layer:
    with their entry points disabled, ``opentelemetry-instrument`` records neither."""
    done = check(
        made_up, OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=" otel_tokens_agent_cli,otel_tokens_http"
    )
    assert done.returncode == 0, done.stderr
    rows = clients(done.stdout)
    assert rows["claude-agent-sdk 0.1.0"].startswith(
        "NOT recorded under opentelemetry-instrument: disabled by "
        "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS (otel_tokens_agent_cli)"
    )
    assert rows[f"groq {md.version('groq')}"].startswith(
        "NOT recorded under opentelemetry-instrument: disabled by "
        "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS (otel_tokens_http)"
    )
    assert rows[f"openai {md.version('openai')}"] == "yes: its SDK capture"
    everything = check(made_up, OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="*")
    assert "disabled by" in clients(everything.stdout)[f"openai {md.version('openai')}"]
