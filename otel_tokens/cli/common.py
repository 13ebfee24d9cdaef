"""What every ``otel-tokens`` subcommand shares: the one-line user error."""

from __future__ import annotations

import click

__all__ = ["CliError"]


class CliError(click.ClickException):
    """A user-facing failure: printed as one line, exit code ``exit_code``."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code
