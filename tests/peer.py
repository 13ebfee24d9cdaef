"""Other projects' recorded OpenAI/Anthropic traffic (``../shared/fixtures/peer-cassettes``),
read in place, with each interaction's true usage from the corpus README.

``truths()`` parses the README's per-folder tables (one row per recorded interaction: file,
index, endpoint, stream, status, the five token classes, response model, whether the response
is distinct, notes); ``interaction(truth)`` is the recorded interaction itself, loaded with
:func:`tests.cassettes.load`. A token class the API did not send is None (the README's ``-``).
"""

from __future__ import annotations

import functools
import pathlib
import re
from dataclasses import dataclass

from . import cassettes

PEER = cassettes.SHARED / "peer-cassettes"
CLASSES = ("input", "output", "cache_read", "cache_write", "reasoning")
#: the span attribute holding each token class
ATTRIBUTES = {
    "input": "gen_ai.usage.input_tokens",
    "output": "gen_ai.usage.output_tokens",
    "cache_read": "gen_ai.usage.cache_read.input_tokens",
    "cache_write": "gen_ai.usage.cache_write.input_tokens",
    "reasoning": "gen_ai.usage.reasoning.output_tokens",
}
_ABSENT = ("–", "-", "")


def require() -> pathlib.Path:
    """The corpus folder, or a skip saying why (it sits beside the repository, not in it)."""
    return cassettes.require(PEER)


@dataclass(frozen=True)
class Truth:
    """One interaction as the corpus README describes it."""

    folder: str
    file: str
    index: int
    endpoint: str  # e.g. "openai chat", "openai responses", "anthropic messages"
    stream: bool
    status: int
    usage: dict[str, int | None] | None  # None: the response carries no usage (or is an error)
    response_model: str | None
    distinct: bool
    notes: str

    @property
    def path(self) -> pathlib.Path:
        return PEER / self.folder / self.file

    @property
    def key(self) -> str:
        return f"{self.folder}/{self.file}#{self.index}"


def _cell(value: str) -> int | None:
    value = value.strip()
    return None if value in _ABSENT else int(value.replace(",", ""))


@functools.lru_cache(maxsize=1)
def truths() -> tuple[Truth, ...]:
    """Every interaction row of the README, in order (empty when the corpus is absent)."""
    readme = PEER / "README.md"
    if not readme.is_file():
        return ()
    rows: list[Truth] = []
    folder = file = ""
    for line in readme.read_text().splitlines():
        heading = re.match(r"^## (\S+)/ ", line)
        if heading:
            folder = heading.group(1)
            continue
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if len(cells) != 13 or not cells[1].isdigit():
            continue
        named = re.match(r"^`([^`]+)`", cells[0])
        if named:
            file = named.group(1)
        usage: dict[str, int | None] | None = None
        if cells[5] not in ("no usage", "error"):  # an error response carries no usage either
            usage = dict(zip(CLASSES, (_cell(c) for c in cells[5:10])))
        rows.append(Truth(
            folder=folder, file=file, index=int(cells[1]), endpoint=cells[2],
            stream=cells[3] == "yes", status=int(cells[4]), usage=usage,
            response_model=None if cells[10] in _ABSENT else cells[10],
            distinct=cells[11] == "yes", notes=cells[12],
        ))  # fmt: skip
    return tuple(rows)


@functools.lru_cache(maxsize=None)
def _load(path: pathlib.Path) -> tuple[cassettes.Interaction, ...]:
    return tuple(cassettes.load(path))


def interactions_of(path: pathlib.Path) -> tuple[cassettes.Interaction, ...]:
    """Every recorded interaction of one cassette file (cached)."""
    return _load(path)


def interaction(truth: Truth) -> cassettes.Interaction:
    """The recorded interaction a README row describes."""
    return _load(truth.path)[truth.index]
