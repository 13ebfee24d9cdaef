"""The embedded default: a real Prometheus exposition on 127.0.0.1 carries the contract's
Prometheus names (the names dashboards and alert rules query)."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import urllib.request

import pytest

pytest.importorskip("opentelemetry.exporter.prometheus",
                    reason="no prometheus extra (otel-tokens[prometheus])")

WORKLOAD = pathlib.Path(__file__).with_name("workload.py")

#: The "Prometheus name" column of docs/telemetry-contract.md.
CONTRACT_NAMES = [
    "gen_ai_client_token_usage_bucket", "gen_ai_client_token_usage_sum",
    "gen_ai_client_token_usage_count",
    "gen_ai_client_operation_duration_seconds_bucket",
    "gen_ai_client_operation_duration_seconds_sum",
    "gen_ai_client_operation_duration_seconds_count",
    "gen_ai_client_operation_time_to_first_chunk_seconds_bucket",
    "gen_ai_client_operation_time_to_first_chunk_seconds_sum",
    "gen_ai_client_operation_time_to_first_chunk_seconds_count",
    "otel_tokens_tokens_total",
    "otel_tokens_cost_USD_total",
    "otel_tokens_premium_requests_total",
    "otel_tokens_estimate_error_bucket",  # no _sum/_count: see the test below
    "otel_tokens_context_utilization",
    "otel_tokens_anomalies_total",
    "otel_tokens_unpriced_requests_total",
    "otel_tokens_instrumentation_errors_total",
]  # fmt: skip

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse(text: str) -> list[tuple[str, dict[str, str], float]]:
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        assert m, line
        samples.append((m.group(1), dict(_LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return samples


@pytest.fixture(scope="module")
def exposition():
    env = {**os.environ, "OTEL_TOKENS_PROMETHEUS_PORT": "0"}
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_METRICS_EXPORTER", "OTEL_TRACES_EXPORTER"):
        env.pop(name, None)
    proc = subprocess.Popen([sys.executable, str(WORKLOAD)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)  # fmt: skip
    try:
        info = json.loads(proc.stdout.readline())
        with urllib.request.urlopen(info["url"], timeout=10) as response:
            text = response.read().decode()
        yield info, parse(text)
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def test_embedded_default_serves_on_loopback(exposition):
    info, _ = exposition
    assert info["own"] is True
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/metrics", info["url"])
    assert info["metrics"] == f"prometheus {info['url']}"


def test_every_contract_prometheus_name_is_exposed(exposition):
    _, samples = exposition
    exposed = {name for name, _, _ in samples}
    missing = [name for name in CONTRACT_NAMES if name not in exposed]
    assert missing == []


def value(samples, name, **labels):
    found = [v for n, l, v in samples if n == name and all(l.get(k) == x for k, x in labels.items())]
    assert found, (name, labels)
    return sum(found)


def test_values_and_labels(exposition):
    _, samples = exposition
    tokens = "otel_tokens_tokens_total"
    assert value(samples, tokens, gen_ai_agent_name="planner", gen_ai_token_type="input") == 25 * 1000 + 900_000 + 10
    assert value(samples, tokens, gen_ai_token_type="cache_write") == 25 * 50
    assert value(samples, tokens, gen_ai_token_type="reasoning") == 25 * 20
    assert value(samples, tokens, gen_ai_agent_name="copilot",
                 otel_tokens_usage_source="parsed_text") == 500  # fmt: skip
    assert value(samples, "otel_tokens_premium_requests_total", gen_ai_agent_name="copilot") == 1.5
    # resource attributes as labels, as through the collector (dashboards filter by service)
    instance = {l.get("service_instance_id") for n, l, _ in samples if n == tokens}
    assert value(samples, tokens, service_name="workload") > 0 and len(instance) == 1 and None not in instance
    assert value(samples, "otel_tokens_cost_USD_total", otel_tokens_cost_source="provider") == 0.02
    assert value(samples, "otel_tokens_cost_USD_total", otel_tokens_cost_source="computed") > 0
    assert value(samples, "otel_tokens_unpriced_requests_total",
                 gen_ai_request_model="private-model-unpriced") == 1  # fmt: skip
    assert value(samples, "otel_tokens_anomalies_total", otel_tokens_anomaly_kind="token_spike") >= 1
    assert value(samples, "otel_tokens_instrumentation_errors_total",
                 otel_tokens_error_kind="usage_missing") == 1  # fmt: skip
    assert value(samples, "gen_ai_client_operation_duration_seconds_count",
                 error_type="TimeoutError") == 1  # fmt: skip
    assert value(samples, "otel_tokens_context_utilization", gen_ai_agent_name="planner") == pytest.approx(
        10 / 128_000)  # the last completed turn: 10 input tokens
    # the estimate error is negative here ((900 - 1000) / 1000) and lands in the -0.1 bucket
    assert value(samples, "otel_tokens_estimate_error_bucket", le="-0.25") == 0
    assert value(samples, "otel_tokens_estimate_error_bucket", le="-0.1") == 25
    assert value(samples, "otel_tokens_estimate_error_bucket", le="+Inf") == 25


def test_signed_histogram_has_no_sum_or_count(exposition):
    """OpenMetrics forbids _sum on a histogram with negative buckets (prometheus_client drops
    _sum and _count); the count is the le="+Inf" bucket. docs/telemetry-contract.md says so,
    and dashboards must not query these two series."""
    _, samples = exposition
    exposed = {name for name, _, _ in samples}
    assert "otel_tokens_estimate_error_sum" not in exposed
    assert "otel_tokens_estimate_error_count" not in exposed
    buckets = sorted({float(l["le"]) for n, l, _ in samples if n == "gen_ai_client_token_usage_bucket"})
    assert buckets[:3] == [1.0, 4.0, 16.0] and buckets[-2:] == [67108864.0, float("inf")]
