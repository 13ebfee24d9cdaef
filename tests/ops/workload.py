"""An instrumented workload for the ops tests: configure() with the embedded Prometheus /metrics
(port from OTEL_TOKENS_PROMETHEUS_PORT, 0 = free), then rounds of calls through the real handler,
for two agents, covering every metric of the telemetry contract: priced and unpriced models
(and a self-hosted one, unpriced by design),
streaming with estimates, reported cost and premium requests, an agent-CLI run without a
request model, failures, a missing usage (an instrumentation error) and a token spike (an
anomaly).

    workload.py            long-running: prints one JSON line (set-up and /metrics URL) after
                           the first round, then keeps going until stdin closes or MAX_SECONDS
                           pass. Lines on stdin: "pause", "resume", "truth" (prints what the
                           process recorded so far, as JSON).
    workload.py --rounds N [--seed S]
                           a short run: N rounds, then one JSON line with the set-up and what
                           it recorded; exits when stdin closes (the test closes it once
                           Prometheus has scraped it).

"What it recorded" is the process's own account, read in process: every counter's sums by
attribute set (the recorder's CounterSums, the Prometheus label names), the calls it made by
their metric attributes, and, as a cross-check, the agents' ledgers.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any

import otel_tokens
from otel_tokens import Estimate, Usage

MAX_SECONDS = 300
ROUND_SECONDS = 0.2
AGENTS = {"planner": 128_000, "coder": 200_000}
#: Prometheus names of the recorder's counters
COUNTERS = {"tokens": "otel_tokens_tokens_total", "cost": "otel_tokens_cost_USD_total",
            "premium_requests": "otel_tokens_premium_requests_total",
            "anomalies": "otel_tokens_anomalies_total",
            "unpriced": "otel_tokens_unpriced_requests_total",
            "usage_missing": "otel_tokens_usage_missing_total",
            "errors": "otel_tokens_instrumentation_errors_total"}  # fmt: skip
REQUESTS = "gen_ai_client_operation_duration_seconds_count"

_lock = threading.Lock()
_calls: dict[tuple, int] = {}  # the calls made, by their duration-histogram attributes


def _count(agent: str, provider: str, operation: str, request_model: str | None,
           response_model: str | None, error: str | None) -> None:  # fmt: skip
    key = (("gen_ai_agent_name", agent), ("gen_ai_provider_name", provider),
           ("gen_ai_operation_name", operation), ("gen_ai_request_model", request_model or ""),
           ("gen_ai_response_model", response_model or ""), ("error_type", error or ""))  # fmt: skip
    with _lock:
        _calls[key] = _calls.get(key, 0) + 1


def call(handler, agent, usage, model="gpt-4o", provider="openai", stream=False, estimate=None,
         error=None, operation="chat", response_model=None):  # fmt: skip
    request_model = model if operation == "chat" else None
    answered = response_model or model
    c = handler.start(operation=operation, provider=provider, request_model=request_model,
                      stream=stream, server_address="api.example.test", estimate=estimate)  # fmt: skip
    if stream:
        c.first_chunk()
    if error is not None:
        c.fail(error)
        _count(agent, provider, operation, request_model, None, type(error).__qualname__)
    else:
        c.stop(usage, response_model=answered)
        _count(agent, provider, operation, request_model, answered, None)


def one_round(handler, n: int, scale_base: int = 0) -> None:
    for agent, window in AGENTS.items():
        with otel_tokens.agent(agent, max_input_tokens=window):
            scale = 1 + ((n + scale_base) % 5)
            call(handler, agent, Usage(input_tokens=1000 * scale, output_tokens=100 * scale,
                                       cache_read_tokens=200 * scale, cache_write_tokens=50,
                                       reasoning_tokens=20 * scale),
                 stream=True, estimate=Estimate(900 * scale, "full"))  # fmt: skip
            call(handler, agent, Usage(input_tokens=3000, output_tokens=300, cache_read_tokens=1000),
                 model="claude-sonnet-4", provider="anthropic", stream=True,
                 estimate=Estimate(3100, "delta"))  # fmt: skip
            call(handler, agent, Usage(input_tokens=10, output_tokens=1), model="private-model-unpriced")
            # a self-hosted server (Ollama on localhost): unpriced by design, not "unpriced"
            call(handler, agent, Usage(input_tokens=20, output_tokens=2), model="llama3",
                 provider="localhost")
            # an agent-CLI run without --model: no request model, answered by claude-sonnet-4
            call(handler, agent, Usage(input_tokens=4000, output_tokens=500, premium_requests=1.0,
                                       cost_usd=0.02, source="parsed_text"),
                 model="claude-sonnet-4", provider="github_copilot", operation="invoke_agent")  # fmt: skip
            call(handler, agent, None, error=TimeoutError("timed out"))
            call(handler, agent, None)  # no usage reported: usage missing, and a fault of the data
            if n == 10:
                call(handler, agent, Usage(input_tokens=900_000, output_tokens=100))  # a token spike


def truth(setup) -> dict[str, Any]:
    """What this process recorded, as Prometheus series: [{metric, labels, value}]."""
    handler = otel_tokens.get_handler()
    resource = dict(setup.tracer_provider.resource.attributes)
    common = {"service_name": resource.get("service.name", ""),
              "service_instance_id": resource.get("service.instance.id", ""),
              "deployment_environment_name": resource.get("deployment.environment.name", "")}  # fmt: skip
    rows = []
    for field, metric in COUNTERS.items():
        sums = getattr(handler.recorder.instruments, field)
        for obs in sums.observe():
            labels = {k.replace(".", "_"): str(v) for k, v in (obs.attributes or {}).items()}
            rows.append({"metric": metric, "labels": {**common, **labels}, "value": obs.value})
    with _lock:
        calls = list(_calls.items())
    rows += [{"metric": REQUESTS, "labels": {**common, **dict(key)}, "value": n} for key, n in calls]
    ledger = {"cost_usd": 0.0, "input_tokens": 0, "output_tokens": 0}
    for entry in otel_tokens.agents():
        totals = entry.ledger.cumulative
        ledger["cost_usd"] += totals.cost_usd or 0
        ledger["input_tokens"] += totals.input_tokens or 0
        ledger["output_tokens"] += totals.output_tokens or 0
    return {"time": time.time(), "instance": common["service_instance_id"], "rows": rows,
            "ledger": ledger}  # fmt: skip


def long_running(setup, handler) -> None:
    """Rounds until stdin closes; "pause"/"resume"/"truth" lines steer it."""
    stop, running = threading.Event(), threading.Event()
    running.set()

    def commands() -> None:
        for line in sys.stdin:
            word = line.strip()
            if word == "pause":
                running.clear()
                time.sleep(ROUND_SECONDS * 2)  # a round in flight has ended
                print(json.dumps({"paused": True}), flush=True)
            elif word == "resume":
                running.set()
            elif word == "truth":
                print(json.dumps(truth(setup)), flush=True)
        stop.set()

    threading.Thread(target=commands, daemon=True).start()
    deadline = time.monotonic() + MAX_SECONDS
    n = 1
    while not stop.wait(ROUND_SECONDS) and time.monotonic() < deadline:
        if running.is_set():
            one_round(handler, n)
            n += 1


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=0, help="a short run of N rounds")
    parser.add_argument("--seed", type=int, default=0, help="varies a short run's usage")
    args = parser.parse_args()
    setup = otel_tokens.configure(service_name=None if args.rounds else "otel-tokens-ops-workload")
    otel_tokens.instrument()
    handler = otel_tokens.get_handler()
    if args.rounds:
        for n in range(args.rounds):
            one_round(handler, n + 1, scale_base=args.seed)
        print(json.dumps({"url": setup.prometheus_url, **truth(setup)}), flush=True)
        sys.stdin.read()  # until the test saw it scraped
    else:
        one_round(handler, 0)
        print(json.dumps({"metrics": setup.metrics, "url": setup.prometheus_url}), flush=True)
        long_running(setup, handler)
    setup.shutdown()


if __name__ == "__main__":
    main()
