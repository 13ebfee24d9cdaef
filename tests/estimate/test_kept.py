"""Plain chat messages counted from what the estimator keeps of them equal the joined count.

The estimator counts a request of plain chat messages (a role and a text) by adding up what it
keeps per message (heuristic features, tiktoken counts with and without a joining newline):
these tests hold it to the count of the request's texts joined, the way every other request
is counted, on recorded messages (the shared and peer cassettes, the committed corpus) and on
texts built to end and start at every kind of joint (punctuation, blanks, newlines, digits,
non-ASCII), for both encodings and the heuristic.
"""

from __future__ import annotations

import itertools

import pytest

from otel_tokens.account import estimate as estimate_module
from otel_tokens.account.estimate import Estimator, Request
from otel_tokens.account.estimate.requests import Rendering, render_request
from otel_tokens.account.estimate.text import (
    JOINER_TOKENS,
    LOADED,
    encoding_for,
    exact_tokens,
    heuristic_tokens,
)

from .. import cassettes, peer
from .corpus import CODE, LISTING, LOG, PROSE, corpus

#: texts whose ends meet a joining newline in every way a tokenizer's pattern treats apart
EDGES = [
    "Say this is a test", "Say this is a test.", "ends with a space ", "ends with tabs\t\t",
    "ends with a newline\n", "ends with two\n\n", "ends with CR\r", "digits 12345", "7",
    "'s", "it's", " leading space", "\nleading newline", "...", "!!!\n", "a/b/", "{}",
    "émigré café", "日本語のテキストです。", "emoji 🎉🎉", "mixed ascii and ü\n", " ", "x",
    "\u00a0nbsp\u00a0", "end with apostrophe'", "(parenthesis)", "line\r\n", "-->", "ends —",
    "a lone surrogate \ud83d", "\ud83d", "Ünïcödé start", "tab\tinside",
]
MODELS = {"o200k_base": "gpt-4o-mini", "cl100k_base": "gpt-4-0613"}


def _recorded() -> list[list[dict]]:
    """Every recorded OpenAI chat request's messages (shared and peer cassettes, corpus)."""
    files = cassettes.all_files() + sorted(peer.PEER.rglob("*.yaml"))
    found = [cassettes.request_of(it) for path in files for it in cassettes.load(path)
             if cassettes.api_of(it) == "openai_chat"]  # fmt: skip
    found += [r for r in corpus().values() if r.api == "openai_chat"]
    return [list(r.messages) for r in found if r is not None and r.messages]


def _plain(message: object) -> bool:
    return (type(message) is dict and len(message) == 2
            and type(message.get("role")) is str and type(message.get("content")) is str)


def _joined(request: Request, encoding) -> int:  # type: ignore[no-untyped-def]
    """The request counted as any request is: its texts joined, counted once."""
    preamble, messages = render_request(request)
    total = Rendering()
    for rendering in (preamble, *messages):
        total.add(rendering)
    texts = [t for t in total.texts if t]
    joined = "\n".join(texts)
    if encoding is not None:
        counted = exact_tokens(encoding, joined) - (len(texts) - 1)
    else:
        counted = max(heuristic_tokens(joined) - round((len(texts) - 1) * JOINER_TOKENS), 1)
    return counted + total.fixed


def _requests() -> list[list[dict]]:
    """Recorded requests, then their plain messages in windows and every pair of edge texts."""
    recorded = _recorded()
    plain = list(dict.fromkeys(
        (m["role"], m["content"]) for ms in recorded for m in ms if _plain(m)))  # fmt: skip
    plain += [(role, text) for role in ("user", "assistant", "system", "") for text in EDGES]
    plain += [("user", PROSE), ("assistant", CODE), ("tool", LOG), ("user", LISTING), ("", "x")]
    windows = [[{"role": r, "content": c} for r, c in (plain * 2)[i : i + 4]]
               for i in range(len(plain))]  # fmt: skip
    pairs = [[{"role": "user", "content": a}, {"role": "assistant", "content": b}]
             for a, b in itertools.product(EDGES, repeat=2)]  # fmt: skip
    return recorded + windows + pairs


@pytest.fixture(scope="module")
def requests() -> list[list[dict]]:
    return _requests()


def test_the_recorded_messages_are_among_them(requests):
    peer.require()
    cassettes.require()
    assert len([ms for ms in _recorded() if all(map(_plain, ms))]) >= 300


