"""A program that forks a multiprocessing Pool under the one-line set-up: the parent makes
calls before forking, the pool's workers make short and long tasks' calls (a long one lives
past several export intervals), then the pool is ended with ``terminate()`` (``with Pool``)
or ``close()``/``join()`` as argv[1] says. Prints the input tokens the client saw."""

import faulthandler
import json
import multiprocessing
import os
import signal
import sys
import time

import otel_tokens

if os.environ.get("SLOW_FINAL_SECONDS"):  # a starved machine: leaving the last metrics is slow
    from otel_tokens.emit import workers

    _leave = workers.Endpoint.leave_final_metrics

    def _slow_leave(self) -> None:
        time.sleep(float(os.environ["SLOW_FINAL_SECONDS"]))
        _leave(self)

    workers.Endpoint.leave_final_metrics = _slow_leave

# a test that waited too long asks for every thread's stack (tests/stuck.py)
faulthandler.register(signal.SIGUSR2, all_threads=True)
otel_tokens.configure()
otel_tokens.instrument()

import openai  # noqa: E402

URL = os.environ["FAKE_LLM_URL"]


def call() -> int:
    with openai.OpenAI(base_url=URL, api_key="k", max_retries=0) as client:
        answer = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    return answer.usage.prompt_tokens


def task(seconds: float) -> int:
    seen = call()
    time.sleep(seconds)
    return seen + call()


def main() -> None:
    seen = call() + call()  # the parent's own, before the fork
    context = multiprocessing.get_context("fork")
    tasks = [0.0] * 6 + [float(os.environ.get("LONG_TASK_SECONDS", "2"))] * 2
    if sys.argv[1] == "terminate":
        with context.Pool(3) as pool:
            seen += sum(pool.map(task, tasks, chunksize=1))
    else:
        pool = context.Pool(3, maxtasksperchild=2)
        seen += sum(pool.map(task, tasks, chunksize=1))
        pool.close()
        pool.join()
    print(json.dumps({"seen": seen}), flush=True)
    if os.environ.get("HOLD_SECONDS"):  # keep /metrics up for the test's scrape
        time.sleep(float(os.environ["HOLD_SECONDS"]))


if __name__ == "__main__":
    main()
