"""``otel-tokens check``: is otel_tokens set up right here? Exit 1 with the reasons if not.

Prints versions, every setting that cannot be used (each is a problem), the instrumentors
(available: their library is installed; active: turned on by ``instrument()`` in this check;
registered for ``opentelemetry-instrument``), the model clients installed and whether each is
recorded (:mod:`otel_tokens.coverage`; one that is not is said, not a problem), where
telemetry goes under the current environment, the ledger (:mod:`.check_ledger`: the file, the
fleet database and whether it answers, its spool), the budgets in force (enforced or alerting,
and the variable setting each), and the date of the bundled genai-prices data.
"""

from __future__ import annotations

import importlib.metadata as md
import platform
import sys
from datetime import datetime
from typing import Any

import click

from otel_tokens.cli.check_ledger import ledger
from otel_tokens.coverage import CLIENTS, Client, installed_versions

_PACKAGES = (
    "otel-tokens",
    "opentelemetry-api",
    "opentelemetry-sdk",
    "opentelemetry-semantic-conventions",
    "opentelemetry-instrumentation",
    "opentelemetry-exporter-otlp-proto-http",
    "opentelemetry-exporter-otlp-proto-grpc",
    "opentelemetry-exporter-prometheus",
    "genai-prices",
    "openai",
    "anthropic",
    "tiktoken",
)
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
    """Versions, settings, instrumentors, where telemetry goes, price data; exit 1 if something
    is off."""
    import logging

    import otel_tokens
    from otel_tokens import settings

    problems: list[str] = []
    warnings: list[str] = []
    click.echo(f"python {platform.python_version()} ({sys.executable})")
    for name in _PACKAGES:
        click.echo(f"  {name:<34} {_version(name) or 'not installed'}")
    _floors(problems)
    logging.getLogger("otel_tokens").setLevel(logging.CRITICAL)  # check reports faults itself
    found = settings.current()
    _settings(found, problems)
    setup = otel_tokens.configure()
    active = otel_tokens.instrument()
    _instrumentors(active, problems)
    _clients(active, found)
    _telemetry(setup, found, problems)
    ledger(found, problems)
    _budgets(found, warnings)
    _prices(found, problems, warnings)
    setup.shutdown()
    for warning in warnings:
        click.echo(f"warning: {warning}")
    if problems:
        raise click.ClickException(f"check: {len(problems)} problem(s): " + "; ".join(problems))
    click.echo("ok")


def _floors(problems: list[str]) -> None:
    """Installed packages older than otel_tokens needs (it stays off with them)."""
    from otel_tokens.dependencies import too_old

    unmet = too_old()
    for name, installed, spec in unmet:
        click.echo(f"  {name} {installed or 'not installed'}: otel_tokens needs {spec}")
    if unmet:
        fix = " ".join(f"'{name}{spec}'" for name, _, spec in unmet)
        problems.append(
            f"otel_tokens is off: installed packages are older than it needs (pip install {fix})"
        )


def _settings(found: Any, problems: list[str]) -> None:
    click.echo("settings:")
    if not found.problems:
        click.echo("  every setting is usable")
    for problem in found.problems:
        click.echo(f"  {problem.line().removeprefix('otel_tokens: ')}")
        problems.append(f"{problem.name}={problem.value!r} is not valid")


def _instrumentors(active: list[str], problems: list[str]) -> None:
    from otel_tokens import registry
    from otel_tokens.capture import BACKENDS

    registered = {
        ep.name: ep.value
        for ep in md.entry_points(group="opentelemetry_instrumentor")
        if ep.value.startswith("otel_tokens.")
    }
    click.echo("instrumentors:")
    for name, module_name in BACKENDS.items():
        deps = registry.dependencies_of(name)
        missing = [d for d in deps if _version(_requirement_name(d)) is None]
        state = (
            "active"
            if name in active and not missing
            else (f"available once {', '.join(missing)} is installed" if missing else "inactive")
        )
        entry = next(
            (
                ep
                for ep, value in registered.items()
                if value.endswith(_entry_class(module_name, name))
            ),
            None,
        )
        ep_text = (
            f"; opentelemetry-instrument: {entry}"
            if entry
            else ("; not registered for opentelemetry-instrument")
        )
        click.echo(f"  {name:<16} {state}{ep_text}")
    if not [n for n in active if n not in ("agent_backends",)]:
        problems.append("no instrumentor is active")


def _clients(active: list[str], found: Any) -> None:
    """Every model client installed here (its package metadata: nothing is imported) and whether
    and how it is recorded under the current settings. Information, never a problem: a
    client otel_tokens cannot record is still the application's to use."""
    present = installed_versions()
    rows = [client for client in CLIENTS if client.distribution in present]
    if not rows:
        click.echo("model clients: none that otel_tokens knows of is installed")
        return
    click.echo("model clients (installed; how each is recorded):")
    labels = [_label(client, present) for client in rows]
    width = max(map(len, labels)) + 2
    for client, label in zip(rows, labels):
        click.echo(f"  {label:<{width}}{_verdict(client, active, found.disabled_instrumentations)}")
    silent = sum(not client.is_recorded for client in rows)
    if silent:
        click.echo(
            f"  ({silent} installed, not recorded: their calls are missing from the telemetry)"
        )


def _label(client: Client, present: dict[str, str]) -> str:
    """A row's name, with the installed version on the library's own row."""
    if client.name != client.distribution:
        return str(client.name)
    return f"{client.name} {_printable(present[client.distribution])}"


