"""Every setting otel_tokens reads, in one place: read once, validated, never fatal.

The ``OTEL_TOKENS_*`` variables, the standard OpenTelemetry variables otel_tokens acts on, and
the arguments of ``configure()`` become one frozen :class:`Settings`. A value that cannot be
used is one line on the ``otel_tokens`` logger (stderr when the application set up no
logging) naming the variable, the value and what is accepted; that setting keeps its
default and everything else runs (the one-line set-up, ``otel-tokens run`` and
``opentelemetry-instrument`` alike). ``otel-tokens check`` lists every such problem and exits 1.

Booleans accept ``true/false``, ``1/0``, ``yes/no``, ``on/off`` in any case; an empty value is
the same as unset. :func:`current` reads the environment the first time it is called;
:func:`reload` reads it again (tests, or a host that changed its environment on purpose).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping

from . import faults
from .redact import redact

if TYPE_CHECKING:
    from .account.anomalies import Budget, SpikeRule
    from .account.pricing import OverridePrice

__all__ = ["Problem", "Settings", "current", "postgres_url", "reload", "with_arguments"]

_log = logging.getLogger("otel_tokens")

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")
BOOLEAN = "true/false, 1/0, yes/no or on/off"
PARSER_NAMES = ("copilot", "claude", "codex", "gemini")
#: set by ``otel-tokens run`` for the program it starts (read by the bootstrap; here only for
#: the at-exit summary's default)
RUN_MARKER = "OTEL_TOKENS_RUN"
#: set by the program's top process for its descendants when the at-exit summary is on: the
#: private directory they leave their rows in (``emit/summary.py``); not a user setting
SUMMARY_DIR_MARKER = "OTEL_TOKENS_SUMMARY_DIR"
_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


@dataclass(frozen=True)
class Problem:
    """A setting that could not be used: its name, the value given and what is accepted."""

    name: str
    value: str
    accepted: str
    fallback: str

    def line(self) -> str:
        """The one line printed for it."""
        return (
            f"otel_tokens: {self.name}={self.value!r} is not valid (accepted: "
            f"{self.accepted}); using {self.fallback}"
        )


def _default_spike() -> SpikeRule:
    from .account.anomalies import SpikeRule

    return SpikeRule()


@dataclass(frozen=True)
class Settings:
    """What otel_tokens is set to do; built by :func:`current` (defaults as declared)."""

    # ledger (one SQLite file shared by every agent; unset: in memory)
    ledger_path: str | None = None
    ledger_max_history: int = 10_000
    # fleet ledger (issue 32): every process's rows into one PostgreSQL database too
    ledger_url: str | None = None  # postgresql://user@host:port/db (OTEL_TOKENS_LEDGER_URL)
    ledger_spool_dir: str | None = None  # rows kept on disk while it is down (None: ~/.cache/..)
    ledger_spool_max_mb: int = 256
    ledger_queue: int = 10_000  # rows queued in memory before they are spilled to the spool
    # accounting: a request above this many tokens of one class is not real usage (rejected)
    max_tokens_per_request: int = 100_000_000
    # a reported cost above this many USD for one request is not a real bill (rejected)
    max_cost_per_request: float = 10_000.0
    # pricing
    prices_file: str | None = None
    price_overrides: Mapping[str, OverridePrice] = field(default_factory=dict)
    # metrics
    max_attribute_values: int = 200
    max_label_sets: int = 128  # distinct metric label sets (emit/cardinality.py)
    prometheus_port: int = 9464
    prometheus_host: str = "127.0.0.1"
    # the folder the processes of one /metrics port share (None: <tmp>/otel_tokens-<uid>-<port>)
    prometheus_workers_dir: str | None = None
    service_name: str | None = None
    resource_attributes: str | None = None  # OTEL_RESOURCE_ATTRIBUTES as given
    traces_exporter: str | None = None  # otlp | console | none (None: decided by the endpoint)
    metrics_exporter: str | None = None  # otlp | prometheus | console | none
    traces_endpoint: str | None = None
    metrics_endpoint: str | None = None
    traces_protocol: str | None = None  # grpc | http/protobuf (None: by the port)
    metrics_protocol: str | None = None
    # seconds a process waits at exit for its last spans and metrics to be sent
    exit_timeout: float = 1.5
    # at exit, the process's own calls as a table on stderr (emit/summary.py)
    summary_at_exit: bool = False
    # the directory the top process made for the summary's rows (inherited; not a user setting)
    summary_dir: str | None = None
    # exemplars (trace ids) on the duration and token histograms
    exemplars: bool = True
    # put otel_tokens' attributes on the GenAI span another instrumentation opened for the call
    reuse_genai_span: bool = False
    # who the calls are for, on metric points too (opt-in: user, tenant, conversation)
    metric_attributes: frozenset[str] = frozenset()
    # budgets and spikes
    default_budget: Budget | None = None
    agent_budgets: Mapping[str, Budget] = field(default_factory=dict)
    # fleet budgets (with ledger_url): per tenant and per user, "*" the default of each
    tenant_budgets: Mapping[str, Budget] = field(default_factory=dict)
    user_budgets: Mapping[str, Budget] = field(default_factory=dict)
    budget_reserve_output_tokens: int = 4096  # reserved when a request says no max_tokens
    #: the input a fleet reservation holds: the estimate, or ("conservative") an incomplete
    #: estimate's learnt upper bound (``otel_tokens.estimate.input_tokens_max``)
    budget_reserve: str = "estimate"
    budget_db_timeout: float = 0.3  # seconds a call waits for its reservation in the database
    spike: SpikeRule = field(default_factory=_default_spike)
    # capture
    capture_content: bool = False
    openai_include_usage: bool = False
    copilot_json: bool = False
    copilot_usage_file: bool = True  # exact Copilot usage through --usage-output-file
    cli_names: Mapping[str, str] = field(default_factory=dict)
    backends: tuple[tuple[str, str], ...] = ()
    #: entry points ``opentelemetry-instrument`` does not load ("*": none), shown by
    #: ``otel-tokens check`` (OTEL_PYTHON_DISABLED_INSTRUMENTATIONS)
    disabled_instrumentations: frozenset[str] = frozenset()
    #: base-URL prefix (lower case) -> provider name, for private gateways (OTEL_TOKENS_PROVIDER_URLS)
    provider_urls: tuple[tuple[str, str], ...] = ()
    debug: bool = False
    #: the settings that could not be used, in the order read
    problems: tuple[Problem, ...] = ()


# -- reading ----------------------------------------------------------------------------------
class _Reader:
    """Reads variables from ``env``, collecting a :class:`Problem` for each unusable one."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        self.problems: list[Problem] = []

    def raw(self, *names: str) -> tuple[str, str]:
        """(the first set variable of ``names``, its stripped value), or (names[0], "")."""
        for name in names:
            value = self.env.get(name, "").strip()
            if value:
                return name, value
        return names[0], ""

    def bad(self, name: str, value: str, accepted: str, fallback: Any) -> Any:
        shown = "the default" if fallback is None else f"the default ({fallback})"
        self.problems.append(Problem(name, redact(value), accepted, shown))
        return fallback

    def text(self, *names: str) -> str | None:
        return self.raw(*names)[1] or None

    def boolean(self, name: str, default: bool = False) -> bool:
        _, value = self.raw(name)
        if not value:
            return default
        lowered = value.lower()
        if lowered in TRUE:
            return True
        if lowered in FALSE:
            return False
        return bool(self.bad(name, value, BOOLEAN, default))

    def number(
        self,
        *names: str,
        kind: type = int,
        default: Any,
        low: float | None = None,
        high: float | None = None,
        above: float | None = None,
        accepted: str = "",
    ) -> Any:
        name, value = self.raw(*names)
        if not value:
            return default
        try:
            number = kind(value)
            if (
                (low is not None and number < low)
                or (high is not None and number > high)
                or (above is not None and number <= above)
                or (kind is float and number != number)
            ):  # NaN
                raise ValueError
        except ValueError:
            return self.bad(name, value, accepted or f"a {kind.__name__}", default)
        return number

    def subset(self, name: str, options: tuple[str, ...]) -> frozenset[str]:
        """A comma-separated subset of ``options`` (empty when unset or unusable)."""
        _, value = self.raw(name)
        chosen = frozenset(v.strip().lower() for v in value.split(",") if v.strip())
        if chosen - set(options):
            return (
                self.bad(name, value, "a comma-separated list of " + ", ".join(options), None)
                or frozenset()
            )
        return chosen

    def choice(self, names: tuple[str, ...], options: tuple[str, ...]) -> str | None:
        name, value = self.raw(*names)
        if not value:
            return None
        if value.lower() not in options:
            return self.bad(name, value, " | ".join(options), None)
        return value.lower()


