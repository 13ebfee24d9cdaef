"""``otel-tokens report`` shows recorded values safely on a real terminal: users, tenants,
conversations, agent and model names come from callers and backends, so none of them may
clear the screen, set the window title, be read as markup or add a row, and ``-`` means "none"
only. Recorded through the real openai client into a ledger file, shown on a pseudo-terminal
(``script -qc``) as an operator would see it."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess

import pytest

import otel_tokens
from otel_tokens.capture.sdk import openai as openai_sdk

from ..sdk.replay import openai_client
from ..sdk.test_full_bill import chat, served
from ..telemetry.conftest import handling
from .conftest import clean_env, command
from .conftest import otel_tokens as run_cli

ANSI = re.compile(r"\x1b\[[0-9;]*m")  # the colours rich itself draws on a terminal

USERS = [
    "\x1b]0;pwned\x07mallory",  # OSC: sets the window title
    "\x1b[2J\x1b[Hwiped",  # clears the screen
    "\x9b31mcsi",  # a C1 control sequence introducer
    "[bold red]markup[/bold red]",
    ":smile:",
    "bob\nfake-user  99  1,000,000",  # a line break that would spoof a row
    "-",  # a user literally named "-"
    '"quoted"',
    "alice",
]
AGENT = "ops\x1b[31m\x1b]0;agent\x07"
MODEL = "gpt-4o-mini\x1b[2J"


@pytest.fixture
def ledger(monkeypatch, tmp_path):
    """A ledger file written through the real openai client: one call per user, one call
    that says nobody, all under a hostile agent name and answered by a hostile model name."""
    db = tmp_path / "hostile.db"
    monkeypatch.setenv("OTEL_TOKENS_LEDGER_PATH", str(db))
    otel_tokens.settings.reload()
    with handling(openai_sdk):
        client, _ = openai_client(served(*[chat(MODEL, "default", 100, 10)] * (len(USERS) + 1)))
        for user in [*USERS, None]:
            with otel_tokens.agent(AGENT, user=user, tenant=user, conversation=user):
                client.chat.completions.create(model="gpt-4o-mini",
                                               messages=[{"role": "user", "content": "hi"}])
        otel_tokens.account.agents.get_agent(AGENT).ledger.flush()
    return db


def on_a_terminal(*args: str) -> str:
    """What ``otel-tokens ARGS`` writes to a real pseudo-terminal (``script -qc``)."""
    if shutil.which("script") is None:
        pytest.skip("util-linux script is not installed")
    env = clean_env(TERM="xterm-256color", COLUMNS="200", LINES="50")
    proc = subprocess.run(["script", "-qec", shlex.join([*command(), *args]), "/dev/null"],
                          capture_output=True, env=env, timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:]
    text = proc.stdout.decode("utf-8")
    assert "\x1b[1m" in text or "\x1b[" in text  # rich saw a terminal (it draws its styles)
    return text


def no_injected_control(text: str) -> None:
    """Only rich's own colour codes: no OSC, no screen clear, no bell, no C1 controls."""
    plain = ANSI.sub("", text)
    for bad in ("\x1b", "\x07", "\x9b"):
        assert bad not in plain, repr(plain[max(0, plain.find(bad) - 80): plain.find(bad) + 80])


@pytest.mark.parametrize("by", ["user", "tenant", "conversation"])
def test_by_who_on_a_terminal_shows_each_value_safely_one_row_each(ledger, by):
    text = on_a_terminal("report", "--db", str(ledger), "--by", by)
    no_injected_control(text)
    lines = [ANSI.sub("", line).rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    rows = [line for line in lines if re.search(r"\s1\s+100\s+10\s", line)]
    assert len(rows) == len(USERS) + 1  # one row per value, the none row included
    shown = ['"\\x1b]0;pwned\\x07mallory"', '"\\x1b[2J\\x1b[Hwiped"', '"\\x9b31mcsi"',
             "[bold red]markup[/bold red]", ":smile:", '"bob\\nfake-user  99  1,000,000"',
             '"-"', '"\\"quoted\\""', "alice", "-"]  # fmt: skip
    for value in shown:  # each value escaped, literally, on exactly one row
        assert sum(row.strip().startswith(value + " ") for row in rows) == 1, value
    assert not any(line.lstrip().startswith("fake-user") for line in lines)


def test_by_user_json_keeps_a_user_named_dash_apart_from_nobody(ledger):
    groups = json.loads(run_cli("report", "--db", str(ledger), "--by", "user", "--json").stdout)["groups"]
    assert groups["-"]["requests"] == 1 and groups['"-"']["requests"] == 1  # nobody; the user "-"
    assert groups[USERS[0]]["requests"] == 1  # JSON carries the value itself, escaped by JSON
    assert len(groups) == len(USERS) + 1


def test_the_full_report_on_a_terminal_shows_agent_and_model_names_safely(ledger):
    text = on_a_terminal("report", "--db", str(ledger))
    no_injected_control(text)
    plain = ANSI.sub("", text)
    assert '"ops\\x1b[31m\\x1b]0;agent\\x07"' in plain  # the agent, in totals and top requests
    assert '"gpt-4o-mini\\x1b[2J"' in plain  # the model name the backend sent
