"""Agent-CLI output parsers: pure functions from a CLI's output to an :class:`AgentRun`.

One module per CLI (``copilot``, ``claude``, ``codex``, ``gemini``); none does I/O, none
raises on malformed, truncated or interleaved output. ``PARSERS`` maps a CLI name to its
``parse(stdout, *, stderr=None, exit_code=None, ...)``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Callable, Iterator

if TYPE_CHECKING:
    from .run import AgentRun

__all__ = ["AgentRun", "PARSERS", "Parser", "get_parser"]

Parser = Callable[..., "AgentRun"]


def __getattr__(name: str) -> object:
    """``AgentRun`` on first use: ``instrument()`` only needs the parser names."""
    if name == "AgentRun":
        from .run import AgentRun

        return AgentRun
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Parsers(Mapping[str, Parser]):
    """CLI name -> parser; a parser module is imported on first use, not at start-up
    (``instrument()`` only needs the names)."""

    _names = ("copilot", "claude", "codex", "gemini")

    def __getitem__(self, name: str) -> Parser:
        if name not in self._names:
            raise KeyError(name)
        return importlib.import_module(f"{__name__}.{name}").parse  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


#: CLI name -> parser.
PARSERS: Mapping[str, Parser] = _Parsers()


def get_parser(name: str) -> Parser:
    """The parser named ``name``; a clear ``ValueError`` for an unknown one."""
    try:
        return PARSERS[name]
    except KeyError:
        raise ValueError(
            f"unknown agent-CLI parser {name!r}; known: {', '.join(PARSERS)}"
        ) from None
