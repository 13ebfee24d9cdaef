"""Estimate accuracy against ground truth that is real, not made up.

1. Every recorded request in ../shared/fixtures/cassettes carrying the API's own input-token
   count: per host and source, the token-weighted mean and the max |error|.
2. The committed corpus of agent-style requests: the heuristic against tiktoken.
"""

from __future__ import annotations

import collections
import json

import pytest

from otel_tokens.account.estimate import Estimator, _count
from otel_tokens.account.estimate.requests import render_request

from .. import cassettes
from .corpus import SEED_FOUR_CALLS, corpus

OPENAI_HOST = "api.openai.com"
ANTHROPIC_HOST = "api.anthropic.com"


def _remote_image(body: object) -> bool:
    """A request with an image given by URL: its size cannot be known without fetching it."""
    text = json.dumps(body)
    return '"image_url"' in text and '"url": "http' in text


def cassette_rows() -> list[tuple[str, str, str, int, int, bool]]:
    """(host, source, cassette, actual, estimate, remote image) for each distinct request."""
    cassettes.require()
    rows, seen = [], set()
    for it in cassettes.interactions():
        actual, request = cassettes.reported_input_tokens(it), cassettes.request_of(it)
        if actual is None or request is None:
            continue
        key = (it.host, json.dumps(it.request_body, sort_keys=True))
        if key in seen:  # the same request recorded by several tests
            continue
        seen.add(key)
        remote = _remote_image(it.request_body)
        for estimator in (Estimator(), Estimator(use_tokenizer=False)):
            est = estimator.estimate(request, provider=it.provider).estimate
            rows.append((it.host, est.source, it.cassette, actual, est.input_tokens, remote))
    return rows


def table(rows) -> dict[tuple[str, str], tuple[int, float, float, str]]:
    """(host, source) -> (requests, token-weighted mean |error|, max |error|, worst cassette)."""
    groups = collections.defaultdict(list)
    for row in rows:
        groups[(row[0], row[1])].append(row)
    out = {}
    for key, group in sorted(groups.items()):
        total = sum(r[3] for r in group)
        worst = max(group, key=lambda r: abs(r[4] - r[3]) / r[3])
        out[key] = (len(group), sum(abs(r[4] - r[3]) for r in group) / total,
                    abs(worst[4] - worst[3]) / worst[3], worst[2])  # fmt: skip
    return out


def print_table(title: str, result) -> None:
    print(f"\n{title}\n{'host':<20} {'source':<7} {'requests':>8} {'weighted':>9} {'max':>7}  worst")
    for (host, source), (n, weighted, worst, cassette) in result.items():
        print(f"{host:<20} {source:<7} {n:>8} {weighted:>9.2%} {worst:>7.1%}  {cassette}")


@pytest.fixture(scope="module")
def rows():
    return cassette_rows()


def test_cassette_accuracy_targets(rows):
    print_table("estimates vs the API's input tokens (every recorded request)", table(rows))
    known = [r for r in rows if not r[5]]
    result = table(known)
    print_table("the same, without requests whose image is a remote URL (size unknowable)", result)
    remote = sorted({r[2] for r in rows if r[5]})
    print("requests with a remote image:", remote)
    assert result[(OPENAI_HOST, "exact")][1] <= 0.03
    assert table(rows)[(OPENAI_HOST, "full")][1] <= 0.10  # the heuristic, remote image included
    assert table(rows)[(ANTHROPIC_HOST, "full")][1] <= 0.15
    assert remote == ["openai-openllmetry/test_vision__test_vision.yaml"]


def test_no_request_of_100_tokens_is_badly_under_counted(rows):
    # a remote image's size is unknowable before the call: such an estimate says
    # complete=false and the estimator learns the model's tokens per image (test_unknown_parts)
    under = [r for r in rows if r[3] >= 100 and (r[3] - r[4]) / r[3] > 0.25 and not r[5]]
    assert under == []


def _both(request, encoding) -> tuple[int, int]:
    """(heuristic, tiktoken) counts of the same rendering."""
    preamble, messages = render_request(request)
    for message in messages:
        preamble.add(message)
    h_counted, fixed = _count(preamble, None)
    e_counted, _ = _count(preamble, encoding)
    return h_counted + fixed, e_counted + fixed


def test_corpus_heuristic_against_tiktoken(encoding):
    errors = {}
    print(f"\n{'request':<36} {'heuristic':>9} {'tiktoken':>9} {'error':>7}")
    for name, request in corpus().items():
        heuristic, exact = _both(request, encoding)
        errors[name] = (heuristic - exact) / exact
        print(f"{name:<36} {heuristic:>9} {exact:>9} {errors[name]:>7.1%}")
    mean = sum(abs(e) for e in errors.values()) / len(errors)
    print(f"mean |error| {mean:.2%}")
    assert mean <= 0.08
    assert abs(errors["4 parallel tool calls (seed 003)"]) <= 0.15


def test_seed_four_tool_calls_are_not_under_counted(encoding):
    """Seed 003's bug: content plus arguments only (the envelope skipped) under-counts."""
    request = corpus()["4 parallel tool calls (seed 003)"]
    heuristic, exact = _both(request, encoding)
    content_only = 10 + len(SEED_FOUR_CALLS["content"] or "") // 4  # the original estimate
    assert exact > 700  # the turn is hundreds of tokens, all in its tool calls
    assert content_only < exact / 50
    assert heuristic >= 0.85 * exact
