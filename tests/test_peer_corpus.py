"""The peer corpus loads in place: every interaction its README describes is there, with the
status the README gives (what the SDK and estimate tests replay and score against)."""

from __future__ import annotations

from . import peer


def test_every_readme_row_is_a_recorded_interaction_with_its_status():
    peer.require()
    truths = peer.truths()
    assert len(truths) > 700
    for truth in truths:
        assert peer.interaction(truth).status == truth.status, truth.key
    assert sum(1 for t in truths if t.usage) > 400
