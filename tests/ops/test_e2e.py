"""End to end on a real Prometheus: the instrumented workload serves /metrics, Prometheus (the
Debian binary) scrapes it every second on a free loopback port with a temporary data directory
and loads the rules; then every dashboard variable and panel query runs through Prometheus's
HTTP API, macros and variables substituted as Grafana would, and each must return data."""

from __future__ import annotations

import copy
import json
import signal
import re
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from .conftest import GRAFANA, ROOT, RULE_FILES
from .grafana_queries import Grafana, has_data, panels

#: The instrumented program the stack observes. Switch to the demo once it exists, e.g.
#: [sys.executable, "-m", "otel_tokens.cli", "demo", "--serve"].
WORKLOAD = [sys.executable, str(ROOT / "tests" / "ops" / "workload.py")]  # every series
#: the demo's traffic (real clients, a real CLI subprocess), kept serving /metrics
DEMO = [sys.executable, "-m", "otel_tokens.cli", "demo", "--serve", "--port", "0", "--delay", "0"]


def demo_metrics_url(demo: subprocess.Popen, deadline: float) -> str:
    """The /metrics URL the demo prints once it serves."""
    assert demo.stdout is not None
    while time.monotonic() < deadline:
        line = demo.stdout.readline()
        if not line:
            break
        match = re.search(r"http://127\.0\.0\.1:\d+/metrics", line)
        if match:
            return match.group(0)
    pytest.fail("the demo never printed its /metrics URL")
SCRAPE_SECONDS = 1
DEADLINE_SECONDS = 90
DASHBOARDS = sorted((GRAFANA / "dashboards").glob("*.json"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, timeout: float = 5) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.load(response)


def query(base: str, expr: str) -> list:
    return get(f"{base}/api/v1/query?{urllib.parse.urlencode({'query': expr})}")["data"]["result"]


def wait_for(what: str, check, deadline: float):
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except (OSError, urllib.error.URLError, ValueError, KeyError) as exc:
            last = exc
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what} (last: {last!r})")


