"""Token estimation: heuristic throughput vs tiktoken, and the accuracy tables.

Target (issue: estimation): the heuristic >= 10x faster than tiktoken on the agent-style
corpus; accuracy as asserted by tests/estimate/test_accuracy.py (printed here too).
Variants run interleaved, medians reported. Run by hand:  python benchmarks/estimate.py
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import tempfile
import time
import zlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from otel_tokens.account.estimate import Estimator  # noqa: E402
from otel_tokens.account.estimate.requests import render_request  # noqa: E402
from otel_tokens.account.estimate.text import heuristic_tokens  # noqa: E402
from otel_tokens.account.estimate.text import encoding_for  # noqa: E402
from tests.estimate.corpus import corpus  # noqa: E402
from tests.tokenizer_data import load_encodings  # noqa: E402


def corpus_texts() -> list[str]:
    texts = []
    for request in corpus().values():
        preamble, messages = render_request(request)
        for rendering in (preamble, *messages):
            texts.extend(t for t in rendering.texts if t)
    return texts


def request_texts() -> list[str]:
    """Each corpus request's texts joined, as the estimator counts them (one call each)."""
    out = []
    for request in corpus().values():
        preamble, messages = render_request(request)
        for rendering in messages:
            preamble.add(rendering)
        out.append("\n".join(t for t in preamble.texts if t))
    return out


