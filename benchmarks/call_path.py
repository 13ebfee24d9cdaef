"""How many otel_tokens functions one instrumented chat call runs through, and in how many files.

One non-streamed ``chat.completions.create`` through the real ``openai`` client against a mock
transport, after a warm-up; ``sys.setprofile`` counts every Python call (and generator resume)
whose code lives in the ``otel_tokens`` package. Run:  python benchmarks/call_path.py [-v]
"""

from __future__ import annotations

import collections
import json
import os
import pathlib
import sys

os.environ.setdefault("OTEL_TRACES_EXPORTER", "none")
os.environ.setdefault("OTEL_METRICS_EXPORTER", "none")

import openai  # noqa: E402

import otel_tokens  # noqa: E402

ROOT = pathlib.Path(otel_tokens.__file__).resolve().parent
COMPLETION = json.dumps({
    "id": "chatcmpl-path", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini-2024-07-18",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "This is a test."},
                 "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
}).encode()  # fmt: skip


def client() -> openai.OpenAI:
    import importlib

    base = importlib.import_module("openai._base_client")
    http = importlib.import_module("httpx2" if hasattr(base, "httpx2") else "httpx")
    transport = http.MockTransport(lambda request: http.Response(
        200, headers={"content-type": "application/json"}, content=COMPLETION))  # fmt: skip
    return openai.OpenAI(api_key="path", max_retries=0, http_client=http.Client(transport=transport))


def main() -> None:
    otel_tokens.configure()
    otel_tokens.instrument()
    c = client()
    messages = [{"role": "user", "content": "Say this is a test"}]
    for _ in range(3):  # warm-up: lazy imports, caches, price data
        c.chat.completions.create(model="gpt-4o-mini", messages=messages)
    calls: collections.Counter[tuple[str, str]] = collections.Counter()
    root = str(ROOT)

    def profile(frame, event, arg):  # type: ignore[no-untyped-def]
        if event == "call" and frame.f_code.co_filename.startswith(root):
            calls[(frame.f_code.co_filename, frame.f_code.co_name)] += 1

    sys.setprofile(profile)
    c.chat.completions.create(model="gpt-4o-mini", messages=messages)
    sys.setprofile(None)
    files = {path for path, _ in calls}
    print(f"otel_tokens calls per chat call: {sum(calls.values())} in {len(files)} files")
    if "-v" in sys.argv:
        for (path, name), n in sorted(calls.items()):
            print(f"  {n:3d}  {os.path.relpath(path, ROOT.parent)}:{name}")


if __name__ == "__main__":
    main()
