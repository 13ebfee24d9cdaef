"""SDK set-up: ``configure()`` builds the tracer and meter providers and their exporters.

``configure()`` leaves alone any tracer or meter provider the application already set.
Otherwise it builds them with a resource (``service.name``, and a random
``service.instance.id`` so parallel processes never collide), the contract's histogram
buckets as Views (otel_tokens' own meter only), and exporters chosen by the settings
(:mod:`otel_tokens.settings`, from the standard variables):

* an OTLP endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT`` or the per-signal ones) set: OTLP, over
  ``OTEL_EXPORTER_OTLP_PROTOCOL`` (``grpc`` or ``http/protobuf``; when unset, ``grpc`` for
  port 4317 and ``http/protobuf`` otherwise);
* otherwise the embedded default: a Prometheus ``/metrics`` endpoint on 127.0.0.1:9464
  (``OTEL_TOKENS_PROMETHEUS_PORT``/``OTEL_TOKENS_PROMETHEUS_HOST``; port 0 picks a free one);
* ``OTEL_TRACES_EXPORTER``/``OTEL_METRICS_EXPORTER`` (``otlp``, ``prometheus``, ``console``,
  ``none``) override the choice.

A second ``configure()`` returns the first one's set-up; arguments that differ from it cannot
take effect (the providers exist) and are refused with a warning. With installed packages
older than otel_tokens needs, it sets nothing up (one line says which, and what to install).
"""

from __future__ import annotations

import atexit
import importlib
import logging
import os
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from .. import faults, threads
from .. import settings as _settings
from ..dependencies import usable

__all__ = ["Setup", "configure"]

_log = logging.getLogger("otel_tokens")
_closed = threading.Event()  # set when providers configure() built are shut down


def providers_closed() -> bool:
    """True once providers that configure() built have been shut down: nothing more is built
    on them (the start-up warm-up of a process that ends at once, e.g. ``otel-tokens check``)."""
    return _closed.is_set()


_lock = threading.Lock()
_setup: Setup | None = None
_endpoints: list[Any] = []  # the /metrics endpoint _build started (emit.workers.Endpoint)
_arguments: dict[str, Any] = {}  # what the first configure() was given
#: resource attributes the embedded /metrics puts on every series, as the collector's
#: transform/resource_labels keeps them (collector-config/otel-collector.yaml)
_RESOURCE_LABELS = frozenset(
    {"service.name", "service.namespace", "service.instance.id", "deployment.environment.name"}
)
_ENVIRONMENT, _OLD_ENVIRONMENT = "deployment.environment.name", "deployment.environment"


