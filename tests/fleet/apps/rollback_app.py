"""A worker that undoes part of its ledger: CALLS chat calls, one after the other, on the real
openai client to the fake LLM at FAKE_LLM_URL (as agent ``roller``, tenant ``tenant-<i mod 2>``,
also sent as the request's ``user``), then ``ledger.rollback_to_index(ROLL_TO)``; prints what
the rollback removed."""

import os

import otel_tokens

otel_tokens.configure()
otel_tokens.instrument()

import openai

client = openai.OpenAI(base_url=os.environ["FAKE_LLM_URL"], api_key="k", max_retries=0)
for call in range(int(os.environ.get("CALLS", "10"))):
    tenant = f"tenant-{call % 2}"
    with otel_tokens.agent("roller", tenant=tenant) as entry:
        client.chat.completions.create(model="gpt-4o-mini", user=tenant,
                                       messages=[{"role": "user", "content": "hello"}])
removed = entry.ledger.rollback_to_index(int(os.environ.get("ROLL_TO", "0")))
print(f"removed={len(removed)} input={sum(r.input_tokens for r in removed)}", flush=True)
