"""A worker whose calls carry values PostgreSQL cannot hold as they are: CALLS chat calls on the
real openai client to FAKE_LLM_URL, in turn a plain one, one under a W3C ``baggage`` header as a
web framework would extract it (``user.id=evil%00x``: a NUL), and one bound to an agent, tenant
and conversation holding a NUL and lone surrogates (what undecodable bytes become); prints how
many calls succeeded."""

import os

import otel_tokens

otel_tokens.configure()
otel_tokens.instrument()

import openai
from opentelemetry import context
from opentelemetry.baggage.propagation import W3CBaggagePropagator

URL = os.environ["FAKE_LLM_URL"]
CALLS = int(os.environ.get("CALLS", "12"))
client = openai.OpenAI(base_url=URL, api_key="k", max_retries=0)


def call(tenant: str) -> None:
    client.chat.completions.create(model="gpt-4o-mini", user=tenant,
                                   messages=[{"role": "user", "content": "hello"}])


done = 0
for i in range(CALLS):
    if i % 3 == 0:
        with otel_tokens.agent("plain", tenant="t-plain"):
            call("t-plain")
    elif i % 3 == 1:
        token = context.attach(W3CBaggagePropagator().extract({"baggage": "user.id=evil%00x"}))
        try:
            with otel_tokens.agent("plain", tenant="t-baggage"):
                call("t-baggage")
        finally:
            context.detach(token)
    else:
        raw = os.fsdecode(b"t-\xff\xfe")  # lone surrogates: undecodable bytes
        with otel_tokens.agent("bot\x00x", tenant=raw, user="u\\x00", conversation="c\x00\udcff"):
            call("t-raw")
    done += 1
print(f"calls={done}", flush=True)
