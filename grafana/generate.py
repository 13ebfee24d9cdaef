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

COST = "otel_tokens_cost_USD_total"
TOKENS = "otel_tokens_tokens_total"
PREMIUM = "otel_tokens_premium_requests_total"
UNPRICED = "otel_tokens_unpriced_requests_total"
ERRORS = "otel_tokens_instrumentation_errors_total"
ANOMALIES = "otel_tokens_anomalies_total"
ESTIMATE = "otel_tokens_estimate_error_bucket"
DURATION = "gen_ai_client_operation_duration_seconds"
TTFC = "gen_ai_client_operation_time_to_first_chunk_seconds"
USAGE = "gen_ai_client_token_usage_bucket"
# the SDK's /metrics names the gauge without a unit suffix, the collector adds _ratio
CONTEXT = '__name__=~"otel_tokens_context_utilization(_ratio)?"'

#: label matchers of the template variables
ALL = 'service_name=~"$service", gen_ai_provider_name=~"$provider", gen_ai_request_model=~"$model", gen_ai_agent_name=~"$agent"'
SERVICE = 'service_name=~"$service"'
FAILED = 'error_type!=""'


def token_type(value: str) -> str:
    return f'gen_ai_token_type=~"{value}"'


def sel(*extra: str, base: str = ALL) -> str:
    return "{" + ", ".join([base, *extra]) + "}"


