"""Agent-CLI output parsers: pure functions from a CLI's output to an :class:`AgentRun`.

One module per CLI (``copilot``, ``claude``, ``codex``, ``gemini``); none does I/O, none
raises on malformed, truncated or interleaved output. ``PARSERS`` maps a CLI name to its
``parse(stdout, *, stderr=None, exit_code=None, ...)``.
"""

from __future__ import annotations

from typing import Callable

from . import claude, codex, copilot, gemini
from .run import AgentRun

__all__ = ["AgentRun", "PARSERS", "Parser", "get_parser"]

Parser = Callable[..., AgentRun]

#: CLI name -> parser.
PARSERS: dict[str, Parser] = {
    "copilot": copilot.parse,
    "claude": claude.parse,
    "codex": codex.parse,
    "gemini": gemini.parse,
}


def get_parser(name: str) -> Parser:
    """The parser named ``name``; a clear ``ValueError`` for an unknown one."""
    try:
        return PARSERS[name]
    except KeyError:
        raise ValueError(f"unknown agent-CLI parser {name!r}; known: {', '.join(PARSERS)}") from None
