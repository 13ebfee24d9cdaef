"""Every command and snippet of the README runs, as a user would run it.

Each ```bash and ```python block is run (bash blocks in a folder where `.venv` is this
environment and `my_agent.py` is a small agent calling a local server in OpenAI's shape; python
blocks in a process of their own, their model calls to that server). A block that cannot run
in a test carries `<!-- not run by tests: why -->` on the line above it, and
``NOT_RUN`` below names each one: a new one fails until it is listed here. The ```promql block
is run on a real Prometheus by tests/ops/test_e2e.py. The sample report (the README's picture,
its text in docs/cli.md) is the demo's real output (docs/render_report.py refreshes it), and the README's settings are those
otel_tokens/settings.py reads."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.local_server import LocalServer

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
sys.path.insert(0, str(ROOT / "docs"))
import render_report

SKIP = re.compile(r"<!-- not run by tests: (.+?) -->")
FENCE = re.compile(r"^( *)```(bash|python)\n(.*?)^\1```$", re.DOTALL | re.MULTILINE)
REFRESH = "refresh it: python docs/render_report.py (from the repository's root)"

#: the first line of each block no test runs, and why (the README says why beside it)
NOT_RUN = {
    "python3 -m venv .venv && .venv/bin/pip install -q -e '.[demo]'": "installs from the network",
    "bash .ci/run": "it is the test suite",
    "GF_ADMIN_PASSWORD=change-me docker compose -f collector-config/docker-compose.yml up -d":
        "needs Docker",
}  # fmt: skip

#: what a block prints when it works, by a line of the block
EXPECTED = {
    "otel-tokens demo --ledger demo.db": "totals by agent",
    "otel-tokens run -- python my_agent.py": "my_agent ['--its', '--own', '--args']: 12 tokens",
    "opentelemetry-instrument python my_agent.py": "my_agent []: 12 tokens",
    'with otel_tokens.agent("support"': "support 1 12 ",
}

MY_AGENT = """\
import sys
from openai import OpenAI

reply = OpenAI().chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
print(f"my_agent {sys.argv[1:]}: {reply.usage.total_tokens} tokens")
"""


def blocks() -> list[tuple[str, str, str | None]]:
    """(language, code, why it is not run or None) of each ```bash and ```python block."""
    text = README.read_text()
    found = []
    for match in FENCE.finditer(text):
        code = "\n".join(line[len(match[1]) :] for line in match[3].splitlines()) + "\n"
        before = text[: match.start()].rstrip("\n").rpartition("\n")[2]
        skip = SKIP.search(before)
        found.append((match[2], code, skip[1] if skip else None))
    return found


def _chat(path: str, body: Any) -> tuple[int, str, bytes, dict[str, str]]:
    answer = {"id": "chatcmpl-readme", "object": "chat.completion", "created": 1,
              "model": body["model"], "choices": [{"index": 0, "finish_reason": "stop",
              "message": {"role": "assistant", "content": "On its way."}}],
              "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}}  # fmt: skip
    return 200, "application/json", json.dumps(answer).encode(), {}


@pytest.fixture
def place(tmp_path: Path):
    """A folder like the repository's root after the README's install: `.venv` is this
    environment; and the environment a user's shell would have, its model at a local server."""
    for entry in ROOT.iterdir():
        if entry.name not in (".venv", ".git"):
            (tmp_path / entry.name).symlink_to(entry)
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    (tmp_path / "my_agent.py").write_text(MY_AGENT)
    server = LocalServer(_chat)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_"))}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
               PYTHONPATH=str(ROOT), OTEL_TOKENS_PROMETHEUS_PORT="0", OTEL_TOKENS_EXIT_TIMEOUT="1",
               OPENAI_API_KEY="sk-readme", OPENAI_BASE_URL=f"{server.url}/v1")  # fmt: skip
    yield tmp_path, env
    server.close()


def _run(language: str, code: str, folder: Path, env: dict[str, str]) -> str:
    command = (
        ["bash", "-euo", "pipefail", "-c", code]
        if language == "bash"
        else [sys.executable, "-c", code]
    )
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True,
                          timeout=180, check=False)  # fmt: skip
    assert done.returncode == 0, f"README block failed:\n{code}\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, f"README block:\n{code}\n{done.stderr}"
    return done.stdout


