"""A process starting on a fleet database at the same moment as another: once its stdin says
go, it reserves a tenant's budget and writes a ledger row (the first use of the database for
both); it prints where the reservation went ("database", or "local" had it to fall back)."""

import os
import sys

from otel_tokens.account.agents import get_agent
from otel_tokens.account.anomalies import Budget
from otel_tokens.account.fleet_budget import FleetBudgets
from otel_tokens.usage import Usage

print("ready", flush=True)
sys.stdin.readline()  # go: both processes set the schema up at once
budget = Budget(usd=100.0, window_seconds=600, enforce=True)
fleet = FleetBudgets(os.environ["OTEL_TOKENS_LEDGER_URL"], {}, None, {"acme": budget}, {},
                     timeout=30.0)  # fmt: skip
reservation = fleet.reserve("starter", "acme", None, 0.01, 10)
fleet.settle(reservation, 0.01, 10)
get_agent("starter").ledger.append(Usage(input_tokens=5, output_tokens=5, model="m"),
                                   cost_usd=0.01)  # fmt: skip
print("local" if reservation.held is not None else "database", flush=True)
sys.exit(0 if fleet.flush(10.0) else 1)  # atexit writes the ledger row
