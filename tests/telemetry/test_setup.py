"""configure() and instrument(): idempotent, respectful of the application's providers,
exporters chosen by the standard variables, clear errors at start. Each case runs in its own
process because OpenTelemetry's global providers can be set only once."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest


def run(code: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("OTEL_", "OTEL_TOKENS_"))}  # fmt: skip
    clean.update(env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=clean, timeout=120, check=False)  # fmt: skip


def run_json(code: str, **env: str) -> dict:
    result = run(code, **env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


SETUP = """
import json, otel_tokens
s = otel_tokens.configure({args})
again = otel_tokens.configure()
from opentelemetry import trace, metrics
print(json.dumps({{"same": s is again, "traces": s.traces, "metrics": s.metrics,
    "own": s.own_providers, "global_tp": trace.get_tracer_provider() is s.tracer_provider,
    "resource": dict(s.tracer_provider.resource.attributes) if s.own_providers else {{}}}}))
"""


def test_embedded_default_and_idempotence():
    out = run_json(SETUP.format(args="prometheus_port=0"))
    assert out["same"] and out["own"] and out["global_tp"]
    assert out["metrics"].startswith("prometheus http://127.0.0.1:")
    assert out["traces"].startswith("nowhere")
    assert out["resource"]["service.name"] == "-c" or out["resource"]["service.name"]
    assert len(out["resource"]["service.instance.id"]) == 36


def test_service_instance_ids_never_collide_and_env_is_respected():
    a = run_json(SETUP.format(args="prometheus_port=0"), OTEL_SERVICE_NAME="agents")
    b = run_json(SETUP.format(args="prometheus_port=0"), OTEL_SERVICE_NAME="agents")
    assert a["resource"]["service.name"] == b["resource"]["service.name"] == "agents"
    assert a["resource"]["service.instance.id"] != b["resource"]["service.instance.id"]
    c = run_json(SETUP.format(args="'named', prometheus_port=0"))
    assert c["resource"]["service.name"] == "named"


@pytest.mark.parametrize("endpoint, protocol, expected", [
    ("http://collector:4318", "", "otlp http/protobuf http://collector:4318"),
    ("http://collector:4317", "", "otlp grpc http://collector:4317"),
    ("http://collector:9999", "grpc", "otlp grpc http://collector:9999"),
])  # fmt: skip
def test_otlp_when_an_endpoint_is_set(endpoint, protocol, expected):
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}
    if protocol:
        env["OTEL_EXPORTER_OTLP_PROTOCOL"] = protocol
    out = run_json(SETUP.format(args=""), **env)
    assert out["traces"] == expected and out["metrics"] == expected


def test_applications_providers_are_left_alone():
    out = run_json("""
        import json
        from opentelemetry import trace, metrics
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.metrics import MeterProvider
        tp, mp = TracerProvider(), MeterProvider()
        trace.set_tracer_provider(tp); metrics.set_meter_provider(mp)
        import otel_tokens
        s = otel_tokens.configure()
        print(json.dumps({"tp": s.tracer_provider is tp, "mp": s.meter_provider is mp,
                          "own": s.own_providers, "where": s.metrics}))
    """)
    assert out == {"tp": True, "mp": True, "own": False, "where": "the application's provider"}


def test_busy_port_is_counted_not_raised():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        out = run_json(f"""
            import json, otel_tokens
            s = otel_tokens.configure(prometheus_port={port})
            print(json.dumps({{"metrics": s.metrics,
                               "faults": otel_tokens.get_pipeline().faults.counts}}))
        """)
    assert out["metrics"].startswith(f"nowhere (port 127.0.0.1:{port} unavailable")
    assert out["faults"] == {"exporter": 1}


@pytest.mark.parametrize("env, words", [
    ({"OTEL_METRICS_EXPORTER": "carrier-pigeon"}, "OTEL_METRICS_EXPORTER"),
    ({"OTEL_TRACES_EXPORTER": "fax"}, "OTEL_TRACES_EXPORTER"),
    ({"OTEL_TOKENS_PROMETHEUS_PORT": "http"}, "OTEL_TOKENS_PROMETHEUS_PORT"),
    ({"OTEL_TOKENS_PRICES_FILE": "/nonexistent/prices.toml"}, "/nonexistent/prices.toml"),
    ({"OTEL_TOKENS_BUDGET_USD": "plenty"}, "OTEL_TOKENS_BUDGET_USD"),
])  # fmt: skip
def test_bad_settings_are_clear_errors_at_start(env, words):
    result = run("import otel_tokens; otel_tokens.configure()", **env)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert words in last


def test_instrument_with_explicit_providers_and_uninstrument():
    out = run_json("""
        import json, otel_tokens
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        exporter = InMemorySpanExporter(); tp = TracerProvider()
        tp.add_span_processor(SimpleSpanProcessor(exporter))
        active = otel_tokens.instrument(tracer_provider=tp)
        otel_tokens.get_pipeline().start_call(operation="chat", provider="openai",
                                              request_model="m").complete(otel_tokens.Usage())
        otel_tokens.uninstrument()
        print(json.dumps({"spans": len(exporter.get_finished_spans()), "active": active}))
    """)
    assert out["spans"] == 1
    assert isinstance(out["active"], list)