@pytest.mark.parametrize("name", [None, *MODELS])
def test_kept_counts_equal_the_joined_count(requests, name, monkeypatch):
    """Every request of plain messages counted by sums (no joined count made), and equal to it;
    the others (tool calls, content parts) counted joined as before."""
    model = MODELS.get(name, "gpt-4o-mini")
    encoding = encoding_for(model) if name else None
    assert name is None or encoding is not None and encoding.name == name
    joined_counts = []
    real_count = estimate_module._count
    monkeypatch.setattr(estimate_module, "_count",
                        lambda *a: joined_counts.append(1) or real_count(*a))  # fmt: skip
    summed = 0
    for messages in requests:
        request = Request("openai_chat", model, messages)
        before = len(joined_counts)
        for _ in range(2):  # kept now, then read from what is kept
            got = Estimator(use_tokenizer=name is not None).estimate(request, provider="openai")
            assert got.estimate.source == ("exact" if name else "full")
            assert got.estimate.input_tokens == _joined(request, encoding), messages
        plain = all(_plain(m) and m["role"][:1].isalpha() for m in messages)
        if plain and all(len(m["content"]) <= 4096 for m in messages):
            assert len(joined_counts) == before, "a plain request was counted joined"
            summed += 1
    assert summed > 500  # the sums were what was tested


@pytest.mark.parametrize("name", [None, "o200k_base"])
def test_a_delta_counts_the_appended_messages_as_joined(name):
    """A delta adds the appended messages' count, made from what is kept: the same as joined."""
    model = MODELS.get(name, "gpt-4o-mini")
    encoding = encoding_for(model) if name else None
    history = [{"role": "user" if i % 2 else "assistant", "content": text}
               for i, text in enumerate(EDGES)]  # fmt: skip
    for cut in range(1, len(history) - 1):
        estimator = Estimator(use_tokenizer=name is not None)
        first = estimator.estimate(Request("openai_chat", model, history[:cut]), provider="p")
        reported = first.estimate.input_tokens  # a calibration of 1 (for the heuristic)
        estimator.observe(first, reported)
        later = estimator.estimate(Request("openai_chat", model, history), provider="p")
        assert later.estimate.source == "delta"
        appended = _joined(Request("openai_chat", model, history[cut:]), encoding) - 3  # priming
        assert later.estimate.input_tokens == reported + appended
        assert later.fixed == 3 * (len(history) - cut)


def test_an_encoding_loaded_later_is_used_once_loaded(monkeypatch):
    """The encoding is looked up once per model, and again once another encoding loads."""
    request = Request("openai_chat", "gpt-4o-mini", [{"role": "user", "content": PROSE}])
    estimator = Estimator()
    loaded = LOADED.pop("o200k_base")
    try:
        assert estimator.estimate(request, provider="openai").estimate.source == "full"
    finally:
        LOADED["o200k_base"] = loaded
    monkeypatch.setattr(estimate_module, "encoding_for", lambda model: pytest.fail("looked up"))
    with pytest.raises(pytest.fail.Exception):  # one more encoding loaded: looked up again
        estimator.estimate(request, provider="openai")
    monkeypatch.undo()
    assert estimator.estimate(request, provider="openai").estimate.source == "exact"
    monkeypatch.setattr(estimate_module, "encoding_for", lambda model: pytest.fail("looked up"))
    assert estimator.estimate(request, provider="openai").estimate.source == "exact"


@pytest.mark.parametrize("name", [None, *MODELS])
def test_a_message_alone_is_counted_once_as_joined(name, monkeypatch):
    """A request of one plain message (a one-shot prompt, sent again and again) is counted
    once, kept with the message: the next ones read it, and every one equals the joined
    count."""
    model = MODELS.get(name, "gpt-4o-mini")
    encoding = encoding_for(model) if name else None
    texts = list(dict.fromkeys([*EDGES, PROSE, CODE, LOG]))
    counted = []
    real = estimate_module._summed
    monkeypatch.setattr(estimate_module, "_rendered", {})  # none kept by earlier tests
    monkeypatch.setattr(estimate_module, "_summed", lambda *a: counted.append(1) or real(*a))
    for role in ("user", "system", "assistant"):
        for text in texts:
            request = Request("openai_chat", model, [{"role": role, "content": text}])
            for _ in range(3):
                got = Estimator(use_tokenizer=name is not None).estimate(request, provider="p")
                assert got.estimate.input_tokens == _joined(request, encoding), text
    kept = [t for t in texts if len(t) <= 4096]  # a longer text is not kept
    assert len(kept) > 30
    assert len(counted) == 3 * len(kept)  # each counted the first time only