def test_every_block_runs_and_says_what_it_should(place):
    folder, env = place
    ran = []
    for language, code, why in blocks():
        if why is None:
            out = _run(language, code, folder, env)
            ran.append(code)
            for line, expected in EXPECTED.items():
                if line in code:
                    assert expected in out, f"README block:\n{code}\nprinted:\n{out}"
    assert len(ran) >= 6, ran
    for line in EXPECTED:
        assert any(line in code for code in ran), f"no README block runs {line!r}"


def test_the_blocks_no_test_runs_are_these():
    """Nothing is silently left out: every block marked not run is listed in NOT_RUN."""
    skipped = {code.splitlines()[0]: why for _, code, why in blocks() if why is not None}
    print(
        "README blocks no test runs:",
        *(f"  {line}  ({why})" for line, why in skipped.items()),
        sep="\n",
    )
    assert sorted(skipped) == sorted(NOT_RUN)


def test_the_sample_report_is_what_the_demo_prints():
    shown = render_report.shown_sample(render_report.SAMPLE_DOC.read_text())
    assert shown == render_report.sample(), f"the sample report is not the demo's: {REFRESH}"


def test_the_readme_shows_the_report_picture():
    assert "![otel-tokens report of the demo's ledger](docs/report.svg)" in README.read_text()


def _characters(text: str) -> Counter[str]:
    return Counter(char for char in text if not char.isspace())


def test_the_report_picture_is_the_sample():
    """The picture shows the sample's characters (counted: how rich cuts the text into SVG
    elements and styles them changes with its version, which CI installs newest)."""
    picture = (ROOT / "docs" / "report.svg").read_text()
    drawn = "".join(
        html.unescape(text) for text in re.findall(r"<text [^>]*>(.*?)</text>", picture)
    )
    sample = render_report.shown_sample(render_report.SAMPLE_DOC.read_text())
    wanted = f"{sample}$ {render_report.COMMAND}"
    assert _characters(drawn) == _characters(wanted), (
        f"docs/report.svg is not the sample: {REFRESH}"
    )


def test_the_sample_leaves_out_what_shows_the_clock():
    report = "ledger x: 2 requests\ntotals by agent\n\n a  1\n\ncost by time (UTC)\n\n 21:00  1\n"
    assert render_report.sample_of(report) == "ledger x: 2 requests\ntotals by agent\n\n a  1\n"
    with pytest.raises(RuntimeError, match="clock"):
        render_report.sample_of(report.replace("cost by time", "spend by hour"))


def _settings_read() -> set[str]:
    source = (ROOT / "otel_tokens" / "settings.py").read_text()
    return set(re.findall(r'"(OTEL_TOKENS_[A-Z_]+)"', source))


def test_the_readme_s_settings_are_read_and_every_setting_is_in_the_full_table():
    readme = README.read_text()
    table = readme[readme.index("| variable | meaning | default |") :].split("\n\n")[0]
    shown = set(re.findall(r"`(OTEL_TOKENS_[A-Z_]+)`", table))
    assert shown and shown <= _settings_read(), shown - _settings_read()
    full = (ROOT / "docs" / "configuration.md").read_text()
    missing = sorted(name for name in _settings_read() if f"`{name}`" not in full)
    assert missing == [], "docs/configuration.md should have a row for these settings"


def _slugs(markdown: str) -> set[str]:
    """GitHub's anchors of a Markdown file's headings."""
    heads = re.findall(
        r"^#+ (.+)$",
        re.sub(r"^```.*?^```", "", markdown, flags=re.DOTALL | re.MULTILINE),
        re.MULTILINE,
    )
    return {re.sub(r"[^\w\- ]", "", head.lower()).replace(" ", "-") for head in heads}


def test_every_link_of_the_readme_and_docs_leads_somewhere():
    """Sections moved out of the README: a link to a file or heading that is gone fails here."""
    broken = []
    for page in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists() or (anchor and anchor not in _slugs(file.read_text())):
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []
