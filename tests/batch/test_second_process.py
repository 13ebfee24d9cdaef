"""A second process (a cron job reading the same results again) does not count a row the
first one recorded: rows are looked up by response id in the ledger file
(``OTEL_TOKENS_LEDGER_PATH``), whichever agent recorded them."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from .server import chat_line, embedding_line, errored, failed_line, succeeded

#: reads an OpenAI output file whole, then the first ``take`` rows of a Message Batch's results
READER = """
import json, sys
import anthropic, openai
import otel_tokens
from otel_tokens.capture.sdk import anthropic_patches
from otel_tokens.capture.sdk import openai_patches
from tests.telemetry.conftest import handling

openai_url, file_id, anthropic_url, batch_id, take, agent = sys.argv[1:7]
with handling(openai_patches, anthropic_patches) as t, otel_tokens.agent(agent):
    openai.OpenAI(base_url=openai_url, api_key="k", max_retries=0).files.content(file_id).read()
    rows = anthropic.Anthropic(base_url=anthropic_url, api_key="k", max_retries=0)
    for _, row in zip(range(int(take)), rows.messages.batches.results(batch_id)):
        pass
print(json.dumps([s.attributes.get("gen_ai.response.id") for s in t.finished()]))
"""
ROOT = Path(__file__).resolve().parents[2]


def read(server, ledger: Path, agent: str, take: int) -> list:
    """The response ids a new process recorded reading the output file and ``take`` rows of
    the batch's results."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_TOKENS_")}
    env["OTEL_TOKENS_LEDGER_PATH"] = str(ledger)
    env["OTEL_TOKENS_PROVIDER_URLS"] = (
        f"{server.openai_url}=openai;{server.anthropic_url}=anthropic"
    )
    args = [server.openai_url, "file-cron", server.anthropic_url, "msgbatch_cron", str(take), agent]
    done = subprocess.run(
        [sys.executable, "-c", READER, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_second_process_does_not_count_rows_again(server, tmp_path):
    ledger = tmp_path / "usage.db"
    server.output_file(
        "file-cron",
        [
            chat_line(11, "gpt-4o-mini", 300, 20),
            failed_line(12),
            embedding_line(13, "text-embedding-3-small", 8),
        ],
    )
    server.batch(
        "msgbatch_cron",
        [
            succeeded(21, "claude-haiku-4-5", 50, 5),
            errored(22),
            succeeded(23, "claude-haiku-4-5", 60, 6),
        ],
    )
    assert read(server, ledger, "nightly", take=1) == ["chatcmpl-B11", "batch_req_13", "msg_021"]
    # another process, another agent: the file again (nothing), the batch's results whole
    assert read(server, ledger, "audit", take=3) == ["msg_023"]
    with sqlite3.connect(ledger) as db:
        rows = db.execute("SELECT request_id, input_tokens FROM otel_tokens_requests ORDER BY id")
        assert rows.fetchall() == [
            ("chatcmpl-B11", 300),
            ("batch_req_13", 8),
            ("msg_021", 50),
            ("msg_023", 60),
        ]