@pytest.fixture(scope="module")
def stack(prometheus_bin, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("prometheus")
    env = {**os.environ, "OTEL_TOKENS_PROMETHEUS_PORT": "0", "OTEL_TOKENS_PROMETHEUS_HOST": "127.0.0.1"}
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_METRICS_EXPORTER", "OTEL_TRACES_EXPORTER"):
        env.pop(name, None)
    workload = subprocess.Popen(WORKLOAD, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                env=env, cwd=ROOT)  # fmt: skip
    demo = subprocess.Popen(DEMO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
                            env={**env, "TERM": "dumb"}, cwd=ROOT)  # fmt: skip
    prometheus = None
    try:
        info = json.loads(workload.stdout.readline())
        targets = [urllib.parse.urlparse(info["url"]),
                   urllib.parse.urlparse(demo_metrics_url(demo, time.monotonic() + DEADLINE_SECONDS))]
        assert all(t.hostname == "127.0.0.1" and t.path == "/metrics" for t in targets)
        config = tmp / "prometheus.yml"
        config.write_text(json.dumps({  # JSON is YAML
            "global": {"scrape_interval": f"{SCRAPE_SECONDS}s", "evaluation_interval": f"{SCRAPE_SECONDS}s"},
            "rule_files": [str(p) for p in RULE_FILES],
            "scrape_configs": [{"job_name": "otel-tokens-local", "metrics_path": "/metrics",
                                "static_configs": [{"targets": [t.netloc for t in targets]}]}],
        }))  # fmt: skip
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        log = open(tmp / "prometheus.log", "w")
        prometheus = subprocess.Popen(
            [prometheus_bin, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1h"],
            stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        deadline = time.monotonic() + DEADLINE_SECONDS
        wait_for("Prometheus ready", lambda: urllib.request.urlopen(f"{base}/-/ready", timeout=2).status == 200,
                 deadline)  # fmt: skip
        # enough samples for rate() over $__rate_interval (4 scrapes), every metric present and
        # the recording rules evaluated
        wait_for("scraped data", lambda: query(base, "count_over_time(otel_tokens_tokens_total[1m]) >= 8")
                 and query(base, "otel_tokens_anomalies_total")
                 and query(base, "otel_tokens:budget_usd_per_hour"), deadline)  # fmt: skip
        yield base, tmp
    finally:
        if prometheus is not None:
            prometheus.terminate()
            prometheus.wait(timeout=30)
        workload.stdin.close()
        workload.wait(timeout=30)
        demo.send_signal(signal.SIGINT)  # --serve ends on Ctrl-C
        try:
            demo.wait(timeout=30)
        except subprocess.TimeoutExpired:
            demo.kill()
            demo.wait()


def grafana_view(base: str, **values) -> Grafana:
    end = time.time()
    return Grafana(base, start=end - 300, end=end, scrape_interval_s=SCRAPE_SECONDS, values=values)


def load(path) -> dict:
    return json.loads(path.read_text())


def test_the_target_is_up_and_rules_load_without_errors(stack):
    base, _ = stack
    assert len(query(base, 'up{job="otel-tokens-local"} == 1')) == 2  # the workload and the demo
    # the demo's real-client traffic: its two agents, through OpenAI, Anthropic and a CLI
    agents = {r["metric"]["gen_ai_agent_name"] for r in query(base, "otel_tokens_tokens_total")}
    assert {"planner", "coder"} <= agents
    groups = get(f"{base}/api/v1/rules")["data"]["groups"]
    loaded = {rule["name"] for g in groups for rule in g["rules"]}
    assert {"OtelTokensSpendOverBudget", "model:otel_tokens_cost_USD:rate5m"} <= loaded
    broken = [(r["name"], r.get("lastError")) for g in groups for r in g["rules"] if r["health"] == "err"]
    assert broken == []


def test_recording_rules_produce_series(stack):
    base, _ = stack
    groups = get(f"{base}/api/v1/rules")["data"]["groups"]
    records = [r["name"] for g in groups for r in g["rules"] if r["type"] == "recording"]
    # the ones over 1h+ windows or offsets need at least two samples in their window: all have them
    empty = [name for name in records if not query(base, name)]
    assert empty == []


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.stem)
def test_every_variable_and_panel_query_returns_data(stack, path):
    base, _ = stack
    dashboard = load(path)
    view = grafana_view(base)
    assert view.failures(dashboard) == []
    # every query variable has values; the panels had targets to run
    assert all(view.options.values())
    assert sum(len(p.get("targets", [])) for p in panels(dashboard)) >= 10


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.stem)
def test_every_panel_with_all_values_selected_explicitly(stack, path):
    """Multi-value selection (every option ticked: a regex alternation of escaped values)
    instead of All's `.*`: the options the variable queries return are the label values the
    panels filter on."""
    base, _ = stack
    dashboard = load(path)
    probe = grafana_view(base)
    options = probe.resolve_variables(dashboard)
    # service is left at All here (a single service: selecting it is the same query)
    values = {name: opts for name, opts in options.items() if name not in ("service",)}
    view = grafana_view(base, **values)
    assert view.failures(dashboard) == []


def test_macros_are_substituted_like_grafana(stack):
    base, _ = stack
    view = grafana_view(base)
    # 300 s over 1000 points rounds to 200 ms, raised to the 1 s scrape interval
    assert view.macros()["__interval"] == "1s"
    assert view.macros()["__rate_interval"] == "4s"  # max(1s + 1s, 4 x 1s)
    assert view.macros()["__range"] == "300s"
    wide = Grafana(base, start=0, end=6 * 3600, scrape_interval_s=15)
    assert wide.macros()["__interval"] == "20s"  # 21.6 s rounds to 20 s
    assert wide.macros()["__rate_interval"] == "60s"
    dashboard = load(DASHBOARDS[0])
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    view.options = {"model": ["gpt-4o", "a.b"]}
    view.values = {"model": ["gpt-4o", "a.b"]}
    assert view.interpolate('x{m=~"$model"}[$__rate_interval]', variables) == 'x{m=~"(gpt-4o|a\\\\.b)"}[4s]'
    view.values = {"model": None}
    assert view.interpolate('x{m=~"${model}"}', variables) == 'x{m=~".*"}'


def test_a_wrong_metric_name_in_a_panel_fails(stack):
    """The check can fail: one panel's metric renamed (as upstream dashboards that query names
    no longer emitted) is reported, and only that panel."""
    base, _ = stack
    dashboard = load(GRAFANA / "dashboards" / "otel-tokens-overview.json")
    mutated = copy.deepcopy(dashboard)
    victim = next(p for p in panels(mutated) if p["title"] == "Spend by model")
    victim["targets"][0]["expr"] = victim["targets"][0]["expr"].replace(
        "otel_tokens_cost_USD_total", "otel_tokens_cost_usd_total")
    problems = grafana_view(base).failures(mutated)
    assert len(problems) == 1 and "'Spend by model' A: no data" in problems[0], problems
    # and the context gauge queried under only one of its two names still works here
    victim["targets"][0]["expr"] = "otel_tokens_context_utilization_ratio"
    assert not has_data(grafana_view(base).run(mutated, victim["targets"][0]))
