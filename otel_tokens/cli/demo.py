"""``otel-tokens demo``: an offline, deterministic multi-agent scenario, fully instrumented.

A planner (OpenAI chat completions) and a coder (Anthropic messages, then the Copilot CLI)
fix a bug: several turns, streaming, tool calls, prompt caching, one Copilot CLI run (a real
subprocess of the fake ``copilot`` the package ships), one rate-limited call and one budget
anomaly. The real ``openai``/``anthropic`` clients talk to a mock HTTP transport that serves
the responses in ``demo_data/`` (each provider's wire format: JSON bodies and SSE streams);
everything else, instrumentation included, is the product as it runs in production.
``demo_data/scenario.json`` holds the scenario and its known usage.
"""

from __future__ import annotations

import importlib
import json
import os
import shlex
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import click

from .common import CliError

DATA = Path(__file__).resolve().parent / "demo_data"
_TOKEN_ROWS = (
    "input_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "output_tokens",
    "reasoning_tokens",
)


def load_scenario() -> dict[str, Any]:
    """The scenario: agents, budget, steps (requests, responses, usage) and expected totals."""
    return json.loads((DATA / "scenario.json").read_text())


# -- the offline wire -------------------------------------------------------------------------
class Wire:
    """A mock HTTP transport for one SDK: serves queued recorded responses in order."""

    def __init__(self, sdk: str) -> None:
        base = importlib.import_module(f"{sdk}._base_client")
        self.http = importlib.import_module("httpx2" if hasattr(base, "httpx2") else "httpx")
        self.queue: deque[tuple[int, str, bytes]] = deque()
        self.requests = 0

    def serve(self, status: int, path: str) -> None:
        body = (DATA / path).read_bytes()
        kind = "text/event-stream" if path.endswith(".sse") else "application/json"
        self.queue.append((status, kind, body))

    def handler(self, request: Any) -> Any:
        self.requests += 1
        status, kind, body = self.queue.popleft()
        headers = {"content-type": kind, "x-request-id": f"req_demo_{self.requests}"}
        return self.http.Response(status, headers=headers, content=body)

    def client(self) -> Any:
        return self.http.Client(transport=self.http.MockTransport(self.handler))


def copilot_on_path(folder: str) -> str:
    """Write a ``copilot`` executable into ``folder`` running the shipped stand-in."""
    script = DATA / "copilot" / "fake_copilot.py"
    path = Path(folder) / "copilot"
    path.write_text(
        f'#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(script))} "$@"\n'
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return folder


# -- what the telemetry says, collected in process for the table ------------------------------
def span_tally() -> Any:
    """A span processor counting, per agent, failed calls and estimate errors."""
    from opentelemetry.sdk.trace import SpanProcessor

    return type("SpanTally", (_TallyMixin, SpanProcessor), {})()


class _TallyMixin:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.failed: dict[str, int] = {}
        self.errors: dict[str, list[float]] = {}
        self.spans = 0

    def on_end(self, span: Any) -> None:
        attrs = span.attributes or {}
        agent = attrs.get("gen_ai.agent.name")
        if agent is None:
            return
        with self.lock:
            self.spans += 1
            if span.status.status_code.name == "ERROR":
                self.failed[agent] = self.failed.get(agent, 0) + 1
            error = attrs.get("otel_tokens.estimate.error")
            if error is not None:
                self.errors.setdefault(agent, []).append(float(error))


# -- progress: a live display on a terminal, plain lines otherwise ----------------------------
#: the width of the tables on a pipe or in a file
PIPE_WIDTH = 80


class Progress:
    def __init__(self, total: int) -> None:
        from rich.console import Console

        self.console = Console(highlight=False)
        self.live = self.console.is_terminal and not self.console.is_dumb_terminal
        if not self.live:  # a pipe or a file: 80 columns whatever COLUMNS says (the tables
            # fit them), lines wrapped between words only, so no figure is cut
            self.console = Console(
                highlight=False, no_color=True, force_terminal=False, width=PIPE_WIDTH
            )
        self.total = total
        self.done = 0
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> Progress:
        if self.live:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress as Bar,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            self._bar = Bar(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self._bar.__enter__()
            self._task = self._bar.add_task("starting", total=self.total)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)

    def start(self, title: str) -> None:
        if self._bar is not None:
            self._bar.update(self._task, description=title)

    def stream(self, title: str, text: str) -> None:
        if self._bar is not None:
            tail = " ".join(text.split())[-40:]
            self._bar.update(self._task, description=f"{title}  [dim]{tail}[/dim]")

    def line(self, text: str) -> None:
        """One line of progress, wrapped to the terminal; on a pipe between words only, its
        continuation indented (a figure is never cut)."""
        if self.live:
            self.console.print(text, overflow="fold")
        else:
            wrapped = textwrap.fill(
                text,
                PIPE_WIDTH,
                subsequent_indent="    ",
                break_long_words=False,
                break_on_hyphens=False,
            )
            self.console.print(wrapped, soft_wrap=True)

    def step_done(self) -> None:
        self.done += 1
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done)


