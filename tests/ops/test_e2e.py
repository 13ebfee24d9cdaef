"""End to end on a real Prometheus (the Debian binary, on a free loopback port with a temporary
data directory, loading the rules), scraping otel_tokens' embedded /metrics of:

* (b) a long-running workload (tests/ops/workload.py), paused twice to take its own account;
* (a) one short process that makes its calls and exits after Prometheus scraped it once;
* (c) several short processes in a row on one port, each scraped once (cron jobs, CI runs);
* the demo (`otel-tokens demo --serve`): all its calls before the first scrape, then idle.

Every dashboard variable and panel query runs through Prometheus's HTTP API, macros and
variables substituted as Grafana would; each must return data, and every "over the range"
panel must equal what the programs recorded (their own account, read in process) within 1%,
over the whole test and, for the long-running one, over a window that starts mid-run.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

import pytest

from .conftest import GRAFANA, PENDING, ROOT, RULE_FILES
from .grafana_queries import Grafana, has_data, panels

#: The instrumented programs the stack observes.
WORKLOAD = [sys.executable, str(ROOT / "tests" / "ops" / "workload.py")]  # every series
#: the demo's traffic (real clients, a real CLI subprocess), kept serving /metrics
DEMO = [sys.executable, "-m", "otel_tokens.cli", "demo", "--serve", "--port", "0", "--delay", "0",
        "--json"]  # fmt: skip
SCRAPE_SECONDS = 1
SHORT_SCRAPE_SECONDS = 2  # the short processes' job: each is gone after its first scrape
DEADLINE_SECONDS = 120
DASHBOARDS = sorted((GRAFANA / "dashboards").glob("*.json"))
SERVICES = {"long": "otel-tokens-ops-workload", "once": "otel-tokens-ops-once",
            "runs": "otel-tokens-ops-runs", "demo": "otel-tokens-demo"}  # fmt: skip
RUNS = 4
TOLERANCE = 0.01


def demo_metrics_url(demo: subprocess.Popen, deadline: float) -> tuple[str, str]:
    """The /metrics URL the demo prints once it serves, and what it printed before."""
    assert demo.stdout is not None
    printed = []
    while time.monotonic() < deadline:
        line = demo.stdout.readline()
        if not line:
            break
        printed.append(line)
        match = re.search(r"http://127\.0\.0\.1:\d+/metrics", line)
        if match and line.startswith("Serving"):
            return match.group(0), "".join(printed)
    pytest.fail("the demo never printed its /metrics URL")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, timeout: float = 5) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.load(response)


def query(base: str, expr: str, at: float | None = None) -> list:
    params = {"query": expr, **({"time": at} if at is not None else {})}
    return get(f"{base}/api/v1/query?{urllib.parse.urlencode(params)}")["data"]["result"]


def wait_for(what: str, check, deadline: float, pause: float = 0.5):
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except (OSError, urllib.error.URLError, ValueError, KeyError) as exc:
            last = exc
        time.sleep(pause)
    pytest.fail(f"timed out waiting for {what} (last: {last!r})")


@dataclass
class Stack:
    """The Prometheus URL, the test's moments and what each program recorded."""

    base: str
    tmp: object
    start: float = 0.0  # before any program ran
    end: float = 0.0  # after every program's last call
    truths: dict[str, list[dict]] = field(default_factory=dict)  # scenario -> series rows
    window: tuple[float, float, list[dict]] = (0.0, 0.0, [])  # (b) mid-run: t1, t2, rows
    samples: dict[str, int] = field(default_factory=dict)  # short process -> samples scraped
    demo: dict = field(default_factory=dict)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(OTEL_TOKENS_PROMETHEUS_HOST="127.0.0.1", **extra)
    return env


def _short_targets(tmp, targets: list[str]) -> None:
    """The short job's targets, a file Prometheus watches: a short process is listed only once
    its calls are done, so its first scrape holds all of its usage (left listed all along, a
    scrape in the middle of its calls, then its exit, would lose the rest on a loaded machine)."""
    (tmp / "short.json.new").write_text(json.dumps([{"targets": targets}] if targets else []))
    (tmp / "short.json.new").replace(tmp / "short.json")  # atomic: never read half-written


