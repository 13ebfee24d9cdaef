"""A runnable tour of the accounting core: two agents, a stream, a rollback, statistics, then
one call recorded as an instrumented client records it, summed up at exit.

Run: python examples/quickstart.py   (no API key, no network; `otel-tokens demo` runs real
client libraries against a local server). The table at the end is the at-exit summary
(OTEL_TOKENS_SUMMARY_AT_EXIT=1), printed on stderr when the program ends.
"""

from __future__ import annotations

import os

import otel_tokens
from otel_tokens import Estimate, Usage

os.environ.setdefault("OTEL_TOKENS_SUMMARY_AT_EXIT", "1")  # the table at exit
os.environ.setdefault("OTEL_METRICS_EXPORTER", "none")  # a tour: no /metrics port


def main() -> None:
    with otel_tokens.agent("planner", max_input_tokens=128_000) as planner:
        # A non-streamed call: the backend reported every class, cache and reasoning included.
        usage = Usage(input_tokens=12_000, output_tokens=900, cache_read_tokens=8_000,
                      reasoning_tokens=300, model="gpt-4o", provider="openai")
        planner.state.complete(usage)
        planner.ledger.append(usage, cost_usd=0.0213)

        # A streamed call: an estimate while it streams, replaced by the actual at the end.
        stream = planner.state.start_streaming(Estimate(14_500, "delta"))
        shown = planner.state.display()
        print(f"streaming: {shown.tokens} tokens ({shown.percent:.1f}% of context, estimate)")
        planner.ledger.stream_update("call-2", Usage(input_tokens=14_200, output_tokens=1))
        planner.ledger.stream_update("call-2", Usage(input_tokens=14_200, output_tokens=640))
        final = Usage(input_tokens=14_200, output_tokens=640, model="gpt-4o", provider="openai")
        planner.state.complete(final, stream)
        planner.ledger.stream_finalize("call-2", final, cost_usd=0.0419)
        shown = planner.state.display()
        print(f"completed: {shown.tokens} tokens ({shown.percent:.1f}% of context, actual)")

    with otel_tokens.agent("coder") as coder:
        checkpoint = coder.ledger.checkpoint()
        for n in range(3):
            usage = Usage(input_tokens=3_000 + n * 500, output_tokens=200, model="claude-sonnet-4",
                          provider="anthropic")
            coder.state.complete(usage)
            coder.ledger.append(usage, cost_usd=0.012 + n * 0.001)
        coder.ledger.restore(checkpoint)  # the conversation was rewound: cumulative follows
        print(f"coder after rollback: {coder.ledger.cumulative.requests} requests in the "
              f"timeline, {coder.ledger.lifetime.requests} in its lifetime "
              f"({coder.ledger.lifetime.input_tokens} input tokens)")

    print(f"\n{'agent':<8} {'turns':>5} {'input':>8} {'output':>7} {'cost USD':>9}")
    for entry in otel_tokens.agents():
        totals = entry.ledger.lifetime
        cost = f"{totals.cost_usd:.4f}" if totals.cost_usd is not None else "-"
        print(f"{entry.name:<8} {entry.state.turn_count:>5} {totals.input_tokens or 0:>8} "
              f"{totals.output_tokens or 0:>7} {cost:>9}")
    stats = otel_tokens.agents()[0].ledger.statistics()["input_tokens"]
    print(f"\nplanner input tokens per request: p50 {stats.p50:.0f}, p95 {stats.p95:.0f}")
    record_one_call()


def record_one_call() -> None:
    """One call through the path every instrumented client takes: priced, on the metrics,
    and in the summary printed at exit."""
    otel_tokens.configure()
    with otel_tokens.agent("reviewer"):
        call = otel_tokens.start_call(
            operation="chat",
            provider="openai",
            request_model="gpt-4o",
            server_address="api.openai.com",
        )
        with call.activate():
            usage = Usage(input_tokens=2_000, output_tokens=500, provider="openai")
        call.stop(usage, response_model="gpt-4o", response_id="chatcmpl-quickstart")


if __name__ == "__main__":
    main()