# -- the scenario -----------------------------------------------------------------------------
class Demo:
    def __init__(self, progress: Progress, delay: float) -> None:
        import anthropic
        import openai

        self.openai_module = openai
        self.anthropic_module = anthropic
        self.progress = progress
        self.delay = delay
        self.openai_wire = Wire("openai")
        self.anthropic_wire = Wire("anthropic")
        self.openai = openai.OpenAI(
            api_key="demo-offline",
            base_url="https://api.openai.com/v1",
            http_client=self.openai_wire.client(),
            max_retries=0,
        )
        self.anthropic = anthropic.Anthropic(
            api_key="demo-offline", max_retries=0, http_client=self.anthropic_wire.client()
        )

    def run_step(self, step: dict[str, Any], bin_dir: str) -> str | None:
        """Run one step; returns a failure description (the failed call) or None."""
        title = step["title"]
        if "cli" in step:
            env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
            proc = subprocess.run(
                step["argv"], capture_output=True, text=True, env=env, check=False
            )
            if proc.returncode != 0:
                raise CliError(f"demo: the Copilot stand-in failed: {proc.stderr.strip()[:200]}")
            return None
        if step["provider"] == "openai":
            self.openai_wire.serve(step.get("status", 200), step["response"])
            request = dict(step["request"])
            try:
                if step["stream"]:
                    text = ""
                    stream = self.openai.chat.completions.create(
                        **request, stream=True, stream_options={"include_usage": True}
                    )
                    for chunk in stream:
                        if chunk.choices and chunk.choices[0].delta.content:
                            text += chunk.choices[0].delta.content
                            self._streaming(title, text)
                else:
                    self.openai.chat.completions.create(**request)
            except self.openai_module.APIStatusError as exc:
                code = (exc.body or {}).get("code") if isinstance(exc.body, dict) else None
                return f"HTTP {exc.status_code} {code or type(exc).__name__}"
            return None
        self.anthropic_wire.serve(step.get("status", 200), step["response"])
        request = dict(step["request"])
        if not step["stream"]:
            self.anthropic.messages.create(**request)
        elif step.get("helper") == "stream":
            with self.anthropic.messages.stream(**request) as stream:
                text = ""
                for piece in stream.text_stream:
                    text += piece
                    self._streaming(title, text)
                stream.get_final_message()
        else:
            text = ""
            for event in self.anthropic.messages.create(**request, stream=True):
                delta = getattr(event, "delta", None)
                if getattr(delta, "type", None) == "text_delta":
                    text += delta.text
                    self._streaming(title, text)
        return None

    def _streaming(self, title: str, text: str) -> None:
        self.progress.stream(title, text)
        if self.delay:
            time.sleep(self.delay / 10)


