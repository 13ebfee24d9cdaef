"""A small instrumented workload for tests that need a whole process: configure(), then calls
through the handler covering every metric of the contract. Prints one JSON line describing the
set-up, then waits until stdin closes (so a test can scrape /metrics meanwhile)."""

from __future__ import annotations

import json
import sys

import otel_tokens
from otel_tokens import Estimate, Usage


def run() -> dict:
    setup = otel_tokens.configure(service_name="workload")
    otel_tokens.instrument()
    handler = otel_tokens.get_handler()

    def call(usage, model="gpt-4o", stream=False, estimate=None, error=None):
        c = handler.start(operation="chat", provider="openai", request_model=model,
                                stream=stream, server_address="api.openai.com",
                                estimate=estimate)  # fmt: skip
        if stream:
            c.first_chunk()
        if error is not None:
            c.fail(error)
        else:
            c.stop(usage, response_model=model)

    with otel_tokens.agent("planner", max_input_tokens=128_000):
        for _ in range(25):  # warm-up for spike detection
            call(Usage(input_tokens=1000, output_tokens=100, cache_read_tokens=200,
                       cache_write_tokens=50, reasoning_tokens=20),
                 stream=True, estimate=Estimate(900, "full"))  # fmt: skip
        call(Usage(input_tokens=900_000, output_tokens=100))  # a token spike
        call(Usage(input_tokens=10, output_tokens=1), model="private-model-unpriced")
        call(None, error=TimeoutError("timed out"))
        call(None)  # no usage reported: an instrumentation error
    with otel_tokens.agent("copilot"):
        call(Usage(output_tokens=500, premium_requests=1.5, cost_usd=0.02, source="parsed_text"),
             model="claude-sonnet-4")  # fmt: skip
    return {"metrics": setup.metrics, "traces": setup.traces, "url": setup.prometheus_url,
            "own": setup.own_providers}  # fmt: skip


if __name__ == "__main__":
    print(json.dumps(run()), flush=True)
    sys.stdin.read()
