"""The ``otel-tokens`` command: ``demo``, ``run``, ``report``, ``check`` (one module each).

Errors a user can cause (bad flags, an unreadable ledger, an unknown program, a malformed
setting) are one line on stderr and a non-zero exit, never a traceback;
``OTEL_TOKENS_DEBUG=1`` shows the traceback of an unexpected error.
"""

from __future__ import annotations

import sys

import click

from ..version import __version__
from .common import CliError

__all__ = ["CliError", "cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="otel-tokens")
def cli() -> None:
    """What LLM agents consume (tokens, premium requests, USD), as OpenTelemetry."""


def _register() -> None:
    from . import check, demo, report, run

    cli.add_command(demo.demo)
    cli.add_command(run.run)
    cli.add_command(report.report)
    cli.add_command(check.check)


_register()


def _fail(message: str, code: int) -> int:
    message = " ".join(str(message).split())  # one line, whatever the message holds
    click.echo(f"otel-tokens: error: {message}", err=True)
    return code


def _debug() -> bool:
    try:
        from ..settings import current

        return current().debug
    except Exception:  # noqa: BLE001 - the settings themselves are the trouble: no traceback
        return False


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns (and exits with) the exit code."""
    try:
        result = cli.main(args=argv, prog_name="otel-tokens", standalone_mode=False)
        code = result if isinstance(result, int) else 0
    except click.exceptions.NoArgsIsHelpError as exc:  # pragma: no cover - click >= 8.2
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        code = 2
    except click.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        code = _fail(exc.format_message() + hint, exc.exit_code)
    except click.ClickException as exc:
        code = _fail(exc.format_message(), exc.exit_code)
    except click.exceptions.Abort:
        code = _fail("aborted", 130)
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:
        code = 0
    except Exception as exc:  # noqa: BLE001 - never a traceback for the user
        if _debug():
            raise
        code = _fail(f"{type(exc).__name__}: {exc} (set OTEL_TOKENS_DEBUG=1 for the traceback)", 1)
    sys.exit(code)
