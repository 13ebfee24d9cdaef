"""``otel-tokens check``: is otel_tokens set up right here? Exit 1 with the reasons if not.

Prints versions, the instrumentors (available: their library is installed; active: turned on
by ``instrument()`` in this check; registered for ``opentelemetry-instrument``), where
telemetry goes under the current environment, the ledger file, and the date of the bundled
genai-prices data.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import platform
import sys
from datetime import datetime

import click

_PACKAGES = ("otel-tokens", "opentelemetry-api", "opentelemetry-sdk",
             "opentelemetry-instrumentation", "opentelemetry-exporter-otlp",
             "opentelemetry-exporter-prometheus", "genai-prices", "openai", "anthropic",
             "tiktoken")  # fmt: skip
_STALE_DAYS = 180


def _version(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def price_data_date() -> datetime | None:
    try:
        from genai_prices import data_snapshot

        return data_snapshot.get_snapshot().timestamp
    except Exception:  # noqa: BLE001 - reported as unknown
        return None


@click.command()
def check() -> None:
    """Versions, instrumentors, where telemetry goes, price data; exit 1 if something is off."""
    problems: list[str] = []
    warnings: list[str] = []
    echo = click.echo
    echo(f"python {platform.python_version()} ({sys.executable})")
    for name in _PACKAGES:
        echo(f"  {name:<34} {_version(name) or 'not installed'}")

    import otel_tokens
    from otel_tokens import instrumentors
    from otel_tokens.telemetry import setup as tsetup

    import logging

    logging.getLogger("otel_tokens").setLevel(logging.CRITICAL)  # check reports faults itself
    try:
        setup = otel_tokens.configure()
        active = otel_tokens.instrument()
    except Exception as exc:  # noqa: BLE001 - a configuration error is the finding
        raise click.ClickException(f"check: configuration error: {' '.join(str(exc).split())}")
    registered = {ep.name: ep.value for ep in md.entry_points(group="opentelemetry_instrumentor")
                  if ep.value.startswith("otel_tokens.")}  # fmt: skip
    echo("instrumentors:")
    for name, module_name in instrumentors.REGISTRY.items():
        deps = tsetup.dependencies_of(name)
        missing = [d for d in deps if _version(_requirement_name(d)) is None]
        state = "active" if name in active and not missing else (
            f"available once {', '.join(missing)} is installed" if missing else "inactive")
        entry = next((ep for ep, value in registered.items() if value.endswith(
            _entry_class(module_name, name))), None)  # fmt: skip
        ep_text = f"; opentelemetry-instrument: {entry}" if entry else (
            "; not registered for opentelemetry-instrument")
        echo(f"  {name:<16} {state}{ep_text}")
    if not [n for n in active if n not in ("agent_backends",)]:
        problems.append("no instrumentor is active")
    echo("telemetry:")
    echo(f"  service    {_resource_name(setup)}")
    echo(f"  traces  -> {setup.traces}")
    echo(f"  metrics -> {setup.metrics}")
    if setup.metrics.startswith("nowhere (port"):
        problems.append(f"metrics are not served: {setup.metrics[len('nowhere ('):-1]} "
                        "(set OTEL_TOKENS_PROMETHEUS_PORT, or OTEL_EXPORTER_OTLP_ENDPOINT)")
    elif setup.metrics.startswith("nowhere (open"):
        problems.append("metrics go nowhere: install otel-tokens[prometheus] or set "
                        "OTEL_EXPORTER_OTLP_ENDPOINT")
    ledger = os.environ.get("OTEL_TOKENS_LEDGER_PATH", "").strip()
    if ledger:
        folder = os.path.dirname(os.path.abspath(ledger))
        writable = os.access(ledger, os.W_OK) if os.path.exists(ledger) else os.access(folder, os.W_OK)
        echo(f"  ledger  -> {ledger}{'' if writable else ' (NOT writable)'}")
        if not writable:
            problems.append(f"OTEL_TOKENS_LEDGER_PATH {ledger!r} is not writable")
    else:
        echo("  ledger  -> in memory (set OTEL_TOKENS_LEDGER_PATH to keep it for otel-tokens report)")
    stamp = price_data_date()
    if stamp is None:
        problems.append("genai-prices data cannot be read: costs will be missing")
        echo("prices: genai-prices data unreadable")
    else:
        age = (datetime.now(stamp.tzinfo) - stamp).days
        echo(f"prices: genai-prices {_version('genai-prices')}, bundled data of "
             f"{stamp:%Y-%m-%d} ({age} days old)")
        if age > _STALE_DAYS:
            warnings.append(f"price data is {age} days old: pip install -U genai-prices")
    if os.environ.get("OTEL_TOKENS_PRICES_FILE"):
        echo(f"  overrides: {os.environ['OTEL_TOKENS_PRICES_FILE']}")
    setup.shutdown()
    for warning in warnings:
        echo(f"warning: {warning}")
    if problems:
        raise click.ClickException(f"check: {len(problems)} problem(s): " + "; ".join(problems))
    echo("ok")


def _requirement_name(requirement: str) -> str:
    import re

    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0]


def _entry_class(module_name: str, name: str) -> str:
    from otel_tokens.instrumentors import entry_points

    for cls_name in dir(entry_points):
        cls = getattr(entry_points, cls_name)
        if isinstance(cls, type) and getattr(cls, "name", None) == name:
            return f":{cls_name}"
    return f":<{name}>"


def _resource_name(setup: object) -> str:
    resource = getattr(getattr(setup, "tracer_provider", None), "resource", None)
    attrs = getattr(resource, "attributes", {}) or {}
    return str(attrs.get("service.name", "?"))