#: what a fleet reservation holds of an incomplete estimate (OTEL_TOKENS_BUDGET_RESERVE)
_RESERVES = ("estimate", "conservative")


def _price_overrides(reader: _Reader) -> tuple[str | None, Mapping[str, OverridePrice]]:
    path = reader.text("OTEL_TOKENS_PRICES_FILE")
    if path is None:
        return None, {}
    from .account.pricing import PriceFileError, load_price_file

    try:
        return path, load_price_file(path)
    except PriceFileError as exc:
        reader.bad(
            "OTEL_TOKENS_PRICES_FILE",
            path,
            f"a readable TOML or JSON price file ({exc})",
            "genai-prices alone",
        )
        return path, {}


def _budgets(reader: _Reader) -> tuple[Budget | None, dict[str, Budget], SpikeRule]:
    from .account.anomalies import Budget, SpikeRule

    window = reader.number(
        "OTEL_TOKENS_BUDGET_WINDOW",
        kind=float,
        default=3600.0,
        above=0,
        accepted="seconds, a number above 0",
    )
    enforce = reader.boolean("OTEL_TOKENS_BUDGET_ENFORCE")
    tokens = reader.number(
        "OTEL_TOKENS_BUDGET_TOKENS", default=None, low=1, accepted="a positive integer"
    )
    usd = reader.number(
        "OTEL_TOKENS_BUDGET_USD", kind=float, default=None, above=0, accepted="a number above 0"
    )
    default = None
    if tokens is not None or usd is not None:
        default = Budget(tokens=tokens, usd=usd, window_seconds=window, enforce=enforce)
    factor = reader.number(
        "OTEL_TOKENS_SPIKE_FACTOR", kind=float, default=3.0, above=1, accepted="a number above 1"
    )
    warmup = reader.number(
        "OTEL_TOKENS_SPIKE_WARMUP", default=20, low=1, accepted="a positive integer"
    )
    size = reader.number(
        "OTEL_TOKENS_SPIKE_WINDOW",
        default=max(200, warmup),
        low=warmup,
        accepted=f"an integer >= the warm-up ({warmup})",
    )
    spike = SpikeRule(factor=factor, warmup=warmup, window=size)
    agents: dict[str, Budget] = {}
    name, raw = reader.raw("OTEL_TOKENS_AGENT_BUDGETS")
    for part in filter(None, (p.strip() for p in raw.split(";"))):
        try:
            agent, budget = _agent_budget(part, window, enforce)
        except ValueError as exc:
            reader.bad(
                name,
                part,
                f"agent:usd=5,tokens=1000,window=3600 ({exc})",
                "no budget for that entry",
            )
            continue
        agents[agent] = budget
    return default, agents, spike


