"""configure() and instrument(): idempotent, respectful of the application's providers,
exporters chosen by the standard variables, bad settings one line each and never fatal. Each case runs in its own
process because OpenTelemetry's global providers can be set only once."""

from __future__ import annotations

import importlib.util
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


GRPC = importlib.util.find_spec("opentelemetry.exporter.otlp.proto.grpc") is not None


def prometheus_extra() -> None:
    """The embedded /metrics is the `prometheus` extra (absent from the base install that
    .ci/run's minimum-versions environment tests)."""
    pytest.importorskip("opentelemetry.exporter.prometheus",
                        reason="no prometheus extra (otel-tokens[prometheus])")


def test_embedded_default_and_idempotence():
    prometheus_extra()
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
    if "grpc" in expected and not GRPC:  # the base install: tests/telemetry/test_otlp_grpc.py
        expected = "nowhere (OTLP over gRPC needs the grpc extra"
    assert out["traces"].startswith(expected) and out["metrics"].startswith(expected)


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
    prometheus_extra()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        out = run_json(f"""
            import json, otel_tokens
            s = otel_tokens.configure(prometheus_port={port})
            print(json.dumps({{"metrics": s.metrics,
                               "faults": otel_tokens.get_handler().faults.counts}}))
        """)
    assert out["metrics"].startswith(f"nowhere (port 127.0.0.1:{port} unavailable")
    assert "set OTEL_TOKENS_PROMETHEUS_PORT to a free port, or 0 for any free port" in out["metrics"]
    assert out["faults"] == {"exporter": 1}


BAD = {  # variable -> (bad value, words of what is accepted)
    "OTEL_METRICS_EXPORTER": ("carrier-pigeon", "otlp | prometheus | console | none"),
    "OTEL_TRACES_EXPORTER": ("fax", "otlp | console | none"),
    "OTEL_TOKENS_PROMETHEUS_PORT": ("http", "a port number"),
    "OTEL_TOKENS_PRICES_FILE": ("/nonexistent/prices.toml", "TOML or JSON price file"),
    "OTEL_TOKENS_BUDGET_USD": ("plenty", "a number above 0"),
    "OTEL_TOKENS_LEDGER_MAX_HISTORY": ("yes", "a positive integer"),
    "OTEL_TOKENS_OPENAI_INCLUDE_USAGE": ("maybe", "true/false, 1/0, yes/no or on/off"),
}
APP = """
import json, otel_tokens
{setup}
with otel_tokens.agent("a") as entry:
    otel_tokens.start_call(operation="chat", provider="openai", request_model="gpt-4o").stop(
        otel_tokens.Usage(input_tokens=10, output_tokens=2))
print(json.dumps({{"ran": True, "records": len(entry.ledger), "max_history": entry.ledger.max_history}}))
"""


def _lines_about(stderr: str) -> dict[str, list[str]]:
    return {name: [line for line in stderr.splitlines() if name + "=" in line] for name in BAD}


