"""A web app as users write one: the one-line set-up at import, one chat call per request to
the LLM at FAKE_LLM_URL (the test's fake server), as WSGI (gunicorn) and ASGI (uvicorn)."""

import json
import os

import otel_tokens

otel_tokens.configure()
otel_tokens.instrument()

import openai  # noqa: E402

URL = os.environ["FAKE_LLM_URL"]
MESSAGES = [{"role": "user", "content": "hello"}]


def _body(usage) -> bytes:  # type: ignore[no-untyped-def]
    return json.dumps({"input": usage.prompt_tokens, "pid": os.getpid()}).encode()


def wsgi(environ, start_response):  # type: ignore[no-untyped-def]
    client = openai.OpenAI(base_url=URL, api_key="k", max_retries=0)
    with client:
        answer = client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    body = _body(answer.usage)
    start_response("200 OK", [("content-type", "application/json"), ("content-length", str(len(body)))])
    return [body]


async def asgi(scope, receive, send):  # type: ignore[no-untyped-def]
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    client = openai.AsyncOpenAI(base_url=URL, api_key="k", max_retries=0)
    async with client:
        answer = await client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    body = _body(answer.usage)
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})
