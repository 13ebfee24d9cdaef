"""A worker under a fleet budget: THREADS threads call the fake LLM at FAKE_LLM_URL on the real
openai client, as agent ``worker`` for tenant ``acme``, until otel_tokens refuses a call with
BudgetExceeded (at most CALLS each); prints the calls made and the refusals."""

import os
import threading

import otel_tokens

otel_tokens.configure()
otel_tokens.instrument()

import openai

URL = os.environ["FAKE_LLM_URL"]
THREADS = int(os.environ.get("THREADS", "4"))
CALLS = int(os.environ.get("CALLS", "1000"))
made, refused, other = [], [], []


def work() -> None:
    client = openai.OpenAI(base_url=URL, api_key="k", max_retries=0)
    for _ in range(CALLS):
        try:
            with otel_tokens.agent("worker", tenant="acme"):
                client.chat.completions.create(model="gpt-4o-mini", user="acme",
                                               messages=[{"role": "user", "content": "hello"}])
        except otel_tokens.BudgetExceeded:
            refused.append(1)
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
print(f"calls={len(made)} refused={len(refused)} errors={other}", flush=True)
