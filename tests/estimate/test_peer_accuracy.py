"""The pre-call estimate on real requests: every request of the peer corpus with billed input
(OpenAI chat, Responses, Anthropic messages; 718), compared with the input the API billed
(cache included), measured twice (see :mod:`.peer_rows`): the estimator driven directly, and
the product itself, each recording replayed through the real clients with otel_tokens
installed and the estimate read from the spans. Prints median and p90 |error| by category
and endpoint (the README quotes them) and checks the targets of issues 22 and 31."""

from __future__ import annotations

import functools

import pytest

from .. import peer
from . import peer_rows

#: p90 |error| targets by category; the median over all requests must be at most 5%
TARGETS = {"all": 0.25, "text": 0.10, "tools": 0.30, "reasoning models": 0.30, "images": 0.40,
           "audio, PDF, files": 0.40}  # fmt: skip
MEDIAN_TARGET = 0.05


def _misses(table: dict[str, tuple[int, float, float]], names=TARGETS) -> dict[str, str]:
    misses = {}
    if table["all"][1] > MEDIAN_TARGET:
        misses["all (median)"] = f"{100 * table['all'][1]:.1f}% > {100 * MEDIAN_TARGET:.0f}%"
    for name in names:
        if table[name][2] > TARGETS[name]:
            misses[name] = f"p90 {100 * table[name][2]:.1f}% > {100 * TARGETS[name]:.0f}%"
    return misses


@functools.lru_cache(maxsize=1)
def _measured() -> tuple[list[peer_rows.Row], list[peer_rows.Row]]:
    files = peer_rows.by_file()
    return peer_rows.direct(files), peer_rows.replayed(files)


def test_the_product_estimates_as_the_estimator_does_and_complete_ones_meet_the_targets(capsys):
    peer.require()
    direct, replayed = _measured()
    complete = [r for r in replayed if r.complete]
    by_replay = peer_rows.table(replayed)
    with capsys.disabled():
        title = "estimate |error| on the peer corpus, replayed through the real clients"
        print("\n" + peer_rows.render(title, by_replay))
        print(peer_rows.render("those that say they are complete", peer_rows.table(complete)))
        far = [r for r in replayed if abs(r.error) > TARGETS["all"]]
        print(f"  beyond 25%: {len(far)}, {sum(not r.complete for r in far)} of them marked "
              f"estimate.complete=false")  # fmt: skip
    # the product estimates every request as the estimator does: the same figures, also
    # after calls billed with iterations apart (the delta builds on the message's own input)
    assert len(replayed) == len(direct) == 718
    assert [(r.file, r.error) for r in replayed] == [(r.file, r.error) for r in direct]
    assert len(complete) >= 0.8 * len(replayed)  # "incomplete" stays the exception it is
    assert not _misses(peer_rows.table(complete)), _misses(peer_rows.table(complete))
    assert not _misses(by_replay, ("text", "images")), _misses(by_replay, ("text", "images"))


@pytest.mark.xfail(strict=True, reason=(
    "not met (issue 31): p90 over every request, with tools, of reasoning models and with "
    "files. Most far misses are requests whose tools the provider runs itself (web search, "
    "code execution, MCP...): their results are billed as input within the call, unknown "
    "before it; those estimates say complete=false"))  # fmt: skip
def test_every_estimate_meets_the_targets():
    peer.require()
    _, replayed = _measured()
    assert not _misses(peer_rows.table(replayed)), _misses(peer_rows.table(replayed))
