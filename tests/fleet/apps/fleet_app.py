"""A worker of the fleet: THREADS threads each make CALLS chat calls on the real openai client
to the fake LLM at FAKE_LLM_URL, bound to agent AGENT for tenant ``tenant-<i mod TENANTS>``
(also sent as the request's ``user``, so that the server knows whom it answered), PAUSE
seconds apart; prints how many calls succeeded."""

import os
import threading
import time

import otel_tokens

otel_tokens.configure()
otel_tokens.instrument()

import openai

URL = os.environ["FAKE_LLM_URL"]
THREADS = int(os.environ.get("THREADS", "4"))
CALLS = int(os.environ.get("CALLS", "10"))
TENANTS = int(os.environ.get("TENANTS", "3"))
PAUSE = float(os.environ.get("PAUSE", "0"))
AGENT = os.environ.get("AGENT", "worker")
done = []


def work(index: int) -> None:
    client = openai.OpenAI(base_url=URL, api_key="k", max_retries=0)
    for call in range(CALLS):
        tenant = f"tenant-{(index + call) % TENANTS}"
        with otel_tokens.agent(AGENT, tenant=tenant, user=f"user-{index}"):
            client.chat.completions.create(model="gpt-4o-mini", user=tenant,
                                           messages=[{"role": "user", "content": "hello"}])
        done.append(1)
        if PAUSE:
            time.sleep(PAUSE)


threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
started = time.monotonic()
for t in threads:
    t.start()
for t in threads:
    t.join()
print(f"calls={len(done)} seconds={time.monotonic() - started:.3f}", flush=True)
