"""A runnable tour of the accounting core: two agents, a stream, a rollback, statistics.

Run: python examples/quickstart.py   (until the `otel-tokens demo` command lands, this is the
project's main job; it needs no API key and no network)
"""

from __future__ import annotations

import otel_tokens
from otel_tokens import Estimate, Usage


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


if __name__ == "__main__":
    main()
