"""A stand-in for the GitHub Copilot CLI, shipped for ``otel-tokens demo`` (offline).

Prints the recorded JSONL session (``--output-format json``) or, without that flag, the
answer's text; with ``--usage-output-file PATH`` writes the recorded usage file, as the real
CLI does. The demo runs it through a ``copilot`` wrapper on PATH, so the subprocess
instrumentor sees a real ``copilot`` process.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    if "--version" in argv:
        print("GitHub Copilot CLI 0.0.999 (otel-tokens demo stand-in)")
        return 0
    if "--usage-output-file" in argv:
        target = argv[argv.index("--usage-output-file") + 1]
        shutil.copyfile(HERE / "usage.json", target)
    session = (HERE / "run.jsonl").read_text()
    if "--output-format" in argv and argv[argv.index("--output-format") + 1] == "json":
        sys.stdout.write(session)
    else:
        messages = [json.loads(line) for line in session.splitlines()]
        texts = [m["data"]["content"] for m in messages if m["type"] == "assistant.message"]
        sys.stdout.write(texts[-1] + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
