"""A continuous instrumented workload for the end-to-end ops test: configure() with the embedded
Prometheus /metrics (port from OTEL_TOKENS_PROMETHEUS_PORT, 0 = free), then rounds of calls
through the real handler, for two agents, covering every metric of the telemetry contract:
priced and unpriced models, streaming with estimates, reported cost and premium requests,
failures, a missing usage (an instrumentation error) and a token spike (an anomaly).

Prints one JSON line (the set-up and the /metrics URL) after the first round, then keeps going
until stdin closes or MAX_SECONDS pass, so a test can scrape it over time. Until the
`otel-tokens demo` command exists this stands in for it (tests/ops/test_e2e.py WORKLOAD).
"""

from __future__ import annotations

import json
import sys
import threading
import time

import otel_tokens
from otel_tokens import Estimate, Usage

MAX_SECONDS = 300
ROUND_SECONDS = 0.2
AGENTS = {"planner": 128_000, "coder": 200_000}


def call(handler, usage, model="gpt-4o", provider="openai", stream=False, estimate=None, error=None):
    c = handler.start(operation="chat", provider=provider, request_model=model, stream=stream,
                            server_address="api.example.test", estimate=estimate)  # fmt: skip
    if stream:
        c.first_chunk()
    if error is not None:
        c.fail(error)
    else:
        c.stop(usage, response_model=model)


def one_round(handler, n: int) -> None:
    for agent, window in AGENTS.items():
        with otel_tokens.agent(agent, max_input_tokens=window):
            scale = 1 + (n % 5)
            call(handler, Usage(input_tokens=1000 * scale, output_tokens=100 * scale,
                                 cache_read_tokens=200 * scale, cache_write_tokens=50,
                                 reasoning_tokens=20 * scale),
                 stream=True, estimate=Estimate(900 * scale, "full"))  # fmt: skip
            call(handler, Usage(input_tokens=3000, output_tokens=300, cache_read_tokens=1000),
                 model="claude-sonnet-4", provider="anthropic", stream=True,
                 estimate=Estimate(3100, "delta"))  # fmt: skip
            call(handler, Usage(input_tokens=10, output_tokens=1), model="private-model-unpriced")
            call(handler, Usage(output_tokens=500, premium_requests=1.0, cost_usd=0.02,
                                 source="parsed_text"), model="claude-sonnet-4", provider="github_copilot")  # fmt: skip
            call(handler, None, error=TimeoutError("timed out"))
            call(handler, None)  # no usage reported: an instrumentation error
            if n == 10:
                call(handler, Usage(input_tokens=900_000, output_tokens=100))  # a token spike


def main() -> None:
    setup = otel_tokens.configure(service_name="otel-tokens-ops-workload")
    otel_tokens.instrument()
    handler = otel_tokens.get_handler()
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    one_round(handler, 0)
    print(json.dumps({"metrics": setup.metrics, "url": setup.prometheus_url}), flush=True)
    deadline = time.monotonic() + MAX_SECONDS
    n = 1
    while not stop.wait(ROUND_SECONDS) and time.monotonic() < deadline:
        one_round(handler, n)
        n += 1
    setup.shutdown()


if __name__ == "__main__":
    main()