def _verdict(client: Client, active: list[str], disabled: frozenset[str]) -> str:
    """Whether ``client`` is recorded here: by what, or why not."""
    if not client.is_recorded:
        return "NOT" + client.recorded.removeprefix("not")  # "NOT recorded ...": it stands out
    off = [name for name in client.backends if name not in active]
    if off:
        return f"NOT recorded: the {', '.join(off)} instrumentor is off (see instrumentors)"
    named = [
        f"otel_tokens_{name}"
        for name in client.backends
        if "*" in disabled or f"otel_tokens_{name}" in disabled
    ]
    if named:
        return (
            f"NOT recorded under opentelemetry-instrument: disabled by "
            f"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS ({', '.join(named)}); "
            f"instrument() and otel-tokens run: {client.recorded}"
        )
    return client.recorded


def _printable(text: str, limit: int = 40) -> str:
    """A version string from package metadata, safe to print (untrusted: any characters)."""
    return "".join(ch if ch.isprintable() else "?" for ch in text[:limit])


def _telemetry(setup: Any, found: Any, problems: list[str]) -> None:
    click.echo("telemetry:")
    click.echo(f"  service    {_resource_name(setup)}")
    click.echo(f"  traces  -> {setup.traces}")
    click.echo(f"  metrics -> {setup.metrics}")
    if setup.metrics.startswith("nowhere (port"):
        problems.append(
            f"metrics are not served: {setup.metrics[len('nowhere (') : -1]} "
            "(or send OTLP: set OTEL_EXPORTER_OTLP_ENDPOINT)"
        )
    elif "otel-tokens[grpc]" in setup.metrics or "otel-tokens[grpc]" in setup.traces:
        problems.append(
            "telemetry goes nowhere: OTLP over gRPC needs pip install "
            "'otel-tokens[grpc]' (or OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf)"
        )
    elif setup.metrics.startswith("nowhere (open"):
        problems.append(
            "metrics go nowhere: install otel-tokens[prometheus] or set OTEL_EXPORTER_OTLP_ENDPOINT"
        )


def _budgets(found: Any, warnings: list[str]) -> None:
    """Every budget configured: whose, its limits and window, enforced or alerting, and the
    variable it comes from."""
    fleet = found.ledger_url is not None
    listed = _listed_budgets(found)
    click.echo("budgets:" if listed else "budgets: none set by the environment")
    for scope, name, budget, source in listed:
        limits = ", ".join(
            f"{what} {value:g}"
            for what, value in (("usd", budget.usd), ("tokens", budget.tokens))
            if value is not None
        )
        click.echo(
            f"  {scope:<6} {name:<20} {limits} per {budget.window_seconds:g} s: "
            f"{_mode(scope, budget, fleet)} ({source})"
        )
    if any(not b.enforce for _, _, b, _ in listed):
        click.echo(
            "  (alerting: an anomaly when crossed; OTEL_TOKENS_BUDGET_ENFORCE=true refuses calls)"
        )
    click.echo("  (set_budget() in the program adds budgets of its own, not seen here)")
    if not fleet and any(b.enforce for s, _, b, _ in listed if s != "agent"):
        warnings.append(
            "tenant and user budgets are enforced only with a fleet ledger "
            "(OTEL_TOKENS_LEDGER_URL); without one they raise anomalies only"
        )


def _listed_budgets(found: Any) -> list[tuple[str, str, Any, str]]:
    """(scope, whose, budget, the variable setting it) of every budget the settings hold."""
    default = found.default_budget
    listed = []
    if default is not None:
        names = [
            f"OTEL_TOKENS_BUDGET_{what}"
            for what, value in (("USD", default.usd), ("TOKENS", default.tokens))
            if value is not None
        ]
        listed.append(("agent", "*", default, " and ".join(names)))
    for scope, budgets in (
        ("agent", found.agent_budgets),
        ("tenant", found.tenant_budgets),
        ("user", found.user_budgets),
    ):
        source = f"OTEL_TOKENS_{scope.upper()}_BUDGETS"
        listed += [(scope, name, budget, source) for name, budget in budgets.items()]
    return listed


def _mode(scope: str, budget: Any, fleet: bool) -> str:
    """Enforced (calls refused) or alerting (an anomaly), over whose spend."""
    spend = "the fleet's" if fleet and (budget.enforce or scope != "agent") else "this process's"
    if budget.enforce and (fleet or scope == "agent"):
        return f"enforced over {spend} spend"
    why = " (enforced only with OTEL_TOKENS_LEDGER_URL)" if budget.enforce else ""
    return f"alerting over {spend} spend{why}"


def _prices(found: Any, problems: list[str], warnings: list[str]) -> None:
    stamp = price_data_date()
    if stamp is None:
        problems.append("genai-prices data cannot be read: costs will be missing")
        click.echo("prices: genai-prices data unreadable")
    else:
        age = (datetime.now(stamp.tzinfo) - stamp).days
        click.echo(
            f"prices: genai-prices {_version('genai-prices')}, bundled data of "
            f"{stamp:%Y-%m-%d} ({age} days old)"
        )
        if age > _STALE_DAYS:
            warnings.append(f"price data is {age} days old: pip install -U genai-prices")
    if found.prices_file:
        click.echo(f"  overrides: {found.prices_file} ({len(found.price_overrides)} models)")


def _requirement_name(requirement: str) -> str:
    import re

    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0]


def _entry_class(module_name: str, name: str) -> str:
    from otel_tokens import entry_points

    for cls_name in dir(entry_points):
        cls = getattr(entry_points, cls_name)
        if isinstance(cls, type) and getattr(cls, "name", None) == name:
            return f":{cls_name}"
    return f":<{name}>"


def _resource_name(setup: object) -> str:
    resource = getattr(getattr(setup, "tracer_provider", None), "resource", None)
    attrs = getattr(resource, "attributes", {}) or {}
    return str(attrs.get("service.name", "?"))