def _who_budgets(reader: _Reader, name: str) -> dict[str, Budget]:
    """``acme:usd=50;*:usd=5`` (tenant or user -> budget, ``*`` for every other one), with
    the window and enforcement of ``OTEL_TOKENS_BUDGET_WINDOW``/``_ENFORCE``."""
    quiet = _Reader(reader.env)  # their problems are reported once, by _budgets
    window = quiet.number("OTEL_TOKENS_BUDGET_WINDOW", kind=float, default=3600.0, above=0)
    enforce = quiet.boolean("OTEL_TOKENS_BUDGET_ENFORCE")
    budgets: dict[str, Budget] = {}
    for part in filter(None, (p.strip() for p in reader.raw(name)[1].split(";"))):
        try:
            who, budget = _agent_budget(part, window, enforce)
        except ValueError as exc:
            reader.bad(
                name,
                part,
                f"acme:usd=5,tokens=1000,window=3600 or *:usd=5 ({exc})",
                "no budget for that entry",
            )
            continue
        budgets[who] = budget
    return budgets


def _agent_budget(part: str, window: float, enforce: bool) -> tuple[str, Budget]:
    from .account.anomalies import Budget

    agent, sep, spec = part.partition(":")
    if not sep or not agent.strip():
        raise ValueError("no agent name before ':'")
    values: dict[str, Any] = {}
    for item in filter(None, (i.strip() for i in spec.split(","))):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or key not in ("usd", "tokens", "window"):
            raise ValueError(f"unknown item {item!r}")
        values[key] = int(value) if key == "tokens" else float(value)
    budget = Budget(
        tokens=values.get("tokens"),
        usd=values.get("usd"),
        window_seconds=values.get("window", window),
        enforce=enforce,
    )
    return agent.strip(), budget


