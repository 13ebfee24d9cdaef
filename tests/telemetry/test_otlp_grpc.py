"""OTLP over gRPC is the ``grpc`` extra (the base install has OTLP/HTTP only).

Without it, a gRPC endpoint (port 4317, or ``OTEL_EXPORTER_OTLP_PROTOCOL=grpc``) is one line
saying how to get it, telemetry goes nowhere and the program runs. With it, spans and metrics
reach a real OTLP/gRPC receiver. Each program runs in its own process (global providers)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from concurrent import futures

import pytest

GRPC_PACKAGE = "opentelemetry.exporter.otlp.proto.grpc"
INSTALLED = importlib.util.find_spec(GRPC_PACKAGE) is not None

PROGRAM = """
import json, sys
if {block}:  # the extra is installed here: make the program's Python not find it
    sys.modules[{package!r}] = None
import otel_tokens
from otel_tokens import Usage
setup = otel_tokens.configure(service_name="grpc-probe")
call = otel_tokens.start_call(operation="chat", provider="openai", request_model="gpt-4o")
call.stop(Usage(input_tokens=10, output_tokens=2), response_model="gpt-4o")
print(json.dumps({{"traces": setup.traces, "metrics": setup.metrics}}), flush=True)
"""


def run(block: bool, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    code = PROGRAM.format(block=block, package=GRPC_PACKAGE)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env={**clean, **env}, timeout=120, check=False)  # fmt: skip


@pytest.mark.parametrize("env", [
    {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"},  # gRPC inferred from the port
    {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
], ids=["port 4317", "protocol grpc"])  # fmt: skip
def test_without_the_extra_one_line_says_how_and_the_program_runs(env):
    result = run(block=INSTALLED, **env)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    for signal in ("traces", "metrics"):
        assert out[signal].startswith("nowhere (OTLP over gRPC needs the grpc extra"), out
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr  # one line for both signals
    assert "pip install 'otel-tokens[grpc]'" in lines[0]
    assert "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf" in lines[0]


class Receiver:
    """A real OTLP/gRPC receiver on 127.0.0.1: the trace and metrics services, recording
    what they are sent."""

    def __init__(self) -> None:
        import grpc
        from opentelemetry.proto.collector.metrics.v1 import (
            metrics_service_pb2,
            metrics_service_pb2_grpc,
        )
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

        self.spans: list[str] = []
        self.metrics: list[str] = []
        receiver = self

        class Traces(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request, context):  # noqa: N802 (the service's name)
                receiver.spans += [span.name for rs in request.resource_spans
                                   for ss in rs.scope_spans for span in ss.spans]  # fmt: skip
                return trace_service_pb2.ExportTraceServiceResponse()

        class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
            def Export(self, request, context):  # noqa: N802
                receiver.metrics += [m.name for rm in request.resource_metrics
                                     for sm in rm.scope_metrics for m in sm.metrics]  # fmt: skip
                return metrics_service_pb2.ExportMetricsServiceResponse()

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), self.server)
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def close(self) -> None:
        self.server.stop(grace=None)


def test_with_the_extra_spans_and_metrics_reach_a_real_grpc_receiver():
    pytest.importorskip(GRPC_PACKAGE, reason="the grpc extra is not installed (this is the "
                        "minimum-versions environment: the test above covers it)")  # fmt: skip
    receiver = Receiver()
    try:
        result = run(block=False, OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{receiver.port}",
                     OTEL_EXPORTER_OTLP_PROTOCOL="grpc")  # fmt: skip
    finally:
        receiver.close()
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["traces"] == out["metrics"] == f"otlp grpc http://127.0.0.1:{receiver.port}"
    assert receiver.spans == ["chat gpt-4o"]  # flushed at exit
    assert {"otel_tokens.tokens", "gen_ai.client.token.usage"} <= set(receiver.metrics)
