"""A Celery app as users write one: the one-line set-up at import, one chat call per task to
the LLM at FAKE_LLM_URL (the test's fake server)."""

import os

import otel_tokens

otel_tokens.configure()
otel_tokens.instrument()

import openai  # noqa: E402
from celery_config import make_app  # noqa: E402

app = make_app()
MESSAGES = [{"role": "user", "content": "hi"}]


@app.task(name="chat")
def chat() -> int:
    with openai.OpenAI(base_url=os.environ["FAKE_LLM_URL"], api_key="k", max_retries=0) as client:
        answer = client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    with open(os.path.join(os.environ["CELERY_FOLDER"], "done"), "a") as done:
        done.write("1\n")  # the call is recorded: the test may shut the worker down
    return answer.usage.prompt_tokens