def _plausibility(reader: _Reader) -> dict[str, Any]:
    """The bounds beyond which what a backend reports for one request is not real usage."""
    return {
        "max_tokens_per_request": reader.number(
            "OTEL_TOKENS_MAX_TOKENS_PER_REQUEST",
            default=100_000_000,
            low=1,
            high=2**53,
            accepted="a positive integer <= 2**53",
        ),
        "max_cost_per_request": reader.number(
            "OTEL_TOKENS_MAX_COST_PER_REQUEST",
            default=10_000.0,
            kind=float,
            above=0,
            high=1e12,
            accepted="a positive number of USD <= 1e12",
        ),
    }


_POSTGRES_URL = re.compile(r"^(postgres(?:ql)?)(?:\+\w+)?://", re.IGNORECASE)


def postgres_url(url: str) -> str | None:
    """``url`` as psycopg takes it (SQLAlchemy's ``postgresql+psycopg://`` accepted), None when
    it is not a PostgreSQL URL."""
    return (
        _POSTGRES_URL.sub(lambda m: f"{m[1].lower()}://", url, count=1)
        if _POSTGRES_URL.match(url)
        else None
    )


_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]{0,30})://")


def _scheme_of(url: str) -> str:
    """What is wrong with a ledger URL that is not PostgreSQL's, said plainly."""
    found = _SCHEME.match(url)
    return f"{found[1]}:// is not supported" if found else "this is not a URL"


def _fleet_ledger(reader: _Reader) -> dict[str, Any]:
    """``OTEL_TOKENS_LEDGER_URL`` and its spool and queue (issue 32)."""
    name, url = reader.raw("OTEL_TOKENS_LEDGER_URL")
    if url and postgres_url(url) is None:
        reader.bad(
            name,
            url,
            f"a postgresql://user@host:port/db URL; {_scheme_of(url)} "
            "(the fleet ledger is PostgreSQL only)",
            "none: no fleet ledger",
        )
        url = None
    elif url:
        url = postgres_url(url)
    return {
        "ledger_url": url or None,
        "ledger_spool_dir": reader.text("OTEL_TOKENS_LEDGER_SPOOL"),
        "ledger_spool_max_mb": reader.number(
            "OTEL_TOKENS_LEDGER_SPOOL_MAX_MB",
            default=256,
            low=1,
            accepted="a positive integer (MB)",
        ),
        "ledger_queue": reader.number(
            "OTEL_TOKENS_LEDGER_QUEUE", default=10_000, low=1, accepted="a positive integer (rows)"
        ),
    }


def _cli_names(reader: _Reader) -> dict[str, str]:
    names: dict[str, str] = {}
    name, raw = reader.raw("OTEL_TOKENS_CLI_NAMES")
    for entry in filter(None, (e.strip() for e in raw.split(","))):
        exe, _, parser = entry.partition("=")
        exe, parser = exe.strip(), (parser.strip() or exe.strip())
        if not exe or parser not in PARSER_NAMES:
            reader.bad(
                name,
                entry,
                f"name=parser entries, parser one of {', '.join(PARSER_NAMES)}",
                "no extra name for that entry",
            )
            continue
        names[exe] = parser
    return names


def _backends(reader: _Reader) -> tuple[tuple[str, str], ...]:
    pairs = []
    name, raw = reader.raw("OTEL_TOKENS_BACKENDS")
    for entry in filter(None, (e.strip() for e in raw.replace("\n", ";").split(";"))):
        target, _, parser = entry.partition("=")
        target, parser = target.strip(), (parser.strip() or "copilot")
        if not _TARGET.match(target) or parser not in PARSER_NAMES:
            reader.bad(
                name,
                entry,
                "pkg.module:Class.method=parser entries separated by ';', "
                f"parser one of {', '.join(PARSER_NAMES)}",
                "that backend not wrapped",
            )
            continue
        pairs.append((target, parser))
    return tuple(pairs)


def _instrumentation(reader: _Reader) -> dict[str, Any]:
    """What is wrapped beyond the backends, and which entry points ``opentelemetry-instrument``
    skips (OTEL_PYTHON_DISABLED_INSTRUMENTATIONS: comma-separated, ``*`` all)."""
    skipped = reader.text("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS") or ""
    return {
        "backends": _backends(reader),
        "disabled_instrumentations": frozenset(filter(None, map(str.strip, skipped.split(",")))),
    }