def target(expr: str, legend: str = "__auto", ref: str = "A", instant: bool = False) -> prom.Dataquery:
    query = prom.Dataquery().expr(expr).legend_format(legend).ref_id(ref).datasource(DATASOURCE)
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
    panel = stat.Panel().no_value("0").graph_mode(cm.BigValueGraphMode.AREA).reduce_options(
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
    def query_var(name, label, query, multi=True):
        var = (db.QueryVariable(name).label(label).query(query).datasource(DATASOURCE)
               .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(dm.VariableSort.ALPHABETICAL_ASC))
        if multi:
            var = var.multi(True).include_all(True).all_value(".*").current(
                dm.VariableOption(selected=True, text="All", value="$__all"))
        return var
    return [
        db.DatasourceVariable("datasource").label("Data source").type("prometheus"),
        # service_name is on every series through the collector; the SDK's embedded /metrics
        # puts it on target_info only, so both are asked.
        query_var("service", "Service", 'label_values({__name__=~"otel_tokens_tokens_total|target_info"}, service_name)'),
        query_var("provider", "Provider", f"label_values({TOKENS}{{{SERVICE}}}, gen_ai_provider_name)"),
        query_var("model", "Model", f'label_values({TOKENS}{{{SERVICE}, gen_ai_provider_name=~"$provider"}}, gen_ai_request_model)'),
        query_var("agent", "Agent", f"label_values({TOKENS}{{{SERVICE}}}, gen_ai_agent_name)", multi=agent_multi),
    ]


def dashboard(uid, title, description, tags):
    board = (db.Dashboard(title).uid(uid).description(description).tags(tags).editable()
             .time("now-6h", "now").refresh("1m").timezone("browser")
             .tooltip(dm.DashboardCursorSync.CROSSHAIR))
    return board


def overview() -> db.Dashboard:
    board = dashboard("otel-tokens-overview", "otel_tokens / overview",
                      "What LLM agents consume: spend, tokens, premium requests, context and estimates.",
                      ["otel_tokens", "llm", "cost"])
    for var in variables():
        board = board.with_variable(var)
    board = board.link(db.DashboardLink("Per agent").type(dm.DashboardLinkType.DASHBOARDS)
                       .tags(["otel_tokens-agent"]).include_vars(True).keep_time(True).as_dropdown(False))
    cost_rate = f"sum(rate({COST}{sel()}[{RATE}])) * 3600"
    panels = [
        db.Row("Spend"),
        st("Spend now", "USD per hour at the current rate (otel_tokens.cost).", "currencyUSD",
           target(cost_rate, "USD/h"), decimals=2),
        st("Spend over the range", "USD spent in the dashboard's time range.", "currencyUSD",
           target(f"sum(increase({COST}{sel()}[{RANGE}]))", "USD", instant=True), decimals=2),
        st("Budget", "The fleet budget of the OtelTokensSpendOverBudget alert, USD per hour "
           "(recording rule otel_tokens:budget_usd_per_hour; docs/ops.md).", "currencyUSD",
           target("otel_tokens:budget_usd_per_hour", "USD/h", instant=True)),
        st("Premium requests over the range", "Premium requests (GitHub Copilot and others).", "none",
           target(f"sum(increase({PREMIUM}{sel()}[{RANGE}]))", "requests", instant=True), decimals=1),
        st("Unpriced requests over the range", "Requests to models without a price: their cost is "
           "missing from every spend panel. Add them to OTEL_TOKENS_PRICES_FILE.", "none",
           target(f"sum(increase({UNPRICED}{sel()}[{RANGE}]))", "requests", instant=True),
           thresholds=[(1, "orange")], decimals=0),
        st("Error rate", "Share of backend calls that failed (error.type set).", "percentunit",
           target(f'sum(rate({DURATION}_count{sel(FAILED)}[{RATE}])) '
                  f"/ sum(rate({DURATION}_count{sel()}[{RATE}]))", "errors"),
           thresholds=[(0.05, "orange"), (0.2, "red")]),
        ts("Spend by model", "USD per hour by provider and request model.", "currencyUSD",
           target(f"sum by (gen_ai_provider_name, gen_ai_request_model) (rate({COST}{sel()}[{RATE}])) * 3600",
                  "{{gen_ai_provider_name}} {{gen_ai_request_model}}"), stack=True),
        ts("Spend by agent", "USD per hour by service and agent (gen_ai.agent.name).", "currencyUSD",
           target(f"sum by (service_name, gen_ai_agent_name) (rate({COST}{sel()}[{RATE}])) * 3600",
                  "{{gen_ai_agent_name}} {{service_name}}"), stack=True),
        ts("Spend by provider", "USD per hour by provider.", "currencyUSD",
           target(f"sum by (gen_ai_provider_name) (rate({COST}{sel()}[{RATE}])) * 3600",
                  "{{gen_ai_provider_name}}"), stack=True),
        bars("Spend over the range by model", "USD per model in the time range; cost source "
             "provider (reported by the backend) or computed (genai-prices).", "currencyUSD",
             target(f"sort_desc(sum by (gen_ai_request_model, otel_tokens_cost_source) "
                    f"(increase({COST}{sel()}[{RANGE}])))",
                    "{{gen_ai_request_model}} ({{otel_tokens_cost_source}})", instant=True)),
        db.Row("Tokens"),
        ts("Tokens per second by type", "input includes cache_read and cache_write; output "
           "includes reasoning (OpenTelemetry GenAI conventions).", "short",
           target(f"sum by (gen_ai_token_type) (rate({TOKENS}{sel()}[{RATE}]))", "{{gen_ai_token_type}}"),
           span=24),
        ts("Cache hit ratio", "Cached input tokens read / all input tokens.", "percentunit",
           target(f'sum(rate({TOKENS}{sel(token_type("cache_read"))}[{RATE}])) '
                  f'/ sum(rate({TOKENS}{sel(token_type("input"))}[{RATE}]))',
                  "cache hit ratio"), span=8),
        ts("Reasoning share of output", "Reasoning tokens / all output tokens.", "percentunit",
           target(f'sum(rate({TOKENS}{sel(token_type("reasoning"))}[{RATE}])) '
                  f'/ sum(rate({TOKENS}{sel(token_type("output"))}[{RATE}]))',
                  "reasoning share"), span=8),
        ts("Tokens per request p50 / p95", "Per-request token counts (gen_ai.client.token.usage).", "short",
           target(f"histogram_quantile(0.5, sum by (le, gen_ai_token_type) (rate({USAGE}{sel()}[{RATE}])))",
                  "p50 {{gen_ai_token_type}}"),
           target(f"histogram_quantile(0.95, sum by (le, gen_ai_token_type) (rate({USAGE}{sel()}[{RATE}])))",
                  "p95 {{gen_ai_token_type}}", ref="B"), span=8),
        db.Row("Requests"),
        ts("Premium requests per hour", "By agent and model.", "short",
           target(f"sum by (gen_ai_agent_name, gen_ai_request_model) (rate({PREMIUM}{sel()}[{RATE}])) * 3600",
                  "{{gen_ai_agent_name}} {{gen_ai_request_model}}")),
        ts("Cost per request p50 / p95", "The contract has no per-request cost histogram: this is "
           "the mean cost per successful request of each service x agent x model, and the p50 / "
           "p95 across those means.", "currencyUSD",
           target(_cost_per_request(0.5), "p50"), target(_cost_per_request(0.95), "p95", ref="B")),
        ts("Requests per second and errors", "Backend calls by model; failures by error.type.", "reqps",
           target(f"sum by (gen_ai_request_model) (rate({DURATION}_count{sel()}[{RATE}]))", "{{gen_ai_request_model}}"),
           target(f'sum by (error_type) (rate({DURATION}_count{sel(FAILED)}[{RATE}]))',
                  "failed: {{error_type}}", ref="B")),
        ts("Instrumentation errors per minute", "Faults otel_tokens caught and counted, by kind "
           "(the instrumented program is unaffected).", "short",
           target(f"sum by (otel_tokens_error_kind) (rate({ERRORS}{{{SERVICE}}}[{RATE}])) * 60",
                  "{{otel_tokens_error_kind}}")),
        bars("Unpriced requests by model", "Requests without a price in the time range.", "none",
             target(f"sort_desc(sum by (gen_ai_provider_name, gen_ai_request_model) (increase({UNPRICED}{sel()}[{RANGE}])))",
                    "{{gen_ai_provider_name}} {{gen_ai_request_model}}", instant=True)),
        ts("Latency p95 by model", "Operation duration and time to first chunk (streaming).", "s",
           target(f"histogram_quantile(0.95, sum by (le, gen_ai_request_model) (rate({DURATION}_bucket{sel()}[{RATE}])))",
                  "duration {{gen_ai_request_model}}"),
           target(f"histogram_quantile(0.95, sum by (le, gen_ai_request_model) (rate({TTFC}_bucket{sel()}[{RATE}])))",
                  "first chunk {{gen_ai_request_model}}", ref="B")),
        db.Row("Context and estimates"),
        ts("Context utilization per agent", "Last completed turn's input tokens / max_input_tokens. "
           "OtelTokensContextNearlyFull fires above 90% for 10 minutes.", "percentunit",
           target(f'max by (service_name, gen_ai_agent_name) ({{{CONTEXT}, {SERVICE}, gen_ai_agent_name=~"$agent"}})',
                  "{{gen_ai_agent_name}} {{service_name}}")).max(1).min(0),
        ts("Estimate error p5 / p50 / p95", "(estimate - actual) / actual of input tokens, by "
           "estimate source; from the buckets (the signed histogram has no _sum/_count).", "percentunit",
           *[target(f"histogram_quantile({q}, sum by (le, otel_tokens_estimate_source) (rate({ESTIMATE}{sel()}[{RATE}])))",
                    f"p{int(q * 100)} {{{{otel_tokens_estimate_source}}}}", ref=ref)
             for q, ref in ((0.05, "A"), (0.5, "B"), (0.95, "C"))]),
        bars("Anomalies by kind", "In-process budget and spike detections (otel_tokens.anomalies) "
             "in the time range.", "none",
             target(f"sort_desc(sum by (otel_tokens_anomaly_kind, gen_ai_agent_name) (increase({ANOMALIES}{sel()}[{RANGE}])))",
                    "{{otel_tokens_anomaly_kind}} {{gen_ai_agent_name}}", instant=True), span=24, height=6),
    ]
    return _add(board, panels)


def _cost_per_request(q: float) -> str:
    by = "service_name, gen_ai_agent_name, gen_ai_request_model"
    ok = sel('error_type=""')
    return (f"quantile({q}, sum by ({by}) (rate({COST}{sel()}[{RATE}])) "
            f"/ sum by ({by}) (rate({DURATION}_count{ok}[{RATE}])))")


def agent() -> db.Dashboard:
    board = dashboard("otel-tokens-agent", "otel_tokens / agent",
                      "One agent: what it spends, on which models, how full its context is.",
                      ["otel_tokens", "otel_tokens-agent", "llm", "cost"])
    for var in variables(agent_multi=False):
        board = board.with_variable(var)
    board = board.link(db.DashboardLink("Overview").type(dm.DashboardLinkType.DASHBOARDS)
                       .tags(["otel_tokens"]).include_vars(True).keep_time(True))
    panels = [
        db.Row("Agent $agent"),
        st("Spend now", "USD per hour at the current rate.", "currencyUSD",
           target(f"sum(rate({COST}{sel()}[{RATE}])) * 3600", "USD/h"), decimals=2),
        st("Spend over the range", "USD in the time range.", "currencyUSD",
           target(f"sum(increase({COST}{sel()}[{RANGE}]))", "USD", instant=True), decimals=2),
        st("Tokens over the range", "Input + output tokens.", "short",
           target(f'sum(increase({TOKENS}{sel(token_type("input|output"))}[{RANGE}]))',
                  "tokens", instant=True)),
        st("Premium requests over the range", "", "none",
           target(f"sum(increase({PREMIUM}{sel()}[{RANGE}]))", "requests", instant=True), decimals=1),
        st("Requests over the range", "Backend calls, failed ones included.", "none",
           target(f"sum(increase({DURATION}_count{sel()}[{RANGE}]))", "requests", instant=True), decimals=0),
        st("Context utilization", "Last completed turn / max_input_tokens.", "percentunit",
           target(f'max({{{CONTEXT}, {SERVICE}, gen_ai_agent_name=~"$agent"}})', "context"),
           thresholds=[(0.75, "orange"), (0.9, "red")]),
        ts("Spend by model", "USD per hour.", "currencyUSD",
           target(f"sum by (gen_ai_request_model) (rate({COST}{sel()}[{RATE}])) * 3600", "{{gen_ai_request_model}}"),
           stack=True),
        ts("Tokens per second by type", "", "short",
           target(f"sum by (gen_ai_token_type) (rate({TOKENS}{sel()}[{RATE}]))", "{{gen_ai_token_type}}")),
        ts("Context utilization", "Per service running this agent.", "percentunit",
           target(f'max by (service_name) ({{{CONTEXT}, {SERVICE}, gen_ai_agent_name=~"$agent"}})',
                  "{{service_name}}")).max(1).min(0),
        ts("Requests per minute by model and outcome", "", "short",
           target(f"sum by (gen_ai_request_model, error_type) (rate({DURATION}_count{sel()}[{RATE}])) * 60",
                  "{{gen_ai_request_model}} {{error_type}}")),
        ts("Latency p50 / p95", "Operation duration.", "s",
           target(f"histogram_quantile(0.5, sum by (le) (rate({DURATION}_bucket{sel()}[{RATE}])))", "p50"),
           target(f"histogram_quantile(0.95, sum by (le) (rate({DURATION}_bucket{sel()}[{RATE}])))", "p95", ref="B"),
           target(f"histogram_quantile(0.95, sum by (le) (rate({TTFC}_bucket{sel()}[{RATE}])))", "first chunk p95", ref="C")),
        ts("Estimate error p50", "Median (estimate - actual) / actual of input tokens by source.", "percentunit",
           target(f"histogram_quantile(0.5, sum by (le, otel_tokens_estimate_source) (rate({ESTIMATE}{sel()}[{RATE}])))",
                  "{{otel_tokens_estimate_source}}")),
        bars("Anomalies by kind", "In-process budget and spike detections in the time range.", "none",
             target(f"sort_desc(sum by (otel_tokens_anomaly_kind) (increase({ANOMALIES}{sel()}[{RANGE}])))",
                    "{{otel_tokens_anomaly_kind}}", instant=True)),
        bars("Unpriced requests by model", "Requests without a price in the time range.", "none",
             target(f"sort_desc(sum by (gen_ai_request_model) (increase({UNPRICED}{sel()}[{RANGE}])))",
                    "{{gen_ai_request_model}}", instant=True)),
    ]
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
