"""Per-call cost of the HTTP layer, beside the openai SDK capture, on the same calls.

The real ``openai`` client against a mock transport (no network; its HTTP client is httpx2,
whose ``send`` the HTTP layer wraps), the SDK set up as an application has it (see
``overhead.py``, whose set-up, bodies and transport are reused). Variants, run interleaved
round after round, medians reported:

* ``plain``: nothing installed;
* ``sdk``: the openai SDK capture (what ``instrument()`` records openai with);
* ``http``: the HTTP layer alone (the openai capture off): the call recorded by its wire format;
* ``both``: both installed, as under ``instrument()``: the SDK records, the HTTP layer passes;
* ``pass``: a POST that is not a model call (``/v1/files``), plain and with the HTTP layer:
  what every other request of the program pays.

Run by hand:  python benchmarks/http_layer.py [--calls N] [--rounds R]
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]  # this checkout's otel_tokens, then overhead.py

from overhead import MESSAGES, handler, http, openai, setup_sdk

import otel_tokens
from otel_tokens.capture.http import http_patches
from otel_tokens.capture.sdk import openai as openai_sdk


def timed(client: Any, kind: str, n: int) -> float:
    """Mean of ``n`` calls of ``kind``, in microseconds per call."""
    start = time.perf_counter()
    for _ in range(n):
        if kind == "call":
            client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
        elif kind == "other":
            client._client.post("https://api.openai.com/v1/files", json={"purpose": "batch"})
        else:
            content = "long" if kind == "stream201" else "short"
            for _chunk in client.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": content}],
                stream=True,
                stream_options={"include_usage": True},
            ):
                pass
    return (time.perf_counter() - start) / n * 1e6


def _variants() -> dict[str, tuple[Callable[[], Any], ...]]:
    """name -> (install, ...): what each variant has installed."""
    return {
        "plain": (),
        "sdk": (openai_sdk.install,),
        "http": (http_patches.install,),
        "both": (openai_sdk.install, http_patches.install),
    }


def _run(client: Any, tp: Any, kinds: dict[str, int], rounds: int) -> dict[tuple[str, str], float]:
    results: dict[tuple[str, str], list[float]] = {}
    variants = _variants()
    for round_ in range(rounds + 1):  # the first round warms up (caches, prices): not kept
        for name, installs in variants.items():
            for install in installs:
                install()
            for kind, n in kinds.items():
                if kind == "other" and name not in ("plain", "http"):
                    continue
                took = timed(client, kind, n if round_ else 20)
                tp.force_flush()  # export between blocks, untimed
                if round_:
                    results.setdefault((kind, name), []).append(took)
            openai_sdk.uninstall()
            http_patches.uninstall()
    return {key: statistics.median(values) for key, values in results.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    tp = setup_sdk()
    client = openai.OpenAI(
        api_key="bench",
        max_retries=0,
        http_client=http.Client(transport=http.MockTransport(handler)),
    )
    kinds = {
        "call": args.calls,
        "other": args.calls,
        "stream1": args.calls // 2,
        "stream201": max(20, args.calls // 40),
    }
    with otel_tokens.agent("bench", max_input_tokens=128_000):
        med = _run(client, tp, kinds, args.rounds)
    print(
        f"openai {openai.__version__} on {http.__name__}, median of {args.rounds} interleaved "
        "rounds (microseconds added to the plain client)"
    )
    plain = {kind: med[(kind, "plain")] for kind in kinds}
    print(f"  {'':<26} {'plain':>8} {'sdk':>8} {'http':>8} {'both':>8}")
    for kind, label in (
        ("call", "non-streamed call"),
        ("stream1", "streamed call, 1 chunk"),
        ("stream201", "streamed call, 201 chunks"),
    ):
        added = [med[(kind, v)] - plain[kind] for v in ("sdk", "http", "both")]
        print(f"  {label:<26} {plain[kind]:8.1f} " + " ".join(f"{a:8.1f}" for a in added))
    for variant in ("sdk", "http", "both"):
        chunk = (
            (med[("stream201", variant)] - plain["stream201"])
            - (med[("stream1", variant)] - plain["stream1"])
        ) / 200
        print(f"  {variant}: added per streamed chunk {chunk:.2f} us")
    print(
        f"  a POST that is not a model call: {plain['other']:.1f} us plain, "
        f"{med[('other', 'http')] - plain['other']:+.1f} us with the HTTP layer"
    )


if __name__ == "__main__":
    main()
