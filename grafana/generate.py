"""Generate grafana/dashboards/*.json from Python with grafana-foundation-sdk.

    python grafana/generate.py          # write the JSON files
    python grafana/generate.py --check  # exit 1 if a committed file differs from the generated one

Pinned: grafana-foundation-sdk==1769699379!11.6.0 (Grafana 11.6 schema). Every query uses the
Prometheus names of docs/telemetry-contract.md; tests/ops checks the JSON against this
generator, against the SDK's schema (round trip) and runs every query on a real Prometheus.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Any

from grafana_foundation_sdk.builders import bargauge, common, stat, timeseries
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import prometheus as prom
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm

OUT = pathlib.Path(__file__).with_name("dashboards")
DATASOURCE = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")
RATE = "$__rate_interval"
RANGE = "$__range"
HOUR = "1h"

COST = "otel_tokens_cost_USD_total"
TOKENS = "otel_tokens_tokens_total"
PREMIUM = "otel_tokens_premium_requests_total"
UNPRICED = "otel_tokens_unpriced_requests_total"
ERRORS = "otel_tokens_instrumentation_errors_total"
ANOMALIES = "otel_tokens_anomalies_total"
#: calls that returned no usage (issue 19's otel_tokens.usage.missing)
USAGE_MISSING = "otel_tokens_usage_missing_total"
ESTIMATE = "otel_tokens_estimate_error_bucket"
DURATION = "gen_ai_client_operation_duration_seconds"
REQUESTS = f"{DURATION}_count"
TTFC = "gen_ai_client_operation_time_to_first_chunk_seconds"
USAGE = "gen_ai_client_token_usage"
# the SDK's /metrics names the gauge without a unit suffix, the collector adds _ratio
CONTEXT = '__name__=~"otel_tokens_context_utilization(_ratio)?"'

#: Only otel_tokens' own series: another GenAI instrumentation loaded beside it emits
#: gen_ai_client_* under its own scope and must not be counted twice.
SCOPE = 'otel_scope_name="otel_tokens"'
#: the template variables' label matchers (the model is matched apart: see selectors())
FILTERS = (SCOPE, 'deployment_environment_name=~"$environment"', 'service_name=~"$service"',
           'gen_ai_provider_name=~"$provider"', 'gen_ai_operation_name=~"$operation"',
           'gen_ai_agent_name=~"$agent"')  # fmt: skip
BY_REQUEST_MODEL = ('gen_ai_request_model=~"$model"',)
#: a call without a request model (an agent CLI run without --model) is filed under the
#: model that answered it
BY_RESPONSE_MODEL = ('gen_ai_request_model=""', 'gen_ai_response_model=~"$model"')
FAILED = 'error_type!=""'
#: unpriced requests to a self-hosted server (Ollama, vLLM...) are unpriced by design: left out
NOT_SELF_HOSTED = 'otel_tokens_cost_price_match!="self_hosted"'
#: an anomaly's grouping with whose budget it is (a tenant's or a user's: scope and name)
BUDGET_OWNER = "{}, otel_tokens_anomaly_scope, tenant_id, user_id"
UNPRICED_NOTE = "Requests without a price in the time range (self-hosted servers left out)."
SUCCEEDED = 'error_type=""'


def token_type(value: str) -> str:
    return f'gen_ai_token_type=~"{value}"'


def selectors(metric: str, *extra: str, models: bool = True) -> list[str]:
    """The series of ``metric`` the variables select: one selector, or two when the model
    filter applies (the request model, else the response model). ``models=False``: a metric
    without call attributes (instrumentation errors), filtered by scope and resource only."""
    base = [*(FILTERS if models else FILTERS[:3]), *extra]
    if not models:
        return [metric + "{" + ", ".join(base) + "}"]
    return [metric + "{" + ", ".join(base + list(m)) + "}" for m in (BY_REQUEST_MODEL, BY_RESPONSE_MODEL)]


def _either(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else "(" + " or ".join(parts) + ")"


def over(function: str, metric: str, window: str, *extra: str, models: bool = True) -> str:
    """``function(metric[window])`` over the selected series (rate, increase, ...)."""
    return _either([f"{function}({s}[{window}])" for s in selectors(metric, *extra, models=models)])


def counted(selector: str, window: str) -> str:
    """What each series of ``selector`` (a counter) added within ``window``, its first sample
    included.

    ``increase()`` never counts a series' first sample, so the usage of a process scraped
    (or exported) once, or of every process before its second scrape, would be lost. Per
    series, in this order (``or`` keeps the first that applies):

    1. it existed before the window and did not reset: last value - value before the window
       (exact: no extrapolation);
    2. it existed before and reset within the window (a collector restarted): ``increase()``;
    3. it appeared within the window (a new process, a new label set): its last value, all of
       it counted from 0.

    The alert rules use the same expression (tests/ops checks it); docs/ops.md explains it.
    """
    before, last = f"{selector} offset {window}", f"last_over_time({selector}[{window}])"
    return (f"((({last} - {before}) >= 0 unless resets({selector}[{window}]) > 0)"
            f" or (increase({selector}[{window}]) and {before})"
            f" or ({last} unless {before}))")  # fmt: skip


def total(metric: str, window: str, *extra: str, models: bool = True) -> str:
    """:func:`counted` over the series the variables select."""
    return _either([counted(s, window) for s in selectors(metric, *extra, models=models)])


def by_model(expr: str) -> str:
    """``expr`` with a ``model`` label: the request model, else the response model."""
    inner = f'label_replace({expr}, "model", "$1", "gen_ai_response_model", "(.+)")'
    return f'label_replace({inner}, "model", "$1", "gen_ai_request_model", "(.+)")'


def summed(expr: str, by: str = "", model: bool = False) -> str:
    """``sum by (by) (expr)``; ``model`` adds the request-else-response model label."""
    labels = ", ".join(x for x in (by, "model" if model else "") if x)
    inner = by_model(expr) if model else expr
    return f"sum by ({labels}) ({inner})" if labels else f"sum({inner})"


def target(expr: str, legend: str = "__auto", ref: str = "A", instant: bool = False,
           exemplar: bool = False) -> prom.Dataquery:  # fmt: skip
    query = prom.Dataquery().expr(expr).legend_format(legend).ref_id(ref).datasource(DATASOURCE)
    if exemplar:
        query = query.exemplar(True)
    return query.instant() if instant else query.range()


def _with(panel, title, description, unit, targets, height, span):
    panel = panel.title(title).description(description).unit(unit).datasource(DATASOURCE)
    for t in targets:
        panel = panel.with_target(t)
    return panel.height(height).span(span)


def ts(title, description, unit, *targets, height=8, span=12, stack=False):
    panel = timeseries.Panel().fill_opacity(10).line_width(1).show_points(cm.VisibilityMode.NEVER)
    panel = panel.legend(common.VizLegendOptions().show_legend(True).display_mode(
        cm.LegendDisplayMode.TABLE).placement(cm.LegendPlacement.BOTTOM).calcs(["mean", "max", "lastNotNull"]))
    if stack:
        panel = panel.stacking(common.StackingConfig().mode(cm.StackingMode.NORMAL))
    return _with(panel, title, description, unit, targets, height, span)


def st(title, description, unit, *targets, height=4, span=4, thresholds=None, decimals=None):
    panel = stat.Panel().no_value("0").graph_mode(cm.BigValueGraphMode.NONE).reduce_options(
        common.ReduceDataOptions().calcs(["lastNotNull"]))
    if thresholds:
        steps = [dm.Threshold(value=None, color="green")] + [dm.Threshold(value=v, color=c) for v, c in thresholds]
        panel = panel.thresholds(db.ThresholdsConfig().mode(dm.ThresholdsMode.ABSOLUTE).steps(steps))
    if decimals is not None:
        panel = panel.decimals(decimals)
    return _with(panel, title, description, unit, targets, height, span)


def bars(title, description, unit, *targets, height=8, span=12):
    panel = bargauge.Panel().orientation(cm.VizOrientation.HORIZONTAL).display_mode(
        cm.BarGaugeDisplayMode.GRADIENT).reduce_options(common.ReduceDataOptions().calcs(["lastNotNull"]))
    return _with(panel, title, description, unit, targets, height, span)


def variables(agent_multi: bool = True) -> list:
    def query_var(name, label, query, multi=True, regex=None):
        var = (db.QueryVariable(name).label(label).query(query).datasource(DATASOURCE)
               .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(dm.VariableSort.ALPHABETICAL_ASC))
        if regex:
            var = var.regex(regex)
        if multi:
            var = var.multi(True).include_all(True).all_value(".*").current(
                dm.VariableOption(selected=True, text="All", value="$__all"))
        return var

    def values_of(label: str, *matchers: str) -> str:
        return f"label_values({TOKENS}{{{', '.join((SCOPE, *matchers))}}}, {label})"

    env, service = 'deployment_environment_name=~"$environment"', 'service_name=~"$service"'
    provider, operation = 'gen_ai_provider_name=~"$provider"', 'gen_ai_operation_name=~"$operation"'
    models = by_model(f"last_over_time({TOKENS}{{{', '.join((SCOPE, env, service, provider, operation))}}}[{RANGE}])")
    return [
        db.DatasourceVariable("datasource").label("Data source").type("prometheus"),
        # deployment.environment(.name) and service.name are labels of every series, through
        # the collector and on otel_tokens' embedded /metrics alike
        query_var("environment", "Environment", values_of("deployment_environment_name")),
        query_var("service", "Service", values_of("service_name", env)),
        query_var("provider", "Provider", values_of("gen_ai_provider_name", env, service)),
        query_var("operation", "Operation", values_of("gen_ai_operation_name", env, service, provider)),
        # the request model, else the model that answered (agent CLIs run without --model)
        query_var("model", "Model", f"query_result(count by (model) ({models}))", regex='/model="([^"]+)"/'),
        query_var("agent", "Agent", values_of("gen_ai_agent_name", env, service), multi=agent_multi),
    ]


def dashboard(uid, title, description, tags):
    board = (db.Dashboard(title).uid(uid).description(description).tags(tags).editable()
             .time("now-6h", "now").refresh("1m").timezone("browser")
             .tooltip(dm.DashboardCursorSync.CROSSHAIR))
    return board


# -- the panels both dashboards share ------------------------------------------------------------
TOTAL_NOTE = (" Every call counts, those of processes scraped only once included (first samples "
              "are added; docs/ops.md).")  # fmt: skip


def spend_total() -> str:
    return summed(total(COST, RANGE))


def tokens_total() -> str:
    return summed(total(TOKENS, RANGE, token_type("input|output")))


def requests_total(*extra: str) -> str:
    return summed(total(REQUESTS, RANGE, *extra))


def error_share() -> str:
    return f"({requests_total(FAILED)} or vector(0)) / {requests_total()}"


def latency_by_model(q: float, metric: str, *extra: str) -> str:
    return f"histogram_quantile({q}, {summed(over('rate', metric + '_bucket', RATE, *extra), 'le', model=True)})"


def time_per_output_token() -> str:
    """Mean seconds per output token: (duration - time to first chunk) / output tokens, of the
    calls that succeeded (a non-streamed call has no first chunk: its whole duration counts)."""
    busy = summed(over("rate", f"{DURATION}_sum", RATE, SUCCEEDED), model=True)
    waiting = summed(over("rate", f"{TTFC}_sum", RATE, SUCCEEDED), model=True)
    out = summed(over("rate", f"{USAGE}_sum", RATE, token_type("output")), model=True)
    return f"({busy} - ({waiting} or {busy} * 0)) / {out}"


def ranked(title: str, description: str, unit: str, metric: str, by: str, legend: str,
           model: bool = False, span: int = 12, extra: tuple[str, ...] = ()) -> Any:  # fmt: skip
    """A bar gauge of ``metric``'s total over the range (``extra``: further label matchers),
    largest first, by ``by``."""
    expr = summed(total(metric, RANGE, *extra), by, model=model)
    return bars(title, description + TOTAL_NOTE, unit, target(f"sort_desc({expr})", legend, instant=True),
                span=span)  # fmt: skip


def breakdowns(noun: str, metric: str, unit: str) -> list:
    """One bar gauge per dimension a user filters by: provider/operation, environment/service."""
    return [
        ranked(f"{noun} over the range by provider and operation", f"{noun} in the time range.", unit, metric,
               "gen_ai_provider_name, gen_ai_operation_name", "{{gen_ai_provider_name}} {{gen_ai_operation_name}}"),
        ranked(f"{noun} over the range by environment and service",
               f"{noun} in the time range (deployment.environment.name, service.name).", unit, metric,
               "deployment_environment_name, service_name", "{{deployment_environment_name}} {{service_name}}"),
    ]  # fmt: skip


def overview() -> db.Dashboard:
    board = dashboard("otel-tokens-overview", "otel_tokens / overview",
                      "What LLM agents consume: spend, tokens, requests, errors, latency, premium "
                      "requests, context and estimates.", ["otel_tokens", "llm", "cost"])  # fmt: skip
    for var in variables():
        board = board.with_variable(var)
    board = board.link(db.DashboardLink("Per agent").type(dm.DashboardLinkType.DASHBOARDS)
                       .tags(["otel_tokens-agent"]).include_vars(True).keep_time(True).as_dropdown(False))
    return _add(board, _overview_totals() + _overview_spend() + _overview_tokens()
                + _overview_requests() + _overview_ours())


def _overview_totals() -> list:
    return [
        db.Row("Over the range"),
        st("Spend over the range", "USD spent in the dashboard's time range (otel_tokens.cost)." + TOTAL_NOTE,
           "currencyUSD", target(spend_total(), "USD", instant=True), decimals=4),
        st("Tokens over the range", "Input + output tokens (cache is inside input, reasoning inside output)." + TOTAL_NOTE,
           "short", target(tokens_total(), "tokens", instant=True)),
        st("Requests over the range", "Backend calls, failed ones included." + TOTAL_NOTE, "none",
           target(requests_total(), "requests", instant=True), decimals=0),
        st("Premium requests over the range", "Premium requests (GitHub Copilot and others)." + TOTAL_NOTE, "none",
           target(summed(total(PREMIUM, RANGE)), "requests", instant=True), decimals=1),
        st("Unpriced requests over the range", "Requests to models without a price: their cost is "
           "missing from every spend panel. Add them to OTEL_TOKENS_PRICES_FILE. Self-hosted servers "
           "(Ollama, vLLM...) have no price by design and are not counted." + TOTAL_NOTE, "none",
           target(summed(total(UNPRICED, RANGE, NOT_SELF_HOSTED)), "requests", instant=True),
           thresholds=[(1, "orange")], decimals=0),
        st("Anomalies over the range", "In-process budget and spike detections (otel_tokens.anomalies)." + TOTAL_NOTE,
           "none", target(summed(total(ANOMALIES, RANGE)), "anomalies", instant=True),
           thresholds=[(1, "orange")], decimals=0),
        st("Spend in the last hour", "USD spent in the hour before the end of the range.", "currencyUSD",
           target(summed(total(COST, HOUR)), "USD", instant=True), decimals=4),
        st("Budget per hour", "The fleet budget of the OtelTokensSpendOverBudget alert, USD per hour "
           "(recording rule otel_tokens:budget_usd_per_hour; docs/ops.md).", "currencyUSD",
           target("otel_tokens:budget_usd_per_hour", "USD/h", instant=True)),
        st("Error rate over the range", "Share of backend calls that failed (error.type set)." + TOTAL_NOTE,
           "percentunit", target(error_share(), "errors", instant=True), thresholds=[(0.05, "orange"), (0.2, "red")]),
        st("Cache hit ratio over the range", "Cached input tokens read / all input tokens." + TOTAL_NOTE,
           "percentunit", target(f"{summed(total(TOKENS, RANGE, token_type('cache_read')))} "
                                 f"/ {summed(total(TOKENS, RANGE, token_type('input')))}", "cache hit ratio", instant=True)),
        st("Calls without usage over the range", "Calls whose backend reported no usage "
           "(otel_tokens.usage.missing): their tokens are unknown, not zero." + TOTAL_NOTE, "none",
           target(summed(total(USAGE_MISSING, RANGE)), "calls", instant=True), thresholds=[(1, "orange")], decimals=0),
        st("Instrumentation errors over the range", "Faults otel_tokens caught and counted (the "
           "instrumented program is unaffected)." + TOTAL_NOTE, "none",
           target(summed(total(ERRORS, RANGE, models=False)), "errors", instant=True), thresholds=[(1, "orange")], decimals=0),
    ]  # fmt: skip


def _overview_spend() -> list:
    return [
        db.Row("Spend"),
        ts("Spend in the last hour by model", "USD spent in the hour before each point, by model "
           "(the request model, else the response model), every call included.", "currencyUSD",
           target(summed(total(COST, HOUR), model=True), "{{model}}"), stack=True),
        ts("Spend in the last hour by agent", "USD spent in the hour before each point, by service "
           "and agent (gen_ai.agent.name).", "currencyUSD",
           target(summed(total(COST, HOUR), "service_name, gen_ai_agent_name"), "{{gen_ai_agent_name}} {{service_name}}"),
           stack=True),
        ranked("Spend over the range by model", "USD per model in the time range; cost source "
             "provider (reported by the backend) or computed (genai-prices).", "currencyUSD", COST, 'otel_tokens_cost_source', "{{model}} ({{otel_tokens_cost_source}})", model=True),
        ranked("Spend over the range by agent", "USD per service and agent in the time range.", "currencyUSD", COST, 'service_name, gen_ai_agent_name', "{{gen_ai_agent_name}} {{service_name}}"),
        *breakdowns("Spend", COST, "currencyUSD"),
    ]  # fmt: skip


def _overview_tokens() -> list:
    return [
        db.Row("Tokens"),
        bars("Tokens over the range by type", "input includes cache_read and cache_write; output "
             "includes reasoning (OpenTelemetry GenAI conventions)." + TOTAL_NOTE, "short",
             target(f"sort_desc({summed(total(TOKENS, RANGE), 'gen_ai_token_type')})", "{{gen_ai_token_type}}",
                    instant=True)),
        ts("Tokens per second by type", "Flow of the running processes (rate).", "short",
           target(summed(over("rate", TOKENS, RATE), "gen_ai_token_type"), "{{gen_ai_token_type}}")),
        ts("Cache hit ratio", "Cached input tokens read / all input tokens.", "percentunit",
           target(f"{summed(over('rate', TOKENS, RATE, token_type('cache_read')))} "
                  f"/ {summed(over('rate', TOKENS, RATE, token_type('input')))}", "cache hit ratio"), span=8),
        ts("Reasoning share of output", "Reasoning tokens / all output tokens.", "percentunit",
           target(f"{summed(over('rate', TOKENS, RATE, token_type('reasoning')))} "
                  f"/ {summed(over('rate', TOKENS, RATE, token_type('output')))}", "reasoning share"), span=8),
        ts("Tokens per request p50 / p95", "Per-request token counts (gen_ai.client.token.usage).", "short",
           target(f"histogram_quantile(0.5, {summed(over('rate', USAGE + '_bucket', RATE), 'le, gen_ai_token_type')})",
                  "p50 {{gen_ai_token_type}}"),
           target(f"histogram_quantile(0.95, {summed(over('rate', USAGE + '_bucket', RATE), 'le, gen_ai_token_type')})",
                  "p95 {{gen_ai_token_type}}", ref="B", exemplar=True), span=8),
    ]  # fmt: skip


def _overview_requests() -> list:
    return [
        db.Row("Requests, errors, latency"),
        ts("Requests per second by provider and operation", "Backend calls (gen_ai.client.operation.duration count).",
           "reqps", target(summed(over("rate", REQUESTS, RATE), "gen_ai_provider_name, gen_ai_operation_name"),
                           "{{gen_ai_provider_name}} {{gen_ai_operation_name}}")),
        ts("Error rate by provider", "Share of calls that failed, by provider.", "percentunit",
           target(f"{summed(over('rate', REQUESTS, RATE, FAILED), 'gen_ai_provider_name')} "
                  f"/ {summed(over('rate', REQUESTS, RATE), 'gen_ai_provider_name')}", "{{gen_ai_provider_name}}"))
        .max(1).min(0),
        ts("Failed requests per minute by error type", "error.type: the exception class (openai.RateLimitError: "
           "HTTP 429) or, for agent CLIs, the HTTP status.", "short",
           target(f"{summed(over('rate', REQUESTS, RATE, FAILED), 'gen_ai_provider_name, error_type')} * 60",
                  "{{gen_ai_provider_name}} {{error_type}}")),
        ts("Latency p95 by model", "Operation duration and time to first chunk (streaming). The dots are "
           "exemplars: a slow call, linked to its trace.", "s",
           target(latency_by_model(0.95, DURATION), "duration {{model}}", exemplar=True),
           target(latency_by_model(0.95, TTFC), "first chunk {{model}}", ref="B", exemplar=True)),
        ts("Time per output token by model", "Mean seconds per output token of the calls that succeeded: "
           "(duration - time to first chunk) / output tokens.", "s",
           target(time_per_output_token(), "{{model}}")),
        ts("Instrumentation errors per minute", "Faults otel_tokens caught and counted, by kind "
           "(the instrumented program is unaffected).", "short",
           target(f"{summed(over('rate', ERRORS, RATE, models=False), 'otel_tokens_error_kind')} * 60",
                  "{{otel_tokens_error_kind}}")),
        *breakdowns("Requests", REQUESTS, "none"),
    ]  # fmt: skip


def _overview_ours() -> list:
    return [
        db.Row("Premium requests, context, estimates, anomalies"),
        ts("Premium requests in the last hour", "By agent and model (the request model, else the response model).",
           "short", target(summed(total(PREMIUM, HOUR), "gen_ai_agent_name", model=True),
                           "{{gen_ai_agent_name}} {{model}}")),
        ts("Context utilization per agent", "Last completed turn's input tokens / max_input_tokens. "
           "OtelTokensContextNearlyFull fires above 90% for 10 minutes.", "percentunit",
           target(f'max by (service_name, gen_ai_agent_name) ({{{CONTEXT}, {SCOPE}, service_name=~"$service", '
                  f'gen_ai_agent_name=~"$agent"}})', "{{gen_ai_agent_name}} {{service_name}}")).max(1).min(0),
        ts("Estimate error p5 / p50 / p95", "(estimate - actual) / actual of input tokens, by "
           "estimate source; from the buckets (the signed histogram has no _sum/_count).", "percentunit",
           *[target(f"histogram_quantile({q}, {summed(over('rate', ESTIMATE, RATE), 'le, otel_tokens_estimate_source')})",
                    f"p{int(q * 100)} {{{{otel_tokens_estimate_source}}}}", ref=ref)
             for q, ref in ((0.05, "A"), (0.5, "B"), (0.95, "C"))]),
        ranked("Anomalies over the range by kind", "In-process budget and spike detections "
             "(otel_tokens.anomalies) in the time range, by kind and agent, and a tenant's or a user's budget "
             "by whose it is.", "none", ANOMALIES, BUDGET_OWNER.format("otel_tokens_anomaly_kind, gen_ai_agent_name"),
             "{{otel_tokens_anomaly_kind}} {{gen_ai_agent_name}} {{otel_tokens_anomaly_scope}} {{tenant_id}}{{user_id}}"),
        ranked("Unpriced requests over the range by model", UNPRICED_NOTE, "none", UNPRICED, "gen_ai_provider_name",
               "{{gen_ai_provider_name}} {{model}}", model=True, extra=(NOT_SELF_HOSTED,)),
        ranked("Calls without usage over the range by model", "Calls whose backend reported no usage, by provider "
             "and model (otel_tokens.usage.missing).", "none", USAGE_MISSING, 'gen_ai_provider_name', "{{gen_ai_provider_name}} {{model}}", model=True),
    ]  # fmt: skip


def agent() -> db.Dashboard:
    board = dashboard("otel-tokens-agent", "otel_tokens / agent",
                      "One agent: what it spends, on which models, how fast, how full its context is.",
                      ["otel_tokens", "otel_tokens-agent", "llm", "cost"])
    for var in variables(agent_multi=False):
        board = board.with_variable(var)
    board = board.link(db.DashboardLink("Overview").type(dm.DashboardLinkType.DASHBOARDS)
                       .tags(["otel_tokens"]).include_vars(True).keep_time(True))
    panels = [
        db.Row("Agent $agent"),
        st("Spend over the range", "USD in the time range." + TOTAL_NOTE, "currencyUSD",
           target(spend_total(), "USD", instant=True), decimals=4),
        st("Tokens over the range", "Input + output tokens." + TOTAL_NOTE, "short",
           target(tokens_total(), "tokens", instant=True)),
        st("Requests over the range", "Backend calls, failed ones included." + TOTAL_NOTE, "none",
           target(requests_total(), "requests", instant=True), decimals=0),
        st("Premium requests over the range", "" + TOTAL_NOTE.strip(), "none",
           target(summed(total(PREMIUM, RANGE)), "requests", instant=True), decimals=1),
        st("Error rate over the range", "Share of the agent's calls that failed." + TOTAL_NOTE, "percentunit",
           target(error_share(), "errors", instant=True), thresholds=[(0.05, "orange"), (0.2, "red")]),
        st("Context utilization", "Last completed turn / max_input_tokens.", "percentunit",
           target(f'max({{{CONTEXT}, {SCOPE}, service_name=~"$service", gen_ai_agent_name=~"$agent"}})', "context"),
           thresholds=[(0.75, "orange"), (0.9, "red")]),
        ts("Spend in the last hour by model", "USD spent in the hour before each point.", "currencyUSD",
           target(summed(total(COST, HOUR), model=True), "{{model}}"), stack=True),
        ranked("Spend over the range by model", "USD per model in the time range.", "currencyUSD", COST, "", "{{model}}", model=True),
        ranked("Tokens over the range by type", "input includes cache; output includes reasoning.", "short", TOKENS, 'gen_ai_token_type', "{{gen_ai_token_type}}"),
        ts("Tokens per second by type", "", "short",
           target(summed(over("rate", TOKENS, RATE), "gen_ai_token_type"), "{{gen_ai_token_type}}")),
        ts("Context utilization", "Per service running this agent.", "percentunit",
           target(f'max by (service_name) ({{{CONTEXT}, {SCOPE}, service_name=~"$service", gen_ai_agent_name=~"$agent"}})',
                  "{{service_name}}")).max(1).min(0),
        ts("Requests per minute by model and outcome", "", "short",
           target(f"{summed(over('rate', REQUESTS, RATE), 'error_type', model=True)} * 60", "{{model}} {{error_type}}")),
        ts("Latency p50 / p95", "Operation duration; the dots are exemplars linked to the calls' traces.", "s",
           target(f"histogram_quantile(0.5, {summed(over('rate', DURATION + '_bucket', RATE), 'le')})", "p50"),
           target(f"histogram_quantile(0.95, {summed(over('rate', DURATION + '_bucket', RATE), 'le')})", "p95", ref="B",
                  exemplar=True),
           target(f"histogram_quantile(0.95, {summed(over('rate', TTFC + '_bucket', RATE), 'le')})", "first chunk p95",
                  ref="C", exemplar=True)),
        ts("Time per output token by model", "(duration - time to first chunk) / output tokens.", "s",
           target(time_per_output_token(), "{{model}}")),
        ts("Estimate error p50", "Median (estimate - actual) / actual of input tokens by source.", "percentunit",
           target(f"histogram_quantile(0.5, {summed(over('rate', ESTIMATE, RATE), 'le, otel_tokens_estimate_source')})",
                  "{{otel_tokens_estimate_source}}")),
        ranked("Anomalies over the range by kind", "In-process budget and spike detections in the time range.", "none", ANOMALIES, 'otel_tokens_anomaly_kind', "{{otel_tokens_anomaly_kind}}"),
        ranked("Unpriced requests over the range by model", UNPRICED_NOTE, "none", UNPRICED, "", "{{model}}",
               model=True, extra=(NOT_SELF_HOSTED,)),
        *breakdowns("Spend", COST, "currencyUSD"),
    ]  # fmt: skip
    return _add(board, panels)


def _add(board: db.Dashboard, panels: list) -> db.Dashboard:
    for panel_id, panel in enumerate(panels, start=1):
        board = board.with_row(panel.id(panel_id)) if isinstance(panel, db.Row) else board.with_panel(panel.id(panel_id))
    return board


DASHBOARDS = {"otel-tokens-overview.json": overview, "otel-tokens-agent.json": agent}


def render(build) -> str:
    return json.dumps(build().build(), cls=JSONEncoder, indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate the otel_tokens Grafana dashboards.")
    parser.add_argument("--check", action="store_true", help="fail if a committed file is stale")
    args = parser.parse_args(argv)
    stale = []
    for name, build in DASHBOARDS.items():
        path, text = OUT / name, render(build)
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    if stale:
        print("stale (run python grafana/generate.py):", *stale, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