@dataclass(frozen=True)
class Setup:
    """What ``configure()`` did: the providers in use and where telemetry goes."""

    tracer_provider: Any
    meter_provider: Any
    traces: str
    metrics: str
    prometheus_url: str | None = None
    own_providers: bool = True
    _closers: list[Any] = field(default_factory=list, repr=False)
    exit_timeout: float = 1.5  # seconds shutdown() waits (OTEL_TOKENS_EXIT_TIMEOUT)
    _done: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)
    endpoint: Any = field(default=None, repr=False, compare=False)  # workers.Endpoint of /metrics
    #: set once shutdown() has left this process's last metrics for the /metrics front
    final_left: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)
    _ended: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)

    def wait_ended(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds for a :meth:`shutdown` begun anywhere to end."""
        return self._ended.wait(timeout)

    def shutdown(self, timeout: float | None = None) -> bool:
        """Flush and stop what configure() started (providers it built, the /metrics server),
        waiting at most ``timeout`` seconds (default: ``OTEL_TOKENS_EXIT_TIMEOUT``).

        The steps run side by side, so a collector that is down or not answering costs the
        deadline once, not once per signal; what is still sending then is abandoned (its
        threads are daemons), so the process ends on time. True when every step finished."""
        try:
            return self._flush(timeout)
        finally:
            from .process import deliver_deferred_signal

            deliver_deferred_signal()  # a SIGTERM that came during this call (a forked child)

    def _flush(self, timeout: float | None) -> bool:
        if self._done.is_set():
            return True
        self._done.set()
        if self.endpoint is not None:  # before the providers stop: what /metrics shows now
            self.endpoint.leave_final_metrics()
        summary = sys.modules.get("otel_tokens.emit.summary")  # loaded only where it is on
        if summary is not None:
            summary.leave_rows()  # a descendant's calls, for the top process's at-exit table
        self.final_left.set()
        if self.own_providers:
            _closed.set()
        wait = self.exit_timeout if timeout is None else timeout
        deadline = time.monotonic() + wait
        steps = [threads.start(_close, "otel_tokens-shutdown", close) for close in self._closers]
        for step in steps:
            step.join(max(0.0, deadline - time.monotonic()))
        late = sum(step.is_alive() for step in steps)
        if late:
            _log.warning(
                "otel_tokens: telemetry not sent within %.1f s at shutdown (exporter "
                "down or not answering); exiting without it (OTEL_TOKENS_EXIT_TIMEOUT "
                "sets the wait)",
                wait,
            )
            faults.report(
                "exporter", detail=f"{late} shutdown step(s) past the deadline", log=False
            )
        self._ended.set()  # from now on a SIGTERM is the signal at once
        return not late


def _close(close: Any) -> None:
    try:
        close()
    except Exception:
        _log.debug("otel_tokens: shutdown step failed", exc_info=True)


def _shutdown_at_exit() -> None:
    """The atexit hook: the providers configure() built are flushed within the deadline
    (they are built with ``shutdown_on_exit=False``, the SDK's own hooks wait up to 30 s)."""
    setup = _setup
    if setup is not None:
        setup.shutdown()


def _is_proxy(provider: Any) -> bool:
    return type(provider).__name__ in (
        "ProxyTracerProvider",
        "_ProxyMeterProvider",
        "NoOpTracerProvider",
        "NoOpMeterProvider",
    )


def _protocol(configured: str | None, endpoint: str) -> str:
    if configured:
        return configured
    try:
        port = urlparse(endpoint if "://" in endpoint else f"//{endpoint}").port
    except ValueError:
        port = None
    return "grpc" if port == 4317 else "http/protobuf"


def _otlp_exporter(signal: str, endpoint: str, protocol: str | None) -> Any:
    """The OTLP exporter of ``signal`` and where it sends. OTLP/HTTP is in the base install;
    gRPC is the ``grpc`` extra: without it, one line says so and the signal goes nowhere
    (an HTTP exporter would only fail against a gRPC port)."""
    protocol = _protocol(protocol, endpoint)
    kind = "trace_exporter" if signal == "TRACES" else "metric_exporter"
    cls = "OTLPSpanExporter" if signal == "TRACES" else "OTLPMetricExporter"
    module = "grpc" if protocol == "grpc" else "http"
    try:
        mod = importlib.import_module(f"opentelemetry.exporter.otlp.proto.{module}.{kind}")
    except ImportError as exc:
        if module != "grpc":
            raise
        return _no_grpc(signal, endpoint, exc)
    return getattr(mod, cls)(), f"otlp {protocol} {endpoint}"


_GRPC_MISSING = (
    "OTLP over gRPC needs the grpc extra: pip install 'otel-tokens[grpc]' (or send "
    "OTLP/HTTP, in the base install: OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf and "
    "the collector's HTTP port, 4318)"
)


def _no_grpc(signal: str, endpoint: str, exc: ImportError) -> tuple[Any, str]:
    """An exporter that drops ``signal`` (the gRPC one is not installed), said once per
    process for both signals, and counted."""
    if not _grpc_said.is_set():
        _grpc_said.set()
        _log.warning("otel_tokens: telemetry for %s goes nowhere: %s", endpoint, _GRPC_MISSING)
        faults.report("config", exc, f"no gRPC exporter for {endpoint}", log=False)
    if signal == "TRACES":
        from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

        class _Dropped(SpanExporter):
            def export(self, spans: Any) -> Any:
                return SpanExportResult.SUCCESS
    else:
        from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult

        class _Dropped(MetricExporter):  # type: ignore[no-redef]
            def export(
                self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any
            ) -> Any:
                return MetricExportResult.SUCCESS

            def force_flush(self, timeout_millis: float = 10_000) -> bool:
                return True

            def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
                pass

    return _Dropped(), f"nowhere ({_GRPC_MISSING})"


_grpc_said = threading.Event()


def _resource(settings: _settings.Settings) -> Any:
    from opentelemetry.sdk.resources import Resource

    attributes: dict[str, Any] = {}
    given = settings.resource_attributes or ""
    if settings.service_name:
        attributes["service.name"] = settings.service_name
    elif "service.name=" not in given:
        script = os.path.splitext(os.path.basename(sys.argv[0] or ""))[0]
        attributes["service.name"] = script or "python-agent"
    if "service.instance.id=" not in given:
        attributes["service.instance.id"] = str(uuid.uuid4())
    resource = Resource.create(attributes)
    old = resource.attributes.get(_OLD_ENVIRONMENT)
    if old and _ENVIRONMENT not in resource.attributes:  # the name before semconv 1.27
        resource = resource.merge(Resource({_ENVIRONMENT: old}))
    return resource


def configure(
    service_name: str | None = None,
    *,
    prometheus_port: int | None = None,
    prometheus_host: str | None = None,
) -> Setup:
    """Set up OpenTelemetry for otel_tokens once per process (later calls return the same).

    Never raises for a setting: a bad one is one line and keeps its default; a busy
    Prometheus port is logged and counted. A later call with other arguments is refused with
    a warning (the providers are built)."""
    global _setup
    arguments = {
        "service_name": service_name,
        "prometheus_port": prometheus_port,
        "prometheus_host": prometheus_host,
    }
    with _lock:
        if _setup is not None:
            _refuse_changes(arguments)
            return _setup
        if not usable():  # installed packages below otel_tokens' floors: one line said so
            return _untouched()
        _arguments.update(arguments)
        settings = _settings.with_arguments(_settings.current(), **arguments)
        with threads.quiet():  # the SDK's export threads and the /metrics server's
            _setup = _build(settings)
        if _setup.own_providers:
            from . import process, summary

            atexit.register(_shutdown_at_exit)
            process.install(lambda: _setup)
            # after _shutdown_at_exit: runs before it
            summary.install(settings.summary_dir, worker=process.multiprocessing_child())
        _log.info("otel_tokens: traces -> %s; metrics -> %s", _setup.traces, _setup.metrics)
        return _setup


def _untouched() -> Setup:
    """What configure() returns when otel_tokens is off: the providers as they are, unchanged."""
    from opentelemetry import metrics, trace

    off = "nowhere (otel_tokens is off: installed packages older than it needs)"
    return Setup(
        trace.get_tracer_provider(), metrics.get_meter_provider(), off, off, own_providers=False
    )


def _refuse_changes(arguments: dict[str, Any]) -> None:
    changed = {k: v for k, v in arguments.items() if v is not None and v != _arguments.get(k)}
    if changed:
        given = ", ".join(f"{k}={v!r}" for k, v in changed.items())
        _log.warning(
            "otel_tokens: configure(%s) ignored: configure() already set up the "
            "providers (call Setup.shutdown() and configure in a new process to change "
            "them)",
            given,
        )
        faults.report("config", detail=f"configure({given}) ignored", log=False)


def _build(settings: _settings.Settings) -> Setup:
    from opentelemetry import metrics, trace

    closers: list[Any] = []
    tracer_provider = trace.get_tracer_provider()
    meter_provider = metrics.get_meter_provider()
    own = _is_proxy(tracer_provider) or _is_proxy(meter_provider)
    traces_to = metrics_to = "the application's provider"
    prometheus_url = None
    resource = _resource(settings) if own else None
    if _is_proxy(tracer_provider):
        tracer_provider, traces_to = _build_tracer_provider(settings, resource, closers)
        trace.set_tracer_provider(tracer_provider)
    if _is_proxy(meter_provider):
        meter_provider, metrics_to, prometheus_url = _build_meter_provider(
            settings, resource, closers
        )
        metrics.set_meter_provider(meter_provider)
    return Setup(
        tracer_provider,
        meter_provider,
        traces_to,
        metrics_to,
        prometheus_url,
        own,
        closers,
        settings.exit_timeout,
        endpoint=_endpoints[-1] if _endpoints else None,
    )


def _build_tracer_provider(
    settings: _settings.Settings, resource: Any, closers: list[Any]
) -> tuple[Any, str]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from .exporters import GuardedSpanExporter

    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    closers.append(provider.shutdown)
    endpoint = settings.traces_endpoint
    choice = settings.traces_exporter or ("otlp" if endpoint else "none")
    if choice == "none":
        return provider, "nowhere (set OTEL_EXPORTER_OTLP_ENDPOINT to export spans)"
    if choice == "otlp":
        exporter, where = _otlp_exporter(
            "TRACES", endpoint or "http://localhost:4318", settings.traces_protocol
        )
    else:
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        exporter, where = ConsoleSpanExporter(), "console"
    provider.add_span_processor(BatchSpanProcessor(GuardedSpanExporter(exporter)))
    return provider, where


def _build_meter_provider(
    settings: _settings.Settings, resource: Any, closers: list[Any]
) -> tuple[Any, str, str | None]:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    from .exporters import GuardedMetricExporter
    from .instruments import views

    endpoint = settings.metrics_endpoint
    choice = settings.metrics_exporter or ("otlp" if endpoint else "prometheus")
    readers: list[Any] = []
    url = None
    if choice == "otlp":
        exporter, where = _otlp_exporter(
            "METRICS", endpoint or "http://localhost:4318", settings.metrics_protocol
        )
        readers.append(PeriodicExportingMetricReader(GuardedMetricExporter(exporter)))
    elif choice == "console":
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

        readers.append(
            PeriodicExportingMetricReader(GuardedMetricExporter(ConsoleMetricExporter()))
        )
        where = "console"
    elif choice == "prometheus":
        reader, where, url = _prometheus(settings, closers)
        if reader is not None:
            readers.append(reader)
    else:
        where = "nowhere"
    if settings.summary_at_exit:
        from . import summary

        readers.append(summary.reader())  # in memory, read at exit (emit/summary.py)
    provider = MeterProvider(
        metric_readers=readers, resource=resource, views=views(), shutdown_on_exit=False
    )
    closers.insert(0, provider.shutdown)
    return provider, where, url


def port_fix(exc: OSError) -> str:
    """How to fix a /metrics port that cannot be served, in a few words."""
    import errno

    if exc.errno == errno.EADDRINUSE:
        return (
            "another process serves it: set OTEL_TOKENS_PROMETHEUS_PORT to a free port, "
            "or 0 for any free port"
        )
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "ports below 1024 need privileges: set OTEL_TOKENS_PROMETHEUS_PORT above 1024"
    return (
        "set OTEL_TOKENS_PROMETHEUS_HOST to an address of this machine (127.0.0.1) and "
        "OTEL_TOKENS_PROMETHEUS_PORT to a free port"
    )


def _prometheus(settings: _settings.Settings, closers: list[Any]) -> tuple[Any, str, str | None]:
    port, host = settings.prometheus_port, settings.prometheus_host
    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader

        from . import workers
    except ImportError:
        _log.warning(
            "otel_tokens: no metrics exporter: install otel-tokens[prometheus] for the embedded "
            "/metrics endpoint, or set OTEL_EXPORTER_OTLP_ENDPOINT"
        )
        return None, "nowhere (opentelemetry-exporter-prometheus is not installed)", None
    try:  # service.name/service.instance.id as labels, as the collector's exporter adds them
        reader = PrometheusMetricReader(resource_attribute_filter=_RESOURCE_LABELS.__contains__)
    except TypeError:  # exporter releases before the option existed
        reader = PrometheusMetricReader()
    try:  # the port's front, or a worker of it (several processes: emit.workers)
        endpoint = workers.serve(host, port, settings.prometheus_workers_dir)
    except OSError as exc:
        why = f"port {host}:{port} unavailable: {exc.strerror or exc}; {port_fix(exc)}"
        faults.report("exporter", exc, f"cannot serve /metrics: {why}")
        return reader, f"nowhere ({why})", None
    closers.append(endpoint.close)
    _endpoints.append(endpoint)
    role = "" if endpoint.role == "front" else " (as a worker of the process serving the port)"
    return reader, f"prometheus {endpoint.url}{role}", endpoint.url
