"""``otel-tokens run -- PROGRAM [ARGS...]``: run any program with every instrumentor on.

Like ``opentelemetry-instrument``, preconfigured for otel_tokens: the bootstrap directory
(``otel_tokens/cli/bootstrap``, holding a ``sitecustomize``) is prepended to ``PYTHONPATH``,
so every Python process the program starts runs ``otel_tokens.configure()`` and
``otel_tokens.instrument()`` before its own code; an existing ``sitecustomize`` still runs
(it is chained). The program then replaces this process (``os.execvpe``): exit code,
signals, stdin, stdout and stderr are the program's own. With no OTLP endpoint and no scrape
port set, the program prints its calls' table on stderr at exit (``OTEL_TOKENS_SUMMARY_AT_EXIT``'s
default there: ``settings.py``, ``emit/summary.py``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import click

from .common import CliError

BOOTSTRAP = Path(__file__).resolve().parent / "bootstrap"
#: set for the program, so the bootstrap knows it was asked for (and tests can see it)
MARKER = "OTEL_TOKENS_RUN"


def program_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment the program runs with: the bootstrap first on PYTHONPATH."""
    env = dict(os.environ if base is None else base)
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(BOOTSTRAP)]
    env["PYTHONPATH"] = os.pathsep.join([str(BOOTSTRAP), *parts])
    env[MARKER] = "1"
    return env


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option(
    "--service-name",
    metavar="NAME",
    help="service.name of the program's telemetry "
    "(default: OTEL_SERVICE_NAME, else the script's name).",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def run(service_name: str | None, command: tuple[str, ...]) -> None:
    """Run COMMAND (e.g. -- python my_agent.py) with otel_tokens' instrumentation on."""
    program = command[0]
    if program.startswith("-") and program != "--":
        raise click.UsageError(f"unknown option {program!r}; put the program after '--'")
    if program == "--":
        command = command[1:]
        if not command:
            raise click.UsageError("no program given after '--'")
        program = command[0]
    path = shutil.which(program)
    if path is None:
        raise CliError(f"run: program not found: {program!r}", exit_code=127)
    env = program_env()
    if service_name:
        env["OTEL_SERVICE_NAME"] = service_name
    try:
        os.execvpe(path, list(command), env)
    except OSError as exc:
        raise CliError(f"run: cannot execute {program!r}: {exc.strerror}", exit_code=126) from None
