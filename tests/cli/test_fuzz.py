"""Hypothesis: no parser raises on random or mutated output, and every record stays valid.

Each parser gets 10,000 examples: real lines (our samples) truncated, with a value replaced
by a random one, with noise inserted, or interleaved with another line; random JSON values;
raw bytes. Mutations are driven by a Hypothesis-seeded ``Random`` so generation stays cheap.
"""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from otel_tokens.capture.agent_cli.parsers import AgentRun, claude, codex, copilot, gemini
from otel_tokens.usage import TOKEN_CLASSES, Usage

from .conftest import OWN

_SEEDS: dict[str, list[str]] = {
    "copilot": [
        *(OWN / "copilot/traps.jsonl").read_text().splitlines(),
        *(OWN / "copilot/failed.jsonl").read_text().splitlines(),
        *(OWN / "copilot/plaintext_oldest.txt").read_text().splitlines(),
        "Tokens     ↑ 48.2k (41.9k cached) • ↓ 1.3k (412 reasoning)",
        "Requests   1 Premium (38s)",
    ],
    "claude": [
        *(OWN / "claude/no_result_stream.jsonl").read_text().splitlines(),
        *(OWN / "claude/is_error.json").read_text().splitlines(),
    ],
    "codex": [
        *(OWN / "codex/resumed.jsonl").read_text().splitlines(),
        *(OWN / "codex/turn_failed.jsonl").read_text().splitlines(),
    ],
    "gemini": [
        *(OWN / "gemini/stream_error.jsonl").read_text().splitlines(),
        *(OWN / "gemini/stream_no_total.jsonl").read_text().splitlines(),
        '{"response":"r","stats":{"models":{"g":{"tokens":{"prompt":9,"cached":5,"candidates":3,'
        '"thoughts":2},"roles":{"main":{"tokens":{"prompt":9}}}}},"tools":{"totalCalls":1}}}',
    ],
}

_ATOMS: list[Any] = [None, True, False, 0, -1, 1.5, -0.0, float("nan"), 2**70, "", "x", "result",
                     "assistant.message", "turn.completed", [], {}, [1, "a"], {"type": "result"}]


def _value(rng: random.Random) -> Any:
    """A random JSON-ish value (including NaN, huge and negative numbers)."""
    roll = rng.random()
    if roll < 0.6:
        return rng.choice(_ATOMS)
    if roll < 0.8:
        return rng.randint(-10, 10**6)
    return "".join(rng.choice('ab{}[]":,0k.↑') for _ in range(rng.randint(0, 6)))


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            out += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            out += _paths(child, (*prefix, index))
    return out


def _set(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    value[path[0]] = _set(value[path[0]], path[1:], new)
    return value


def _mutate(rng: random.Random, seeds: list[str]) -> str:
    """One line: a real one, truncated, with a value replaced, with noise, or two
    interleaved (two writers on one stream)."""
    line = rng.choice(seeds)
    how = rng.randrange(6)
    if how == 0:
        return line[: rng.randint(0, len(line))]
    if how in (1, 2):
        try:
            doc = json.loads(line)
        except ValueError:
            return line
        path = rng.choice(_paths(doc))
        return json.dumps(_set(doc, path, _value(rng)))
    if how == 3:
        at = rng.randint(0, len(line))
        return line[:at] + json.dumps(_value(rng)) + line[at:]
    if how == 4:
        at = rng.randint(0, len(line))
        return line[:at] + rng.choice(seeds)
    return line


def _lines(rng: random.Random, cli: str, noise: bytes) -> bytes:
    seeds = _SEEDS[cli]
    lines = [_mutate(rng, seeds) if rng.random() < 0.85 else json.dumps(_value(rng))
             for _ in range(rng.randint(0, 6))]  # fmt: skip
    data = "\n".join(lines).encode("utf-8", "surrogatepass")
    if noise and rng.random() < 0.3:
        at = rng.randint(0, len(data))
        data = data[:at] + noise + data[at:]
    return data


_FUZZ = settings(max_examples=10_000, database=None, deadline=None, phases=[Phase.generate],
                 suppress_health_check=list(HealthCheck))  # fmt: skip
# A seed drives the mutations (a Random per example: cheap to generate, replayable)
_INPUT = (st.integers(0, 2**64).map(random.Random), st.binary(max_size=16))


def _check(run: AgentRun) -> None:
    assert isinstance(run, AgentRun) and isinstance(run.text, str)
    assert run.parse_errors >= 0
    for usage in run.usage:
        for name in TOKEN_CLASSES:  # never negative, never a bool or float
            value = getattr(usage, name)
            assert value is None or (type(value) is int and value >= 0)
    if run.usage or run.premium_requests is not None or run.cost_usd is not None:
        assert run.total is not None


@_FUZZ
@given(*_INPUT)
def test_fuzz_copilot(rng: random.Random, noise: bytes) -> None:
    stdout = _lines(rng, "copilot", noise)
    extra = _lines(rng, "copilot", noise) if rng.random() < 0.5 else None
    code = rng.choice([None, 0, 1, -9])
    _check(copilot.parse(stdout, stderr=extra, exit_code=code, usage_file=extra))
    _check(copilot.parse_summary(stdout))


@_FUZZ
@given(*_INPUT)
def test_fuzz_claude(rng: random.Random, noise: bytes) -> None:
    stdout = _lines(rng, "claude", noise)
    if rng.random() < 0.1:  # the --verbose json array
        stdout = b"[" + stdout.replace(b"\n", b",") + b"]"
    _check(claude.parse(stdout, exit_code=rng.choice([None, 0, 1])))


@_FUZZ
@given(*_INPUT)
def test_fuzz_codex(rng: random.Random, noise: bytes) -> None:
    _check(codex.parse(_lines(rng, "codex", noise), exit_code=rng.choice([None, 0, 1])))


@_FUZZ
@given(*_INPUT)
def test_fuzz_gemini(rng: random.Random, noise: bytes) -> None:
    _check(gemini.parse(_lines(rng, "gemini", noise), exit_code=rng.choice([None, 0, 1])))