def _provider_urls(reader: _Reader) -> tuple[tuple[str, str], ...]:
    """``OTEL_TOKENS_PROVIDER_URLS``: ``base-url=provider`` entries separated by ``;``."""
    pairs = []
    name, raw = reader.raw("OTEL_TOKENS_PROVIDER_URLS")
    for entry in filter(None, (e.strip() for e in raw.replace("\n", ";").split(";"))):
        url, _, provider = entry.rpartition("=")
        url, provider = url.strip().lower(), provider.strip()
        if not url.startswith(("http://", "https://")) or not _PROVIDER_NAME.match(provider):
            reader.bad(
                name,
                entry,
                "base-url=provider entries separated by ';' (the URL with "
                "http:// or https://, the provider a name of letters, digits, '._-')",
                "that URL named by its host",
            )
            continue
        pairs.append((url, provider))
    return tuple(pairs)


_PROVIDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")


#: where telemetry goes when one of these is set: an OTLP endpoint, a scrape port
_ELSEWHERE = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_TOKENS_PROMETHEUS_PORT",
    "OTEL_EXPORTER_PROMETHEUS_PORT",
)


def _exporters(reader: _Reader) -> dict[str, Any]:
    """Where the telemetry goes: the Prometheus endpoint and the OpenTelemetry exporters,
    endpoints and protocols (the standard OTEL_* names, read here like our own)."""
    exporters = ("otlp", "console", "none")
    protocols = ("grpc", "http/protobuf")
    return {
        "prometheus_port": reader.number(
            "OTEL_TOKENS_PROMETHEUS_PORT",
            "OTEL_EXPORTER_PROMETHEUS_PORT",
            default=9464,
            low=0,
            high=65535,
            accepted="a port number 0-65535 (0: any free port)",
        ),
        "prometheus_host": reader.text(
            "OTEL_TOKENS_PROMETHEUS_HOST", "OTEL_EXPORTER_PROMETHEUS_HOST"
        )
        or "127.0.0.1",
        "prometheus_workers_dir": reader.text("OTEL_TOKENS_PROMETHEUS_WORKERS_DIR"),
        "service_name": reader.text("OTEL_SERVICE_NAME"),
        "resource_attributes": reader.text("OTEL_RESOURCE_ATTRIBUTES"),
        "traces_exporter": reader.choice(("OTEL_TRACES_EXPORTER",), exporters),
        "metrics_exporter": reader.choice(
            ("OTEL_METRICS_EXPORTER",), ("otlp", "prometheus", "console", "none")
        ),
        "traces_endpoint": reader.text(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"
        ),
        "metrics_endpoint": reader.text(
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"
        ),
        "traces_protocol": reader.choice(
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"), protocols
        ),
        "metrics_protocol": reader.choice(
            ("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"), protocols
        ),
    }


def _budget_limits(reader: _Reader) -> dict[str, Any]:
    """Who else has budgets (tenants, users) and how a call's share is reserved against them."""
    return {
        "tenant_budgets": _who_budgets(reader, "OTEL_TOKENS_TENANT_BUDGETS"),
        "user_budgets": _who_budgets(reader, "OTEL_TOKENS_USER_BUDGETS"),
        "budget_reserve_output_tokens": reader.number(
            "OTEL_TOKENS_BUDGET_RESERVE_OUTPUT_TOKENS",
            default=4096,
            low=1,
            accepted="a positive integer",
        ),
        "budget_db_timeout": reader.number(
            "OTEL_TOKENS_BUDGET_DB_TIMEOUT",
            kind=float,
            default=0.3,
            above=0,
            high=60,
            accepted="seconds, a number above 0, <= 60",
        ),
        "budget_reserve": reader.choice(("OTEL_TOKENS_BUDGET_RESERVE",), _RESERVES) or "estimate",
    }


def _at_exit(reader: _Reader) -> dict[str, Any]:
    """The exit's settings. OTEL_TOKENS_SUMMARY_AT_EXIT unset is on for a program
    ``otel-tokens run`` started whose telemetry has nowhere else to show (no OTLP endpoint,
    no scrape port set)."""
    under_run = reader.env.get(RUN_MARKER, "").strip() == "1"
    elsewhere = any(reader.raw(name)[1] for name in _ELSEWHERE)
    return {
        "exit_timeout": reader.number(
            "OTEL_TOKENS_EXIT_TIMEOUT",
            kind=float,
            default=1.5,
            low=0,
            high=3600,
            accepted="seconds, a number 0-3600",
        ),
        "summary_at_exit": reader.boolean(
            "OTEL_TOKENS_SUMMARY_AT_EXIT", default=under_run and not elsewhere
        ),
        "summary_dir": reader.env.get(SUMMARY_DIR_MARKER) or None,
    }


