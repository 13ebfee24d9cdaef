"""A parent that records a row on the fleet ledger and forks CHILDREN bare children (os.fork,
as a prefork server or billiard does), each recording ROWS rows and ending at once with
``os._exit(0)``: no atexit, no flush. The parent waits for them, records one more row and
ends normally, or with ``os._exit(0)`` too when PARENT_EXIT is ``_exit``."""

import os

from otel_tokens.account.agents import get_agent
from otel_tokens.usage import Usage

CHILDREN = int(os.environ.get("CHILDREN", "4"))
ROWS = int(os.environ.get("ROWS", "16"))

ledger = get_agent("forker").ledger
ledger.append(Usage(input_tokens=1, output_tokens=1, model="m"), cost_usd=0.01)
children = []
for _ in range(CHILDREN):
    pid = os.fork()
    if pid == 0:
        for _ in range(ROWS):
            ledger.append(Usage(input_tokens=10, output_tokens=1, model="m"), cost_usd=0.01)
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
ledger.append(Usage(input_tokens=100, output_tokens=1, model="m"), cost_usd=0.01)
print("recorded", flush=True)
if os.environ.get("PARENT_EXIT") == "_exit":
    os._exit(0)
