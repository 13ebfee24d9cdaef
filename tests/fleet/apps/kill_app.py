"""A worker to be killed: THREADS threads each make CALLS chat calls on the real openai client
to the fake LLM at FAKE_LLM_URL (agent ``worker``, tenant ``tenant-<i mod 3>``, also sent as
the request's ``user``), then it prints ``recorded=<n>`` and waits to be killed."""

import os
import threading
import time

import otel_tokens

otel_tokens.configure()
otel_tokens.instrument()

import openai

URL = os.environ["FAKE_LLM_URL"]
THREADS = int(os.environ.get("THREADS", "2"))
CALLS = int(os.environ.get("CALLS", "10"))
done = []


def work(index: int) -> None:
    client = openai.OpenAI(base_url=URL, api_key="k", max_retries=0)
    for call in range(CALLS):
        tenant = f"tenant-{(index + call) % 3}"
        with otel_tokens.agent("worker", tenant=tenant):
            client.chat.completions.create(model="gpt-4o-mini", user=tenant,
                                           messages=[{"role": "user", "content": "hello"}])
        done.append(1)


threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(f"recorded={len(done)}", flush=True)
time.sleep(600)