def read(env: Mapping[str, str] | None = None) -> Settings:
    """Settings from ``env`` (default: ``os.environ``); never raises for a bad value."""
    r = _Reader(os.environ if env is None else env)
    prices_file, overrides = _price_overrides(r)
    default_budget, agent_budgets, spike = _budgets(r)
    return Settings(
        ledger_path=r.text("OTEL_TOKENS_LEDGER_PATH"),
        ledger_max_history=r.number(
            "OTEL_TOKENS_LEDGER_MAX_HISTORY", default=10_000, low=1, accepted="a positive integer"
        ),
        **_fleet_ledger(r),
        **_plausibility(r),
        prices_file=prices_file,
        price_overrides=overrides,
        max_attribute_values=r.number(
            "OTEL_TOKENS_MAX_ATTRIBUTE_VALUES", default=200, low=1, accepted="a positive integer"
        ),
        max_label_sets=r.number(
            "OTEL_TOKENS_MAX_LABEL_SETS",
            default=128,
            low=2,
            high=1_000_000,
            accepted="an integer 2-1000000",
        ),
        **_exporters(r),
        **_at_exit(r),
        exemplars=r.boolean("OTEL_TOKENS_EXEMPLARS", default=True),
        reuse_genai_span=r.boolean("OTEL_TOKENS_REUSE_GENAI_SPAN", default=False),
        metric_attributes=r.subset(
            "OTEL_TOKENS_METRIC_ATTRIBUTES", ("user", "tenant", "conversation")
        ),
        default_budget=default_budget,
        agent_budgets=agent_budgets,
        **_budget_limits(r),
        spike=spike,
        capture_content=r.boolean("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"),
        openai_include_usage=r.boolean("OTEL_TOKENS_OPENAI_INCLUDE_USAGE"),
        copilot_json=r.boolean("OTEL_TOKENS_COPILOT_JSON"),
        copilot_usage_file=r.boolean("OTEL_TOKENS_COPILOT_USAGE_FILE", default=True),
        cli_names=_cli_names(r),
        **_instrumentation(r),
        provider_urls=_provider_urls(r),
        debug=r.boolean("OTEL_TOKENS_DEBUG"),
        problems=tuple(r.problems),
    )


# -- configure() arguments -------------------------------------------------------------------
#: argument -> (check, what is accepted)
_ARGUMENTS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "service_name": (lambda v: isinstance(v, str) and bool(v.strip()), "a non-empty string"),
    "prometheus_port": (lambda v: type(v) is int and 0 <= v <= 65535, "a port number 0-65535"),
    "prometheus_host": (lambda v: isinstance(v, str) and bool(v.strip()), "a host name or address"),
}


def with_arguments(base: Settings, **arguments: Any) -> Settings:
    """``base`` with ``configure()``'s arguments applied (None: not given). A bad argument is
    one line, like a bad variable, and keeps the value ``base`` has."""
    changes: dict[str, Any] = {}
    problems: list[Problem] = []
    for name, value in arguments.items():
        if value is None:
            continue
        check, accepted = _ARGUMENTS[name]
        if check(value):
            changes[name] = value
        else:
            problem = Problem(
                f"configure({name}=...)", redact(repr(value)), accepted, f"{getattr(base, name)!r}"
            )
            problems.append(problem)
            _announce((problem,))
    if problems:
        changes["problems"] = base.problems + tuple(problems)
    return replace(base, **changes) if changes else base


# -- the process's settings ------------------------------------------------------------------
_current: Settings | None = None
_lock = threading.Lock()


def _announce(problems: tuple[Problem, ...]) -> None:
    for problem in problems:
        _log.warning("%s", problem.line())
        faults.report("config", detail=problem.line(), log=False)


def current() -> Settings:
    """The process's settings, read from the environment the first time (problems printed
    then, one line each, and counted as ``config`` faults)."""
    settings = _current
    if settings is None:
        with _lock:
            if _current is None:
                _set(read())
            settings = _current
    return settings  # type: ignore[return-value]


def _set(settings: Settings) -> None:
    global _current
    _current = settings
    _announce(settings.problems)


def reload() -> Settings:
    """Read the environment again (for a host, or a test, that changed it on purpose)."""
    with _lock:
        _set(read())
        return _current  # type: ignore[return-value]
