"""Workers that end by ``os._exit()`` with nothing run before it, under the one-line set-up:
argv[1] ``bare``: children of a bare ``os.fork()`` each make two calls and ``os._exit(0)`` at
once; ``billiard-close``/``billiard-terminate``: billiard's own ``Pool`` (Celery's, used
directly) with ``maxtasksperchild=2``, ended by ``close()``/``join()`` or ``terminate()``.
The parent calls before forking. Prints the input tokens the client saw."""

import json
import os
import sys
import time

import otel_tokens

otel_tokens.configure()
otel_tokens.instrument()

import openai  # noqa: E402

URL = os.environ["FAKE_LLM_URL"]
CHILDREN = 4


MESSAGES = [{"role": "user", "content": "hi"}]


def call(_: object = None) -> int:
    with openai.OpenAI(base_url=URL, api_key="k", max_retries=0) as client:
        answer = client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    return answer.usage.prompt_tokens


def bare() -> int:
    """Each child writes what it saw to its pipe, then ``os._exit(0)`` straight after."""
    children = []
    for _ in range(CHILDREN):
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(writer, str(call() + call()).encode())
            os._exit(0)
        os.close(writer)
        children.append((pid, reader))
    seen = 0
    for pid, reader in children:
        seen += int(os.read(reader, 64) or 0)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
    return seen


def billiard_pool(ending: str) -> int:
    import billiard

    pool = billiard.Pool(2, maxtasksperchild=2)
    seen = sum(pool.map(call, range(2 * CHILDREN + 1), chunksize=1))
    if ending == "close":
        pool.close()
    else:
        pool.terminate()
    pool.join()
    return seen


def main() -> None:
    seen = call()  # the parent's own, before the fork
    seen += bare() if sys.argv[1] == "bare" else billiard_pool(sys.argv[1].split("-")[1])
    print(json.dumps({"seen": seen}), flush=True)
    if os.environ.get("HOLD_SECONDS"):  # keep /metrics up for the test's scrape
        time.sleep(float(os.environ["HOLD_SECONDS"]))


if __name__ == "__main__":
    main()