def throughput(rounds: int, repeat: int) -> None:
    encoding = encoding_for("gpt-4o")
    counters = {
        "heuristic": heuristic_tokens,
        "tiktoken o200k": lambda t: len(encoding.encode(t, disallowed_special=())),
    }
    joined = request_texts()
    cases = {
        "per message text": (corpus_texts(), repeat),
        "per request (joined)": (joined, repeat),
        "one large text": (["\n".join(joined) * 20], max(1, repeat // 20)),
    }
    print(f"throughput, median of {rounds} interleaved rounds; target: heuristic >= 10x tiktoken")
    for case, (texts, n) in cases.items():
        size = sum(len(t.encode()) for t in texts)
        results: dict[str, list[float]] = {name: [] for name in counters}
        for _ in range(rounds):
            for name, count in counters.items():
                start = time.perf_counter()
                for _ in range(n):
                    for text in texts:
                        count(text)
                results[name].append((time.perf_counter() - start) / n)
        med = {name: statistics.median(v) for name, v in results.items()}
        rates = "  ".join(f"{name} {size / sec / 1e6:6.1f} MB/s" for name, sec in med.items())
        print(f"  {case:<22} {len(texts):>3} texts, {size / 1e3:7.1f} kB: {rates}  "
              f"speed-up {med['tiktoken o200k'] / med['heuristic']:.1f}x")  # fmt: skip
    requests = list(corpus().values())
    for name, estimator in (("Estimator (exact)", Estimator()),
                            ("Estimator (heuristic)", Estimator(use_tokenizer=False))):  # fmt: skip
        start = time.perf_counter()
        for _ in range(repeat):
            for request in requests:
                estimator.estimate(request, provider="openai")
        per = (time.perf_counter() - start) / (repeat * len(requests)) * 1e6
        print(f"  {name:<22} {per:7.1f} us per request estimate")


def accuracy() -> None:
    from tests.estimate import test_accuracy as acc

    rows = acc.cassette_rows()
    acc.print_table("cassettes: estimates vs the API's own input tokens", acc.table(rows))
    acc.print_table("cassettes without remote-URL images", acc.table([r for r in rows if not r[5]]))
    acc.test_corpus_heuristic_against_tiktoken(encoding_for("gpt-4o"))
    peer_corpus()


def _half(path: str) -> int:
    """The half of the recordings a file is in: a hash of its name (not of where it sits)."""
    return zlib.crc32(pathlib.Path(path).name.encode()) % 2


def peer_corpus() -> None:
    """The peer corpus's requests (tests/estimate/peer_rows.py, the estimator driven directly):
    by category, for the estimates that say they are complete, and on each half of the
    recordings (split by a hash of the file name: the held-out check of the constants)."""
    from tests.estimate import peer_rows

    files = peer_rows.by_file()
    if not files:
        print("peer corpus absent (../shared/fixtures/peer-cassettes)")
        return
    rows = peer_rows.direct(files)
    print(peer_rows.render("\npeer corpus, every request with billed input", peer_rows.table(rows)))
    complete = [r for r in rows if r.complete]
    print(peer_rows.render("the estimates that say they are complete", peer_rows.table(complete)))
    for half in (0, 1):
        part = {p: t for p, t in files.items() if _half(p) == half}
        title = f"half {'AB'[half]} of the recordings"
        print(peer_rows.render(title, peer_rows.table(peer_rows.direct(part))))


def _endpoint(uri: str) -> str | None:
    """The peer corpus's endpoint name of a recorded OpenAI/Anthropic call (None: another)."""
    from urllib.parse import urlparse

    url = urlparse(uri)
    path = url.path.rstrip("/")
    if url.hostname == "api.anthropic.com" and path.endswith("/v1/messages"):
        return "anthropic messages"
    if url.hostname == "api.openai.com" and path.endswith("/chat/completions"):
        return "openai chat"
    if url.hostname == "api.openai.com" and path.endswith("/v1/responses"):
        return "openai responses"
    return None


def _output_tokens(interaction) -> int | None:  # type: ignore[no-untyped-def]
    """A recorded non-streamed response's output tokens (a chained request builds on them)."""
    try:
        usage = interaction.response_json().get("usage") or {}
    except (ValueError, AttributeError):
        return None
    return usage.get("output_tokens") or usage.get("completion_tokens")


def folder_rows(folder: pathlib.Path, shared: bool = False) -> list:  # type: ignore[type-arg]
    """Rows of every OpenAI/Anthropic call recorded in ``folder``'s cassettes (recordings the
    constants were not fitted on: not in the repository, not in the shared corpus): one
    estimator per recording, or one for them all (``shared``: a long-lived process)."""
    from tests import cassettes
    from tests.estimate import peer_rows

    rows = []
    estimator = Estimator() if shared else None
    for path in sorted(folder.rglob("*.yaml")):
        calls = []
        for interaction in cassettes.load(path):
            endpoint = _endpoint(interaction.uri)
            if endpoint is not None:
                billed = cassettes.reported_input_tokens(interaction)
                calls.append((interaction, endpoint, billed, _output_tokens(interaction)))
        rows.extend(peer_rows.estimate_calls(path.name, calls, estimator))
    return rows


def spread(held_out: pathlib.Path | None) -> None:
    """Issue 48's figures (requests of 256 billed input tokens or more): the peer corpus, each
    half of it, and the recordings in ``held_out`` when given."""
    from tests.estimate import peer_rows

    files = peer_rows.by_file()
    if files:
        print(peer_rows.render_spread("\npeer corpus, >= 256 billed", peer_rows.spread(
            peer_rows.direct(files))))  # fmt: skip
        for half in (0, 1):
            part = {p: t for p, t in files.items() if _half(p) == half}
            print(peer_rows.render_spread(f"half {'AB'[half]} of the peer corpus, >= 256 billed",
                                          peer_rows.spread(peer_rows.direct(part))))  # fmt: skip
    if held_out is not None:
        for shared in (False, True):
            title = f"held out ({held_out}), >= 256 billed, " + (
                "one estimator for all (a long-lived process)" if shared
                else "one estimator per recording")  # fmt: skip
            print(peer_rows.render_spread(title, peer_rows.spread(folder_rows(held_out, shared))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--held-out", type=pathlib.Path, default=None,
                        help="a folder of recorded cassettes the constants were not fitted on")
    parser.add_argument("--accuracy-only", action="store_true", help="skip the throughput runs")
    args = parser.parse_args()
    load_encodings(pathlib.Path(tempfile.mkdtemp(prefix="tiktoken-")))
    if not args.accuracy_only:
        throughput(args.rounds, args.repeat)
        accuracy()
    spread(args.held_out)


if __name__ == "__main__":
    main()
