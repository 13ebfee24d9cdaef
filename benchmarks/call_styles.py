"""Instructions otel_tokens adds per call in each call style, against the plain ``create``.

The issue-19 paths (``with_raw_response``, ``with_streaming_response`` parsed, read whole or
iterated by lines) must cost within 10% of what instrumenting a plain ``create`` (or a plain
``stream=True`` iteration) costs. Same harness as ``benchmarks/instructions.py``: the real
``openai`` client on a mock transport, the OpenTelemetry SDK with a batch span processor and a
periodic reader, callgrind counts; per call = (I(n2) - I(n1)) / (n2 - n1), minus the bare
client's figure for the same style, mean over hash seeds. Run by hand (needs valgrind;
~10 min):
    python benchmarks/call_styles.py [--seeds 1,2] [--calls 20,120]
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import instructions as harness  # noqa: E402  (the shared callgrind harness)

MESSAGES = [{"role": "user", "content": "Say this is a test"}]
STREAM = {"stream": True, "stream_options": {"include_usage": True}}

#: style -> (what it is, the plain style it is compared with)
STYLES = {
    "create": ("create()", None),
    "raw_parse": ("with_raw_response.create().parse()", "create"),
    "streaming_parse": ("with_streaming_response.create(): parse()", "create"),
    "streaming_read": ("with_streaming_response.create(): read()", "create"),
    "stream": ("create(stream=True), iterated", None),
    "raw_stream": ("with_raw_response.create(stream=True).parse(), iterated", "stream"),
    "streaming_lines": ("with_streaming_response.create(stream=True): iter_lines()", "stream"),
}


def _one(client, style: str) -> None:  # type: ignore[no-untyped-def]
    chat = client.chat.completions
    if style == "create":
        chat.create(model="gpt-4o-mini", messages=MESSAGES)
    elif style == "raw_parse":
        chat.with_raw_response.create(model="gpt-4o-mini", messages=MESSAGES).parse()
    elif style in ("streaming_parse", "streaming_read"):
        with chat.with_streaming_response.create(model="gpt-4o-mini", messages=MESSAGES) as response:
            response.parse() if style == "streaming_parse" else response.read()
    elif style == "stream":
        for _ in chat.create(model="gpt-4o-mini", messages=MESSAGES, **STREAM):
            pass
    elif style == "raw_stream":
        for _ in chat.with_raw_response.create(model="gpt-4o-mini", messages=MESSAGES, **STREAM).parse():
            pass
    elif style == "streaming_lines":
        with chat.with_streaming_response.create(model="gpt-4o-mini", messages=MESSAGES, **STREAM) as response:
            for _ in response.iter_lines():
                pass


def worker(variant: str, style: str, n: int) -> None:
    gc.disable()  # from the start (see instructions.py); settle() collects once
    sys.path.insert(0, harness.ROOT)
    os.environ.setdefault("OTEL_TOKENS_PROMETHEUS_PORT", "0")
    harness._sdk()
    client = harness._client()
    if variant == "otel_tokens":
        import otel_tokens

        otel_tokens.instrument()
    for _ in range(30):
        _one(client, style)
    harness.settle()  # the background warm-up is over, then one collection, before counting
    for _ in range(n):
        _one(client, style)


def _count(variant: str, style: str, n: int, seed: int) -> int:
    import re
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONHASHSEED"] = str(seed)
    out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                          sys.executable, __file__, "--worker", variant, style, str(n)],
                         capture_output=True, text=True, env=env, check=False)  # fmt: skip
    found = re.search(r"Collected : (\d+)", out.stderr)
    if out.returncode != 0 or found is None:
        raise RuntimeError(f"{variant} {style} {n}: {out.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--calls", default="20,120")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], args.worker[1], int(args.worker[2]))
        return
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    seeds = [int(s) for s in args.seeds.split(",")]
    n1, n2 = (int(c) for c in args.calls.split(","))
    started = time.monotonic()
    added = {}
    for style in STYLES:
        per = {}
        for variant in ("bare", "otel_tokens"):
            per[variant] = sum((_count(variant, style, n2, s) - _count(variant, style, n1, s)) / (n2 - n1)
                               for s in seeds) / len(seeds)  # fmt: skip
        added[style] = per["otel_tokens"] - per["bare"]
    print(f"instructions otel_tokens adds per call, by call style (callgrind, mean of seeds {seeds})")
    for style, (what, plain) in STYLES.items():
        ratio = f"   {added[style] / added[plain]:5.2f} x {plain}" if plain else ""
        print(f"  {what:<60} {added[style]:>10,.0f}{ratio}")
    print(f"  ({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