def _fmt_int(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _describe(record: Any) -> str:
    parts = [f"{_fmt_int(record.input_tokens)} in"]
    if record.cache_read_tokens:
        parts.append(f"{record.cache_read_tokens:,} cached")
    if record.cache_write_tokens:
        parts.append(f"{record.cache_write_tokens:,} cache-written")
    parts.append(f"{_fmt_int(record.output_tokens)} out")
    if record.premium_requests:
        parts.append(f"{record.premium_requests:g} premium")
    if record.cost_usd is not None:
        parts.append(f"${record.cost_usd:.4f}")
    return ", ".join(parts)


def summarize(tally: Any) -> dict[str, Any]:
    """Per-agent figures read back from the agents' state and ledgers (and the spans)."""
    import otel_tokens

    rows: dict[str, Any] = {}
    for entry in otel_tokens.agents():
        if len(entry.ledger) == 0 and entry.name not in tally.failed:
            continue
        totals = entry.ledger.cumulative
        display = entry.state.display()
        errors = tally.errors.get(entry.name, [])
        rows[entry.name] = {
            # the ledger has a row for every call, failed ones included (tokens unknown)
            "requests": totals.requests - tally.failed.get(entry.name, 0),
            "failed": tally.failed.get(entry.name, 0),
            **{name: getattr(totals, name) for name in _TOKEN_ROWS},
            "total_tokens": totals.total_tokens,
            "cost_usd": totals.cost_usd,
            "premium_requests": totals.premium_requests,
            "context_tokens": display.tokens,
            "context_percent": display.percent,
            "context_is_estimate": display.is_estimate,
            "estimate_error": sum(errors) / len(errors) if errors else None,
            "estimated_calls": len(errors),
        }
    return rows


def _sum(values: list[Any]) -> Any:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _table(title: str, columns: list[str]) -> Any:
    """A table that fits 80 columns: numbers never wrap, two-line headers."""
    from rich import box
    from rich.table import Table

    table = Table(
        title=title,
        box=box.SIMPLE_HEAD,
        title_justify="left",
        pad_edge=False,
        collapse_padding=True,
    )
    for i, name in enumerate(columns):
        table.add_column(name, justify="left" if i == 0 else "right", no_wrap=True)
    return table


def render_table(rows: dict[str, Any], console: Any) -> None:
    """Two tables, each readable at 80 columns: tokens per agent, then cost and context."""
    total = {
        k: _sum([r[k] for r in rows.values()])
        for k in (
            "requests",
            "failed",
            *_TOKEN_ROWS,
            "total_tokens",
            "cost_usd",
            "premium_requests",
        )
    }
    tokens = _table(
        "otel-tokens demo: tokens per agent",
        [
            "agent",
            "requests",
            "failed",
            "input",
            "cache\nread",
            "cache\nwrite",
            "output",
            "reasoning",
            "total",
        ],
    )
    money = _table(
        "cost and context per agent",
        ["agent", "cost USD", "premium\nrequests", "context", "estimate\nerror"],
    )
    for name, r in [*rows.items(), ("TOTAL", total)]:
        last = name == "TOTAL"
        if last:
            tokens.add_section()
            money.add_section()
        style = "bold" if last else None
        tokens.add_row(
            name,
            str(r["requests"]),
            str(r["failed"]),
            *(_fmt_int(r[k]) for k in _TOKEN_ROWS),
            _fmt_int(r["total_tokens"]),
            style=style,
        )
        money.add_row(
            name,
            "-" if r["cost_usd"] is None else f"{r['cost_usd']:.4f}",
            "-" if r["premium_requests"] is None else f"{r['premium_requests']:g}",
            *(("", "") if last else _context_cells(r)),
            style=style,
        )
    console.print(tokens)
    console.print(money)
    console.print(
        "input includes cache read and write, output includes reasoning. context = the "
        "agent's last reported input as % of its window (~ = an estimate while "
        "streaming); estimate error = mean (estimate - actual) / actual of its "
        "input-token estimates."
    )


def _context_cells(r: dict[str, Any]) -> tuple[str, str]:
    pct = r["context_percent"]
    context = "-" if pct is None else f"{'~' if r['context_is_estimate'] else ''}{pct:.1f}%"
    error = "-" if r["estimate_error"] is None else f"{r['estimate_error'] * 100:+.1f}%"
    return context, error


def _check_endpoint(endpoint: str) -> None:
    """--endpoint must be an OTLP URL; say what to write when it is not."""
    from urllib.parse import urlparse

    try:
        parsed = urlparse(endpoint)
        ok = parsed.scheme in ("http", "https") and bool(parsed.hostname) and parsed.port != 0
    except ValueError:  # a port that is not a number
        ok = False
    if not ok:
        raise click.BadParameter(
            f"{endpoint!r} is not an OTLP URL: write http://HOST:4318 (OTLP/HTTP) or "
            "http://HOST:4317 (gRPC), e.g. http://127.0.0.1:4318",
            param_hint="--endpoint",
        )


def _prepare_environment(otlp: bool, endpoint: str | None, ledger: str | None) -> None:
    env = os.environ
    env.setdefault("OTEL_SERVICE_NAME", "otel-tokens-demo")
    env["OTEL_TOKENS_COPILOT_USAGE_FILE"] = "true"  # the Copilot run's input/cache tokens
    for name in (
        "OTEL_TOKENS_BUDGET_TOKENS",
        "OTEL_TOKENS_BUDGET_USD",
        "OTEL_TOKENS_AGENT_BUDGETS",
        "OTEL_TOKENS_BUDGET_ENFORCE",
        "OTEL_TOKENS_COPILOT_JSON",
    ):
        env.pop(name, None)  # the scenario sets its own budget; nothing may stop it
    env.pop("OTEL_TOKENS_LEDGER_PATH", None)  # never write the demo into the user's ledger
    if ledger:
        env["OTEL_TOKENS_LEDGER_PATH"] = ledger
    if otlp:
        if endpoint:
            env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
        env.setdefault("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
        env["OTEL_TRACES_EXPORTER"] = "otlp"
        env["OTEL_METRICS_EXPORTER"] = "otlp"
    else:
        env["OTEL_METRICS_EXPORTER"] = "prometheus"
        env.setdefault("OTEL_TRACES_EXPORTER", "none")
        if env["OTEL_TRACES_EXPORTER"] == "otlp" and not env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
            env["OTEL_TRACES_EXPORTER"] = "none"


@click.command()
@click.option(
    "--serve", is_flag=True, help="Keep serving /metrics after the scenario, until Ctrl-C."
)
@click.option(
    "--otlp",
    is_flag=True,
    help="Send spans and metrics over OTLP (OTEL_EXPORTER_OTLP_ENDPOINT, default "
    "http://127.0.0.1:4318) instead of serving /metrics.",
)
@click.option("--endpoint", metavar="URL", help="The OTLP endpoint (with --otlp).")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Port of /metrics (default: OTEL_TOKENS_PROMETHEUS_PORT or 9464; 0: any free).",
)
@click.option(
    "--ledger",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Persist the agents' ledgers to this SQLite file (then: otel-tokens report --db).",
)
@click.option(
    "--delay",
    type=click.FloatRange(0, 10),
    default=0.25,
    show_default=True,
    help="Seconds between steps, so the progress can be followed (0: as fast as possible).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the per-agent figures as JSON at the end."
)
def demo(
    serve: bool,
    otlp: bool,
    endpoint: str | None,
    port: int | None,
    ledger: str | None,
    delay: float,
    as_json: bool,
) -> None:
    """Run an offline multi-agent scenario through the real clients, fully instrumented."""
    _check_options(serve, otlp, endpoint)
    _prepare_environment(otlp, endpoint, ledger)

    import otel_tokens
    from otel_tokens import settings

    settings.reload()  # the scenario's own environment, set just above
    scenario = load_scenario()
    setup = otel_tokens.configure(prometheus_port=port)
    tally = span_tally()
    if hasattr(setup.tracer_provider, "add_span_processor"):
        setup.tracer_provider.add_span_processor(tally)
    active = otel_tokens.instrument()
    budget = scenario["budget"]
    otel_tokens.set_budget(
        budget["agent"], tokens=budget["tokens"], window_seconds=budget["window_seconds"]
    )
    if serve and setup.prometheus_url is None:  # before the scenario, not after it
        setup.shutdown()
        raise CliError(
            f"demo --serve: /metrics is not served: {setup.metrics[len('nowhere (') : -1]} "
            "(demo: --port N, or --port 0 for any free port)"
        )
    progress = Progress(len(scenario["steps"]))

    @otel_tokens.on_anomaly
    def _anomaly(anomaly: Any) -> None:
        progress.line(
            f"  [bold red]! anomaly[/bold red]: {anomaly.agent} {anomaly.kind}: "
            f"{anomaly.observed:,.0f} > {anomaly.threshold:,.0f}"
        )

    progress.line(
        f"otel-tokens demo: {len(scenario['steps'])} steps, agents "
        f"{', '.join(scenario['agents'])}; instrumentors: {', '.join(active)}"
    )
    progress.line(f"metrics -> {setup.metrics}")
    progress.line(f"traces  -> {setup.traces}")
    _run_steps(scenario, progress, delay)
    _finish(tally, progress, setup, ledger, serve, as_json)


def _check_options(serve: bool, otlp: bool, endpoint: str | None) -> None:
    """Refuse, before anything is set up, options that cannot go together and a demo whose
    client libraries are not installed: one clear line each rather than a traceback later."""
    if endpoint and not otlp:
        raise click.UsageError("--endpoint needs --otlp")
    if endpoint:
        _check_endpoint(endpoint)
    if serve and otlp:
        raise click.UsageError("--serve serves /metrics; it cannot be combined with --otlp")
    for module in ("openai", "anthropic"):
        try:
            importlib.import_module(module)
        except ImportError:
            raise CliError(
                f"demo: the {module!r} package is not installed "
                f"(pip install otel-tokens[demo] or pip install {module})"
            ) from None


def _run_steps(scenario: dict[str, Any], progress: Progress, delay: float) -> None:
    """Every step of the scenario, each under its agent, with one progress line each."""
    import otel_tokens

    steps = scenario["steps"]
    demo_run = Demo(progress, delay)
    with tempfile.TemporaryDirectory(prefix="otel-tokens-demo-") as bin_dir, progress:
        copilot_on_path(bin_dir)
        for number, step in enumerate(steps, 1):
            agent_cfg = scenario["agents"][step["agent"]]
            progress.start(f"[{number}/{len(steps)}] {step['title']}")
            with otel_tokens.agent(
                step["agent"], max_input_tokens=agent_cfg["max_input_tokens"]
            ) as entry:
                before = len(entry.ledger)
                failure = demo_run.run_step(step, bin_dir)
            if failure:
                outcome = f"[yellow]failed: {failure}[/yellow]"
            elif len(entry.ledger) > before:
                outcome = _describe(entry.ledger.recent(1)[0])
            else:
                outcome = "no usage recorded"
            progress.line(f"[{number}/{len(steps)}] {step['title']}: {outcome}")
            progress.step_done()
            if delay:
                time.sleep(delay)


def _finish(
    tally: Any, progress: Progress, setup: Any, ledger: str | None, serve: bool, as_json: bool
) -> None:
    """The per-agent table, the ledger's flush, and (--serve) /metrics kept up until Ctrl-C."""
    import otel_tokens

    rows = summarize(tally)
    render_table(rows, progress.console)
    if as_json:
        click.echo(json.dumps({"agents": rows}, indent=2))
    for entry in otel_tokens.agents():
        entry.ledger.flush()
    if ledger:
        progress.line(f"ledger -> {ledger} (try: otel-tokens report --db {shlex.quote(ledger)})")
    if serve:
        try:  # a Ctrl-C as soon as the line is out (a script waiting for it) is still caught
            progress.line(
                f"Serving {setup.prometheus_url} until Ctrl-C (scrape it with Prometheus)."
            )
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            progress.line("stopped.")
    delivered = setup.shutdown()
    if setup.metrics.startswith("otlp") and (
        not delivered or otel_tokens.get_handler().faults.counts.get("exporter")
    ):
        where = setup.metrics.split()[-1]
        progress.line(
            f"[yellow]The collector at {where} did not take the telemetry[/yellow] (not "
            "running, or not answering): start it (docker compose -f "
            "collector-config/docker-compose.yml up -d), or pass --endpoint with its "
            "OTLP URL (http://HOST:4318, or :4317 for gRPC)."
        )
