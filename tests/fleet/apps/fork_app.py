"""A parent that records rows on the fleet ledger, forks (a prefork server, a fork Pool) and
records more in the child and itself: every row must reach the database once."""

import os
import sys
import time

from otel_tokens.account.agents import get_agent
from otel_tokens.usage import Usage

ledger = get_agent("forker").ledger
for i in range(5):
    ledger.append(Usage(input_tokens=1, output_tokens=1, model="m"), cost_usd=0.01)
time.sleep(0.5)  # the parent's writer is running (and connected) when it forks
pid = os.fork()
for i in range(7 if pid == 0 else 3):
    ledger.append(Usage(input_tokens=10 if pid == 0 else 100, output_tokens=1, model="m"),
                  cost_usd=0.01)
if pid == 0:
    sys.exit(0)  # atexit flushes the child's own writer
os.waitpid(pid, 0)