def _prometheus_config(tmp, long_targets: list[str]):
    config = tmp / "prometheus.yml"
    _short_targets(tmp, [])
    config.write_text(json.dumps({  # JSON is YAML
        "global": {"scrape_interval": f"{SCRAPE_SECONDS}s", "evaluation_interval": f"{SCRAPE_SECONDS}s"},
        "rule_files": [str(p) for p in RULE_FILES],
        "scrape_configs": [
            {"job_name": "otel-tokens-local", "static_configs": [{"targets": long_targets}]},
            {"job_name": "otel-tokens-short", "scrape_interval": f"{SHORT_SCRAPE_SECONDS}s",
             "file_sd_configs": [{"files": [str(tmp / "short.json")]}]},
        ],
    }))  # fmt: skip
    return config


def _short_run(base: str, tmp, port: int, service: str, seed: int,
               deadline: float) -> tuple[list, int]:  # fmt: skip
    """One short process: its calls, one scrape, exit. Its rows and how many samples it left."""
    env = _env(OTEL_TOKENS_PROMETHEUS_PORT=str(port), OTEL_SERVICE_NAME=service,
               OTEL_RESOURCE_ATTRIBUTES="deployment.environment=ci",  # the pre-1.27 name
               OTEL_TOKENS_AGENT_BUDGETS="coder:tokens=20000")  # fmt: skip
    proc = subprocess.Popen([*WORKLOAD, "--rounds", str(2 + seed % 2), "--seed", str(seed)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        recorded = json.loads(proc.stdout.readline())
        selector = f'otel_tokens_tokens_total{{service_instance_id="{recorded["instance"]}"}}'
        _short_targets(tmp, [f"127.0.0.1:{port}"])
        wait_for(f"a scrape of {service}", lambda: query(base, selector), deadline, pause=0.05)
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
        _short_targets(tmp, [])
    samples = query(base, f"max(count_over_time({selector}[10m]))")
    return recorded["rows"], int(float(samples[0]["value"][1]))


def _steer(workload: subprocess.Popen, word: str) -> dict | None:
    workload.stdin.write(word + "\n")
    workload.stdin.flush()
    return json.loads(workload.stdout.readline()) if word in ("pause", "truth") else None


def _paused_truth(workload: subprocess.Popen) -> tuple[float, list[dict]]:
    """Pause the long-running workload, let Prometheus scrape the still values, take its account."""
    _steer(workload, "pause")
    time.sleep(3 * SCRAPE_SECONDS)
    recorded = _steer(workload, "truth")
    return recorded["time"], recorded["rows"]


def _minus(later: list[dict], earlier: list[dict]) -> list[dict]:
    before = {(r["metric"], json.dumps(r["labels"], sort_keys=True)): r["value"] for r in earlier}
    return [{**r, "value": r["value"] - before.get((r["metric"], json.dumps(r["labels"], sort_keys=True)), 0)}
            for r in later]  # fmt: skip


def _demo_rows(output: str) -> tuple[list[dict], dict]:
    """The demo's own per-agent figures (its --json) as rows of the series they should equal."""
    figures = json.loads(output[output.index("\n{\n") + 1: output.index("\n}\n") + 2])["agents"]
    common = {"service_name": SERVICES["demo"]}
    rows = []
    for agent, f in figures.items():
        labels = {**common, "gen_ai_agent_name": agent}
        rows.append({"metric": "otel_tokens_cost_USD_total", "labels": labels, "value": f["cost_usd"] or 0})
        rows.append({"metric": "otel_tokens_premium_requests_total", "labels": labels,
                     "value": f["premium_requests"] or 0})  # fmt: skip
        for error, calls in (("", f["requests"]), ("failed", f["failed"])):
            rows.append({"metric": "gen_ai_client_operation_duration_seconds_count",
                         "labels": {**labels, "error_type": error}, "value": calls})  # fmt: skip
        for kind in ("input", "output", "cache_read", "cache_write", "reasoning"):
            rows.append({"metric": "otel_tokens_tokens_total", "labels": {**labels, "gen_ai_token_type": kind},
                         "value": f[f"{kind}_tokens"] or 0})  # fmt: skip
    for agent, kind in re.findall(r"! anomaly: (\w+) (\w+):", output):
        rows.append({"metric": "otel_tokens_anomalies_total", "value": 1,
                     "labels": {**common, "gen_ai_agent_name": agent, "otel_tokens_anomaly_kind": kind}})
    return rows, figures


@pytest.fixture(scope="module")
def stack(prometheus_bin, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("prometheus")
    started = time.time() - 1
    deadline = time.monotonic() + DEADLINE_SECONDS
    workload = subprocess.Popen(WORKLOAD, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
                                env=_env(OTEL_TOKENS_PROMETHEUS_PORT="0",
                                         OTEL_RESOURCE_ATTRIBUTES="deployment.environment.name=staging"))  # fmt: skip
    demo = subprocess.Popen(DEMO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
                            env=_env(TERM="dumb", OTEL_TOKENS_PROMETHEUS_PORT="0"), cwd=ROOT)  # fmt: skip
    prometheus = None
    try:
        info = json.loads(workload.stdout.readline())
        demo_url, demo_output = demo_metrics_url(demo, deadline)
        targets = [urllib.parse.urlparse(info["url"]), urllib.parse.urlparse(demo_url)]
        assert all(t.hostname == "127.0.0.1" and t.path == "/metrics" for t in targets)
        once_port, runs_port = free_port(), free_port()
        config = _prometheus_config(tmp, [t.netloc for t in targets])
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        log = open(tmp / "prometheus.log", "w")
        prometheus = subprocess.Popen(
            [prometheus_bin, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1h"],
            stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        wait_for("Prometheus ready", lambda: urllib.request.urlopen(f"{base}/-/ready", timeout=2).status == 200,
                 deadline)  # fmt: skip
        wait_for("the workload scraped", lambda: query(base, "count_over_time(otel_tokens_tokens_total[1m]) >= 4"),
                 deadline)  # fmt: skip
        stack = Stack(base, tmp, start=started)
        t1, first = _paused_truth(workload)
        _steer(workload, "resume")
        stack.truths["once"], stack.samples["once"] = _short_run(
            base, tmp, once_port, SERVICES["once"], 1, deadline
        )
        stack.truths["runs"] = []
        for seed in range(RUNS):  # one after the other, on one port, as cron would start them
            rows, stack.samples[f"runs {seed}"] = _short_run(
                base, tmp, runs_port, SERVICES["runs"], seed, deadline
            )
            stack.truths["runs"] += rows
        time.sleep(max(0.0, t1 + 20 - time.time()))  # (b)'s window: 20 s or more of calls
        t2, last = _paused_truth(workload)
        stack.truths["long"], stack.window = last, (t1, t2, _minus(last, first))
        stack.truths["demo"], stack.demo = _demo_rows(demo_output)
        stack.end = time.time()
        # the recording rules evaluated, the context gauge present
        wait_for("recording rules", lambda: query(base, "otel_tokens:budget_usd_per_hour")
                 and query(base, "otel_tokens_context_utilization"), deadline)  # fmt: skip
        yield stack
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


def absent_pending(base: str) -> set[str]:
    return {name for name in PENDING if not query(base, f"count({name})")}


def real_failures(base: str, problems: list[str]) -> list[str]:
    """Failures, less the empty panels of pending metrics Prometheus has no series of."""
    absent = absent_pending(base)
    return [p for p in problems if not (absent and "no data" in p and any(m in p for m in absent))]


def test_the_targets_are_up_and_rules_load_without_errors(stack):
    base = stack.base
    assert len(query(base, 'up{job="otel-tokens-local"} == 1')) == 2  # the workload and the demo
    # the demo's real-client traffic: its two agents, through OpenAI, Anthropic and a CLI
    agents = {r["metric"]["gen_ai_agent_name"] for r in query(base, "otel_tokens_tokens_total")}
    assert {"planner", "coder"} <= agents
    groups = get(f"{base}/api/v1/rules")["data"]["groups"]
    loaded = {rule["name"] for g in groups for rule in g["rules"]}
    assert {"OtelTokensSpendOverBudget", "OtelTokensAnomalies", "OtelTokensBackendErrors"} <= loaded
    broken = [(r["name"], r.get("lastError")) for g in groups for r in g["rules"] if r["health"] == "err"]
    assert broken == []


def test_each_short_process_was_scraped_before_it_exited(stack):
    """(a) and (c): gone after one scrape (two at most, when the test's poll was slow): all of
    their usage is in the first sample of each series."""
    assert len(stack.samples) == 1 + RUNS
    assert all(1 <= n <= 2 for n in stack.samples.values()), stack.samples
    assert sum(n == 1 for n in stack.samples.values()) >= RUNS  # nearly always exactly one


def test_recording_rules_produce_series(stack):
    base = stack.base
    groups = get(f"{base}/api/v1/rules")["data"]["groups"]
    records = [r["name"] for g in groups for r in g["rules"] if r["type"] == "recording"]
    empty = [name for name in records if not query(base, name)]
    assert empty == []


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.stem)
def test_every_variable_and_panel_query_returns_data(stack, path):
    dashboard = load(path)
    view = grafana_view(stack.base)
    assert real_failures(stack.base, view.failures(dashboard)) == []
    # every query variable has values; the panels had targets to run
    assert all(view.options.values())
    assert sum(len(p.get("targets", [])) for p in panels(dashboard)) >= 10


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.stem)
def test_every_panel_with_all_values_selected_explicitly(stack, path):
    """Multi-value selection (every option ticked: a regex alternation of escaped values)
    instead of All's `.*`: the options the variable queries return are the label values the
    panels filter on (the model: request model, else response model)."""
    dashboard = load(path)
    probe = grafana_view(stack.base)
    options = probe.resolve_variables(dashboard)
    # environment and service left at All: the demo has no environment, one service is the
    # same query
    values = {name: opts for name, opts in options.items() if name not in ("service", "environment")}
    view = grafana_view(stack.base, **values)
    assert real_failures(stack.base, view.failures(dashboard)) == []


def test_the_model_filter_finds_runs_that_have_only_a_response_model(stack):
    """An agent-CLI run without --model has no request model: the $model filter files it under
    the model that answered, so selecting that model shows its spend."""
    dashboard = load(GRAFANA / "dashboards" / "otel-tokens-overview.json")
    options = grafana_view(stack.base).resolve_variables(dashboard)
    assert "claude-sonnet-4" in options["model"] and "" not in options["model"]
    view = Grafana(stack.base, start=stack.start, end=stack.end, scrape_interval_s=SCRAPE_SECONDS,
                   values={"model": ["claude-sonnet-4"], "service": [SERVICES["once"]],
                           "provider": ["github_copilot"]})  # fmt: skip
    spend = next(t for p in panels(dashboard) if p["title"] == "Spend over the range" for t in p["targets"])
    copilot = [r["value"] for r in stack.truths["once"] if r["metric"] == "otel_tokens_cost_USD_total"
               and r["labels"]["gen_ai_provider_name"] == "github_copilot"]  # fmt: skip
    (shown,) = view.run(dashboard, spend)
    assert float(shown["value"][1]) == pytest.approx(sum(copilot), rel=TOLERANCE) and sum(copilot) > 0


# -- the totals equal what the programs recorded ----------------------------------------------
COUNTERS = ("gen_ai_client_operation_duration_seconds_count", "otel_tokens_cost_USD_total",
            "otel_tokens_tokens_total", "otel_tokens_premium_requests_total",
            "otel_tokens_unpriced_requests_total", "otel_tokens_anomalies_total",
            "otel_tokens_instrumentation_errors_total", "otel_tokens_usage_missing_total",
            *sorted(PENDING))  # fmt: skip


#: the unpriced panels' matcher leaving out self-hosted servers (unpriced by design)
NOT_SELF_HOSTED = 'otel_tokens_cost_price_match!="self_hosted"'


def _grouping(expr: str) -> tuple[str, ...]:
    m = re.match(r"(?:sort_desc\()?sum(?: by \(([^)]*)\))?", expr)
    assert m, expr
    return tuple(x.strip() for x in (m.group(1) or "").split(",") if x.strip())


def _metric(expr: str) -> str:
    return min((expr.index(name), name) for name in COUNTERS if name in expr)[1]


def _labels(row: dict) -> dict:
    labels = dict(row["labels"])
    labels["model"] = labels.get("gen_ai_request_model") or labels.get("gen_ai_response_model") or ""
    return labels


def expected(rows: list[dict], expr: str) -> dict[tuple, float]:
    """What the programs recorded, summed the way the panel's query sums it."""
    metric, by = _metric(expr), _grouping(expr)
    first = expr[expr.index(metric):]
    selector = first[first.index("{"):first.index("}")] if "{" in first else ""
    types = re.search(r'gen_ai_token_type=~"([^"]+)"', selector)
    groups: dict[tuple, float] = {}
    for row in rows:
        labels = _labels(row)
        if row["metric"] != metric or (types and not re.fullmatch(types.group(1), labels["gen_ai_token_type"])):
            continue
        if 'error_type!=""' in selector and not labels.get("error_type"):
            continue
        self_hosted = labels.get("otel_tokens_cost_price_match") == "self_hosted"
        if NOT_SELF_HOSTED in selector and self_hosted:
            continue
        key = tuple(labels.get(name, "") for name in by)
        groups[key] = groups.get(key, 0) + row["value"]
    return groups


def _labelled(rows: list[dict], metric: str, by: tuple[str, ...]) -> bool:
    """Whether the rows of ``metric`` carry every label ``by`` groups by."""
    mine = [set(r["labels"]) for r in rows if r["metric"] == metric]
    return all(all((name in labels) or (name == "model" and "gen_ai_response_model" in labels)
                   for name in by) for labels in mine)  # fmt: skip


def shown(result: list[dict], by: tuple[str, ...]) -> dict[tuple, float]:
    return {tuple(s["metric"].get(name, "") for name in by): float(s["value"][1]) for s in result}


def compare(rows: list[dict], view: Grafana, dashboard: dict, agent: str | None = None) -> list[str]:
    """Every "over the range" panel against ``rows``: the differences beyond 1%."""
    if agent is not None:
        rows = [r for r in rows if r["labels"].get("gen_ai_agent_name") == agent]
    problems = []
    for panel in panels(dashboard):
        if "over the range" not in panel["title"]:
            continue
        (t,) = panel["targets"]
        result = view.run(dashboard, t)
        if " / " in t["expr"]:  # a ratio of two totals
            numerator, denominator = t["expr"].split(" / ")
            num = sum(expected(rows, numerator.removeprefix("(").split(" or vector(0))")[0]).values())
            want = {(): num / sum(expected(rows, denominator).values())}
            got = shown(result, ())
        else:
            by = _grouping(t["expr"])
            want, got = expected(rows, t["expr"]), shown(result, by)
            if not _labelled(rows, _metric(t["expr"]), by):  # the program's account lacks a label
                want, got = {(): sum(want.values())}, {(): sum(got.values())}
        want = {k: v for k, v in want.items() if v}
        got = {k: v for k, v in got.items() if v or k in want}
        if set(want) != set(got) or any(not math.isclose(got[k], v, rel_tol=TOLERANCE) for k, v in want.items()):
            problems.append(f"{panel['title']!r}: shown {got}, recorded {want}")
    return problems


def totals_view(stack: Stack, scenario: str, start: float, end: float, **values) -> Grafana:
    span = math.ceil(end - start)
    return Grafana(stack.base, start=end - span, end=end, scrape_interval_s=SCRAPE_SECONDS,
                   values={"service": [SERVICES[scenario]], **values})  # fmt: skip


@pytest.mark.parametrize("scenario", ["long", "once", "runs", "demo"])
@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.stem)
def test_totals_over_the_range_equal_what_the_programs_recorded(stack, scenario, path):
    """(b) long-running, (a) one process scraped once, (c) processes in a row, and the demo
    (every call before its first scrape): each "over the range" panel equals the programs' own
    account within 1%, overall and by every label it breaks down by."""
    dashboard = load(path)
    rows = stack.truths[scenario]
    assert rows and sum(r["value"] for r in rows if r["metric"] == "otel_tokens_cost_USD_total") > 0
    multi_agent = any(v["name"] == "agent" and v.get("multi") for v in dashboard["templating"]["list"])
    agents = [None] if multi_agent else sorted({r["labels"]["gen_ai_agent_name"] for r in rows
                                                 if "gen_ai_agent_name" in r["labels"]})
    for agent in agents:
        values = {} if agent is None else {"agent": [agent]}
        view = totals_view(stack, scenario, stack.start, stack.end, **values)
        assert compare(rows, view, dashboard, agent) == [], agent


def test_self_hosted_calls_are_not_counted_as_unpriced(stack):
    """The workload's calls to a self-hosted server (Ollama on localhost) are counted unpriced
    with price_match self_hosted; the "Unpriced requests" stat shows only the others."""
    dashboard = load(GRAFANA / "dashboards" / "otel-tokens-overview.json")
    rows = [r for r in stack.truths["long"] if r["metric"] == "otel_tokens_unpriced_requests_total"]
    local = sum(r["value"] for r in rows
                if r["labels"].get("otel_tokens_cost_price_match") == "self_hosted")  # fmt: skip
    others = sum(r["value"] for r in rows) - local
    assert local > 0 and others > 0
    stat = next(t for p in panels(dashboard) if p["title"] == "Unpriced requests over the range"
                for t in p["targets"])  # fmt: skip
    (result,) = totals_view(stack, "long", stack.start, stack.end).run(dashboard, stat)
    assert float(result["value"][1]) == pytest.approx(others, rel=TOLERANCE)


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.stem)
def test_totals_over_a_window_that_starts_mid_run(stack, path):
    """(b) from a moment the long-running process was already counting: what it recorded
    between the two moments, not its whole count and not less."""
    dashboard = load(path)
    t1, t2, rows = stack.window
    multi_agent = any(v["name"] == "agent" and v.get("multi") for v in dashboard["templating"]["list"])
    for agent in [None] if multi_agent else ["planner", "coder"]:
        values = {} if agent is None else {"agent": [agent]}
        view = totals_view(stack, "long", t1 - 1, t2, **values)
        assert compare(rows, view, dashboard, agent) == [], agent


def test_the_demo_s_figures_are_the_ones_the_issue_saw_missing(stack):
    """The issue's demo: USD 0.0468 spent, 1 premium request, 1 budget anomaly; the dashboards
    showed USD 0.0185, 0 and 0 (increase() never counts a series' first sample)."""
    cost = sum(f["cost_usd"] for f in stack.demo.values())
    assert cost == pytest.approx(0.0468, abs=0.0001)
    dashboard = load(GRAFANA / "dashboards" / "otel-tokens-overview.json")
    view = totals_view(stack, "demo", stack.start, stack.end)
    values = {p["title"]: view.run(dashboard, p["targets"][0]) for p in panels(dashboard)
              if p["title"] in ("Spend over the range", "Premium requests over the range",
                                "Anomalies over the range")}  # fmt: skip
    assert float(values["Spend over the range"][0]["value"][1]) == pytest.approx(cost, rel=TOLERANCE)
    assert float(values["Premium requests over the range"][0]["value"][1]) == 1
    assert float(values["Anomalies over the range"][0]["value"][1]) == 1


def test_the_comparison_can_fail(stack):
    """The check is not blind: a panel that uses plain increase() (what the dashboards did
    before) is reported for the short processes."""
    dashboard = load(GRAFANA / "dashboards" / "otel-tokens-overview.json")
    mutated = copy.deepcopy(dashboard)
    victim = next(p for p in panels(mutated) if p["title"] == "Spend over the range")
    victim["targets"][0]["expr"] = 'sum(increase(otel_tokens_cost_USD_total{service_name=~"$service"}[$__range]))'
    view = totals_view(stack, "runs", stack.start, stack.end)
    problems = compare(stack.truths["runs"], view, mutated)
    assert len(problems) == 1 and problems[0].startswith("'Spend over the range'"), problems


def test_macros_are_substituted_like_grafana(stack):
    base = stack.base
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
    base = stack.base
    dashboard = load(GRAFANA / "dashboards" / "otel-tokens-overview.json")
    mutated = copy.deepcopy(dashboard)
    victim = next(p for p in panels(mutated) if p["title"] == "Spend in the last hour by model")
    victim["targets"][0]["expr"] = victim["targets"][0]["expr"].replace(
        "otel_tokens_cost_USD_total", "otel_tokens_cost_usd_total")
    problems = real_failures(base, grafana_view(base).failures(mutated))
    assert len(problems) == 1 and "'Spend in the last hour by model' A: no data" in problems[0], problems
    # and the context gauge queried under only one of its two names still works here
    victim["targets"][0]["expr"] = "otel_tokens_context_utilization_ratio"
    assert not has_data(grafana_view(base).run(mutated, victim["targets"][0]))


def test_the_readme_s_promql_answers(stack):
    """The README's PromQL for the common questions runs and answers on the real Prometheus."""
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```promql\n(.*?)```", text, re.S)
    assert blocks
    queries, current = [], []
    for line in "\n".join(blocks).splitlines() + ["#"]:
        if line.startswith("#") or not line.strip():
            if current:
                queries.append(" ".join(current))
            current = []
        else:
            current.append(line.strip())
    assert len(queries) >= 3
    for expr in queries:
        assert query(stack.base, expr), expr