@pytest.mark.parametrize("how", ["one-line", "otel-tokens run", "opentelemetry-instrument"])
def test_bad_settings_are_one_line_each_and_the_application_runs(how, tmp_path):
    """Each bad value: one line naming the variable, the value and what is accepted; that
    setting keeps its default and the program runs, whichever way otel_tokens was turned on."""
    env = {name: value for name, (value, _) in BAD.items()}
    bindir = os.path.dirname(sys.executable)
    if how == "one-line":
        result = run(APP.format(setup="otel_tokens.configure(); otel_tokens.instrument()"), **env)
    else:
        script = tmp_path / "app.py"
        script.write_text(textwrap.dedent(APP.format(setup="")))
        command = ([os.path.join(bindir, "otel-tokens"), "run", "--"] if how == "otel-tokens run"
                   else [os.path.join(bindir, "opentelemetry-instrument")])  # fmt: skip
        clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        result = subprocess.run([*command, sys.executable, str(script)], capture_output=True,
                                text=True, env={**clean, **env}, timeout=120, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out == {"ran": True, "records": 1, "max_history": 10_000}
    for name, lines in _lines_about(result.stderr).items():
        value, accepted = BAD[name]
        assert len(lines) == 1, (name, result.stderr)
        assert repr(value) in lines[0] and accepted in lines[0] and "default" in lines[0]
    assert "Traceback" not in result.stderr


def test_check_reports_every_bad_setting_and_exits_1():
    env = {name: value for name, (value, _) in BAD.items()}
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    result = subprocess.run([os.path.join(os.path.dirname(sys.executable), "otel-tokens"), "check"],
                            capture_output=True, text=True, env={**clean, **env}, timeout=120,
                            check=False)  # fmt: skip
    assert result.returncode == 1
    for name, (value, accepted) in BAD.items():
        reported = [line for line in result.stdout.splitlines() if name + "=" in line]
        assert len(reported) == 1 and accepted in reported[0], (name, result.stdout)
    # and without the prometheus extra (the base install), where metrics go is one more
    served = importlib.util.find_spec("opentelemetry.exporter.prometheus") is not None
    assert f"{len(BAD) + (not served)} problem(s)" in result.stderr


def test_a_second_configure_with_other_arguments_is_refused_with_a_warning():
    result = run("""
        import json, otel_tokens
        first = otel_tokens.configure(prometheus_port=0)
        again = otel_tokens.configure("another-name", prometheus_port=0)
        same = otel_tokens.configure(prometheus_port=0)
        print(json.dumps({"same": first is again is same}))
    """)
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"same": True}
    refused = [line for line in result.stderr.splitlines() if "configure(" in line]
    assert len(refused) == 1 and "service_name='another-name'" in refused[0]
    assert "ignored" in refused[0]


def test_instrument_with_explicit_providers_and_uninstrument():
    out = run_json("""
        import json, otel_tokens
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        exporter = InMemorySpanExporter(); tp = TracerProvider()
        tp.add_span_processor(SimpleSpanProcessor(exporter))
        active = otel_tokens.instrument(tracer_provider=tp)
        otel_tokens.start_call(operation="chat", provider="openai",
                               request_model="m").stop(otel_tokens.Usage())
        otel_tokens.uninstrument()
        print(json.dumps({"spans": len(exporter.get_finished_spans()), "active": active}))
    """)
    assert out["spans"] == 1
    assert isinstance(out["active"], list)


EXIT_PROBE = """
import sys, time, otel_tokens
from otel_tokens import Usage
otel_tokens.configure(service_name="exit-probe")
call = otel_tokens.start_call(operation="chat", provider="openai", request_model="gpt-4o")
call.stop(Usage(input_tokens=10, output_tokens=2), response_model="gpt-4o")
print("END", flush=True)
"""


def _silent_server() -> socket.socket:
    """A collector that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    return server


def _refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: connections are refused


def _seconds_after_end(**env: str) -> tuple[float, str]:
    """Seconds from the program's last line to its exit, and its stderr."""
    import time

    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OTEL_TOKENS_"))}
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(EXIT_PROBE)], env={**clean, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout.readline().strip() == "END"
    ended = time.monotonic()
    proc.wait(timeout=60)
    return time.monotonic() - ended, proc.stderr.read()


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
@pytest.mark.parametrize("collector", ["not answering", "down"])
def test_a_process_exits_by_its_exit_deadline_when_the_collector_is_down_or_silent(collector, protocol):
    """The deadline is 1.5 s (OTEL_TOKENS_EXIT_TIMEOUT); up to 4 s are allowed for the
    interpreter's own teardown on a loaded machine. Without it the SDK waits for its exporter:
    a 10 s timeout per attempt, and retries."""
    if protocol == "grpc" and not GRPC:
        pytest.skip("the grpc extra is not installed (the minimum-versions environment)")
    server = _silent_server() if collector == "not answering" else None
    port = server.getsockname()[1] if server else _refused_port()
    try:
        seconds, stderr = _seconds_after_end(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
                                             OTEL_EXPORTER_OTLP_PROTOCOL=protocol)  # fmt: skip
    finally:
        if server:
            server.close()
    assert seconds < 4.0, stderr
    assert "OTEL_TOKENS_EXIT_TIMEOUT" in stderr  # it says why and what to set


def test_the_exit_wait_is_a_setting():
    server = _silent_server()
    try:
        seconds, _ = _seconds_after_end(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{server.getsockname()[1]}",
                                        OTEL_TOKENS_EXIT_TIMEOUT="3.5")  # fmt: skip
    finally:
        server.close()
    assert 3.4 <= seconds < 5.5
