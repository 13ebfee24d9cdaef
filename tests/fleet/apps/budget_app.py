"""A worker under a fleet budget: THREADS threads call the fake LLM at FAKE_LLM_URL on the real
openai client, as agent ``worker`` for tenant ``acme`` and user ``ann``, until otel_tokens
refuses a call with BudgetExceeded (at most CALLS each); MAX_TOKENS, when set, is sent as the
request's ``max_tokens`` (a number when it reads as one, else as given). Prints the calls made,
the refusals and what the first refusal said."""

import os
import threading

import otel_tokens

otel_tokens.configure()
otel_tokens.instrument()
# the exact tokenizer before the first call (else the background warm-up may not have
# loaded it yet, and the estimate, so the reservation, is the heuristic's)
from otel_tokens.account.estimate import warm_up  # noqa: E402

warm_up()

import openai

URL = os.environ["FAKE_LLM_URL"]
THREADS = int(os.environ.get("THREADS", "4"))
CALLS = int(os.environ.get("CALLS", "1000"))
LIMIT = os.environ.get("MAX_TOKENS")
EXTRA = {} if LIMIT is None else {"max_tokens": int(LIMIT) if LIMIT.isdigit() else LIMIT}
made, refused, other = [], [], []


def work() -> None:
    client = openai.OpenAI(base_url=URL, api_key="k", max_retries=0)
    for _ in range(CALLS):
        try:
            with otel_tokens.agent("worker", tenant="acme", user="ann"):
                client.chat.completions.create(model="gpt-4o-mini", user="acme", **EXTRA,
                                               messages=[{"role": "user", "content": "hello"}])
        except otel_tokens.BudgetExceeded as exc:
            refused.append(exc.anomaly)
            return
        except Exception as exc:  # noqa: BLE001
            other.append(repr(exc))
            return
        made.append(1)


threads = [threading.Thread(target=work) for _ in range(THREADS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
first = refused[0] if refused else None
print(f"calls={len(made)} refused={len(refused)} errors={other}", flush=True)
if first is not None:
    print(f"refusal budget={first.agent} observed={first.observed!r} limit={first.threshold!r}",
          flush=True)
