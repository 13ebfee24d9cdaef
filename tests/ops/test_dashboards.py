"""The committed dashboards: equal to what grafana/generate.py produces, valid for Grafana's
dashboard schema (the foundation SDK's round trip: unknown keys are lost and so differ), and
querying only names of the telemetry contract and recording rules that exist."""

from __future__ import annotations

import importlib.util
import json
import re

import pytest
import yaml

from .conftest import GRAFANA, PENDING, ROOT, RULE_FILES
from .grafana_queries import panels

sdk = pytest.importorskip("grafana_foundation_sdk", reason="pip install 'grafana-foundation-sdk==1769699379!11.6.0'")
from grafana_foundation_sdk.cog import plugins  # noqa: E402
from grafana_foundation_sdk.cog.encoder import JSONEncoder  # noqa: E402
from grafana_foundation_sdk.models import dashboard as dm  # noqa: E402

_spec = importlib.util.spec_from_file_location("grafana_generate", GRAFANA / "generate.py")
generate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(generate)

DASHBOARDS = sorted((GRAFANA / "dashboards").glob("*.json"))


def test_the_generator_makes_exactly_the_committed_files():
    assert sorted(p.name for p in DASHBOARDS) == sorted(generate.DASHBOARDS)
    for name, build in generate.DASHBOARDS.items():
        assert (GRAFANA / "dashboards" / name).read_text() == generate.render(build), (
            f"{name} is stale: run python grafana/generate.py")
    assert generate.main(["--check"]) == 0


def round_trip(data: dict) -> dict:
    plugins.register_default_plugins()
    return json.loads(json.dumps(dm.Dashboard.from_json(data), cls=JSONEncoder))


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.stem)
def test_dashboard_json_survives_the_schema_round_trip(path):
    data = json.loads(path.read_text())
    assert round_trip(data) == data


def test_the_round_trip_rejects_an_unknown_key():
    data = json.loads(DASHBOARDS[0].read_text())
    data["panels"][1]["fieldConfig"]["defaults"]["unitt"] = "USD"
    assert round_trip(data) != data


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.stem)
def test_dashboard_structure(path):
    data = json.loads(path.read_text())
    assert data["uid"] and len(data["uid"]) <= 40
    names = [v["name"] for v in data["templating"]["list"]]
    assert names == ["datasource", "environment", "service", "provider", "operation", "model", "agent"]
    ids = [p["id"] for p in data["panels"]]
    assert len(ids) == len(set(ids))
    known_types = {"row", "stat", "timeseries", "bargauge"}
    for panel in panels(data):
        assert panel["type"] in known_types
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs)) and all(refs), panel["title"]
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24
        for t in panel["targets"]:
            assert "_sum" not in t["expr"] or "estimate_error" not in t["expr"]


def contract_names() -> set[str]:
    """The Prometheus names of docs/telemetry-contract.md's metric table."""
    text = (ROOT / "docs" / "telemetry-contract.md").read_text()
    text = text.split("## Metrics", 1)[1].split("\n## ", 1)[0]  # the metric table only
    names = set()
    for row in text.splitlines():
        if row.startswith("| `"):
            last = row.rstrip("|").split("|")[-1]
            for name in re.findall(r"`([a-zA-Z_:][a-zA-Z0-9_:]*)`", last):
                names.add(name)
            for base, suffixes in re.findall(r"`(\w+?)_(bucket/_sum/_count|\*)`", last):
                names |= {f"{base}_bucket", f"{base}_sum", f"{base}_count"}
            names |= {f"{n}_ratio" for n in re.findall(r"`(\w+)` \(`_ratio`", last)}
    return names


def metric_names(expr: str) -> set[str]:
    """Metric names in a PromQL expression (label matchers, grouping labels and strings left
    out; `__name__=~"a(_b)?"` expanded)."""
    found = set()
    for regex in re.findall(r'__name__=~"([^"]+)"', expr):
        head, _, tail = regex.partition("(")
        alternatives = [head] if not tail else [head, head + tail.split(")")[0]]
        for a in alternatives:
            found |= set(a.split("|"))
    stripped = re.sub(r"\{[^}]*\}", "", expr)
    stripped = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", stripped)
    stripped = re.sub(r'"[^"]*"', "", stripped)
    stripped = re.sub(r"\[[^\]]*\]", "", stripped)
    for name in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", stripped):
        if name.startswith(("otel_tokens", "gen_ai_")) or ":" in name:
            found.add(name)
    return found


def recording_rules() -> set[str]:
    return {r["record"] for p in RULE_FILES for g in yaml.safe_load(p.read_text())["groups"]
            for r in g["rules"] if "record" in r}  # fmt: skip


def all_exprs():
    for path in DASHBOARDS:
        data = json.loads(path.read_text())
        for panel in panels(data):
            for t in panel["targets"]:
                yield f"{path.name}: {panel['title']}", t["expr"]
        for var in data["templating"]["list"]:
            if var["type"] == "query":
                # label_values(selector, label): the label is not a metric
                yield f"{path.name}: ${var['name']}", re.sub(r",\s*\w+\)$", ")", var["query"])
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                yield f"{path.name}: {rule.get('alert') or rule.get('record')}", rule["expr"]


def test_every_query_uses_contract_names_or_recording_rules():
    allowed = contract_names() | recording_rules() | {"target_info"} | PENDING
    assert {"otel_tokens_cost_USD_total", "otel_tokens_estimate_error_bucket",
            "otel_tokens_context_utilization", "otel_tokens_context_utilization_ratio",
            "gen_ai_client_operation_duration_seconds_count"} <= allowed  # fmt: skip
    unknown = {(where, name) for where, expr in all_exprs() for name in metric_names(expr)
               if name not in allowed}  # fmt: skip
    assert unknown == set()


def test_the_name_check_catches_a_wrong_name():
    assert metric_names('sum by (gen_ai_agent_name) (rate(otel_tokens_cost_usd_total{a="b"}[5m]))') == {
        "otel_tokens_cost_usd_total"}
    assert "otel_tokens_cost_usd_total" not in contract_names()
    assert metric_names('max({__name__=~"otel_tokens_context_utilization(_ratio)?"})') == {
        "otel_tokens_context_utilization", "otel_tokens_context_utilization_ratio"}


def test_no_query_reads_the_signed_histogram_sum_or_count():
    bad = [w for w, e in all_exprs() if re.search(r"otel_tokens_estimate_error_(sum|count)", e)]
    assert bad == []
