"""SDK set-up: ``configure()`` builds providers and exporters; ``instrument()`` turns on backends.

``configure()`` is idempotent and leaves alone any tracer or meter provider the application
already set. Otherwise it builds them with a resource (``service.name``, and a random
``service.instance.id`` so parallel processes never collide), the contract's histogram
buckets as Views, and exporters chosen by the standard variables:

* ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or the per-signal ``..._TRACES_/..._METRICS_ENDPOINT``)
  set: OTLP, over ``OTEL_EXPORTER_OTLP_PROTOCOL`` (``grpc`` or ``http/protobuf``; when unset,
  ``grpc`` for port 4317 and ``http/protobuf`` otherwise);
* otherwise the embedded default: a Prometheus ``/metrics`` endpoint on 127.0.0.1:9464
  (``OTEL_TOKENS_PROMETHEUS_PORT``/``OTEL_TOKENS_PROMETHEUS_HOST``; port 0 picks a free one);
* ``OTEL_TRACES_EXPORTER``/``OTEL_METRICS_EXPORTER`` (``otlp``, ``prometheus``, ``console``,
  ``none``) override the choice.
"""

from __future__ import annotations

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

from .. import instrumentors as _instrumentors
from ..pricing import Pricer
from .anomalies import AnomalyGuard
from .cardinality import limit_from_env

__all__ = ["Setup", "configure", "instrument", "uninstrument"]

_log = logging.getLogger("otel_tokens")
_lock = threading.Lock()
_setup: Setup | None = None
_active: dict[str, Any] = {}
_RESOURCE_LABELS = frozenset({"service.name", "service.instance.id"})


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

    def shutdown(self) -> None:
        """Flush and stop what configure() started (providers it built, the /metrics server)."""
        for close in self._closers:
            try:
                close()
            except Exception:
                _log.debug("otel_tokens: shutdown step failed", exc_info=True)


def _is_proxy(provider: Any) -> bool:
    return type(provider).__name__ in (
        "ProxyTracerProvider", "_ProxyMeterProvider", "NoOpTracerProvider", "NoOpMeterProvider",
    )  # fmt: skip


def _env(*names: str) -> str:
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return ""


def _protocol(signal: str, endpoint: str) -> str:
    protocol = _env(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
    if protocol:
        if protocol not in ("grpc", "http/protobuf"):
            raise ValueError(
                f"OTEL_EXPORTER_OTLP_PROTOCOL must be grpc or http/protobuf, got {protocol!r}"
            )
        return protocol
    try:
        port = urlparse(endpoint if "://" in endpoint else f"//{endpoint}").port
    except ValueError:
        port = None
    return "grpc" if port == 4317 else "http/protobuf"


def _otlp_exporter(signal: str, endpoint: str) -> Any:
    protocol = _protocol(signal, endpoint)
    kind = "trace_exporter" if signal == "TRACES" else "metric_exporter"
    cls = "OTLPSpanExporter" if signal == "TRACES" else "OTLPMetricExporter"
    module = "grpc" if protocol == "grpc" else "http"
    mod = importlib.import_module(f"opentelemetry.exporter.otlp.proto.{module}.{kind}")
    return getattr(mod, cls)(), f"otlp {protocol} {endpoint}"


def _resource(service_name: str | None) -> Any:
    from opentelemetry.sdk.resources import Resource

    attributes: dict[str, Any] = {}
    env_attrs = os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    if service_name:
        attributes["service.name"] = service_name
    elif not os.environ.get("OTEL_SERVICE_NAME") and "service.name=" not in env_attrs:
        script = os.path.splitext(os.path.basename(sys.argv[0] or ""))[0]
        attributes["service.name"] = script or "python-agent"
    if "service.instance.id=" not in env_attrs:
        attributes["service.instance.id"] = str(uuid.uuid4())
    return Resource.create(attributes)


def configure(
    service_name: str | None = None,
    *,
    prometheus_port: int | None = None,
    prometheus_host: str | None = None,
) -> Setup:
    """Set up OpenTelemetry for otel_tokens once per process (later calls return the same).

    Raises a clear error for bad settings (a malformed ``OTEL_TOKENS_PRICES_FILE``, an unknown
    exporter name); a busy Prometheus port is logged and counted, never raised.
    """
    global _setup
    with _lock:
        if _setup is not None:
            return _setup
        from opentelemetry import metrics, trace

        closers: list[Any] = []
        faults: list[tuple[str, Any, str]] = []  # reported once the pipeline exists
        tracer_provider = trace.get_tracer_provider()
        meter_provider = metrics.get_meter_provider()
        own = _is_proxy(tracer_provider) or _is_proxy(meter_provider)
        traces_to = metrics_to = "the application's provider"
        prometheus_url = None
        resource = _resource(service_name) if own else None
        if _is_proxy(tracer_provider):
            tracer_provider, traces_to = _build_tracer_provider(resource, closers)
            trace.set_tracer_provider(tracer_provider)
        if _is_proxy(meter_provider):
            meter_provider, metrics_to, prometheus_url = _build_meter_provider(
                resource, closers, prometheus_port, prometheus_host, faults
            )
            metrics.set_meter_provider(meter_provider)
        from .pipeline import Pipeline, get_pipeline, pipeline_is_unset, set_pipeline

        if pipeline_is_unset():
            pipeline = Pipeline()  # raises configuration errors now, not on the first call
            set_pipeline(pipeline)
        else:  # one already built works through the global providers: keep it, validate settings
            Pricer.from_env()
            AnomalyGuard.from_env()
            limit_from_env()
            pipeline = get_pipeline()
        for kind, exc, detail in faults:
            pipeline.faults.report(kind, exc, detail)
        _setup = Setup(tracer_provider, meter_provider, traces_to, metrics_to, prometheus_url,
                       own, closers)  # fmt: skip
        _log.info("otel_tokens: traces -> %s; metrics -> %s", traces_to, metrics_to)
        return _setup


def _build_tracer_provider(resource: Any, closers: list[Any]) -> tuple[Any, str]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from .exporters import GuardedSpanExporter

    provider = TracerProvider(resource=resource)
    closers.append(provider.shutdown)
    endpoint = _env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
    choice = _env("OTEL_TRACES_EXPORTER") or ("otlp" if endpoint else "none")
    if choice == "none":
        return provider, "nowhere (set OTEL_EXPORTER_OTLP_ENDPOINT to export spans)"
    if choice == "otlp":
        exporter, where = _otlp_exporter("TRACES", endpoint or "http://localhost:4318")
    elif choice == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        exporter, where = ConsoleSpanExporter(), "console"
    else:
        raise ValueError(f"OTEL_TRACES_EXPORTER must be otlp, console or none, got {choice!r}")
    provider.add_span_processor(BatchSpanProcessor(GuardedSpanExporter(exporter)))
    return provider, where


def _build_meter_provider(
    resource: Any,
    closers: list[Any],
    port: int | None,
    host: str | None,
    faults: list[tuple[str, Any, str]],
) -> tuple[Any, str, str | None]:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    from .exporters import GuardedMetricExporter
    from .instruments import views

    endpoint = _env("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
    choice = _env("OTEL_METRICS_EXPORTER") or ("otlp" if endpoint else "prometheus")
    readers: list[Any] = []
    url = None
    if choice == "otlp":
        exporter, where = _otlp_exporter("METRICS", endpoint or "http://localhost:4318")
        readers.append(PeriodicExportingMetricReader(GuardedMetricExporter(exporter)))
    elif choice == "console":
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

        readers.append(PeriodicExportingMetricReader(GuardedMetricExporter(ConsoleMetricExporter())))
        where = "console"
    elif choice == "prometheus":
        reader, where, url = _prometheus(port, host, closers, faults)
        if reader is not None:
            readers.append(reader)
    elif choice == "none":
        where = "nowhere"
    else:
        raise ValueError(
            f"OTEL_METRICS_EXPORTER must be otlp, prometheus, console or none, got {choice!r}"
        )
    provider = MeterProvider(metric_readers=readers, resource=resource, views=views())
    closers.insert(0, provider.shutdown)
    return provider, where, url


def _prometheus(
    port: int | None, host: str | None, closers: list[Any], faults: list[tuple[str, Any, str]]
) -> tuple[Any, str, str | None]:
    if port is None:
        raw = _env("OTEL_TOKENS_PROMETHEUS_PORT", "OTEL_EXPORTER_PROMETHEUS_PORT") or "9464"
        try:
            port = int(raw)
        except ValueError:
            raise ValueError(f"OTEL_TOKENS_PROMETHEUS_PORT must be a port number, got {raw!r}") from None
    host = host or _env("OTEL_TOKENS_PROMETHEUS_HOST", "OTEL_EXPORTER_PROMETHEUS_HOST") or "127.0.0.1"
    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import start_http_server
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
    try:
        started = start_http_server(port, addr=host)
    except OSError as exc:
        faults.append(("exporter", exc, f"cannot serve /metrics on {host}:{port}"))
        return reader, f"nowhere (port {host}:{port} unavailable: {exc.strerror})", None
    if isinstance(started, tuple):  # prometheus_client >= 0.16 returns (server, thread)
        server = started[0]
        port = server.server_port
        closers.append(server.shutdown)
    url = f"http://{host}:{port}/metrics"
    return reader, f"prometheus {url}", url


def _providers(tracer_provider: Any, meter_provider: Any) -> None:
    """Use explicit providers when given; otherwise validate the configuration now (the
    pipeline itself is built on the global providers by the first call or the warm-up)."""
    if tracer_provider is not None or meter_provider is not None:
        from .pipeline import Pipeline, set_pipeline

        set_pipeline(Pipeline(tracer_provider, meter_provider))
    elif not _active:  # configuration errors raise here, at start
        Pricer.from_env()
        AnomalyGuard.from_env()
        limit_from_env()
    threading.Thread(target=_warm_up, name="otel_tokens-warm-up", daemon=True).start()


def _warm_up(delay: float = 0.5) -> None:
    """Build the pipeline and load price data and tokenizer encodings in the background,
    after the host's own start-up (a call before then simply does it itself)."""
    time.sleep(delay)
    from ..estimate import warm_up as warm_up_tokenizers
    from .pipeline import get_pipeline

    get_pipeline().pricer.warm_up(background=False)
    warm_up_tokenizers()


def dependencies_of(name: str) -> tuple[str, ...]:
    """The requirement strings of the library a registered backend instruments."""
    return tuple(importlib.import_module(_instrumentors.REGISTRY[name]).DEPENDENCIES)


def enable(name: str, tracer_provider: Any = None, meter_provider: Any = None, **kwargs: Any) -> bool:
    """Turn one registered backend on (once); False when its library is not installed."""
    with _lock:
        if name in _active:
            return True
        _providers(tracer_provider, meter_provider)
        return _enable_locked(name, kwargs)


def _enable_locked(name: str, kwargs: dict[str, Any]) -> bool:
    module = importlib.import_module(_instrumentors.REGISTRY[name])
    if module.install(**kwargs) is False:
        return False
    _active[name] = module
    return True


def disable(name: str) -> None:
    """Turn one registered backend off (original functions restored)."""
    with _lock:
        module = _active.pop(name, None)
        if module is not None:
            module.uninstall()


def instrument(tracer_provider: Any = None, meter_provider: Any = None, **kwargs: Any) -> list[str]:
    """Turn on every registered instrumentor; returns the names of those on.

    Like every ``BaseInstrumentor``, explicit ``tracer_provider``/``meter_provider`` are used
    when given, else the global ones. Configuration errors raise here, at start. A backend
    whose library is not imported yet is patched when the application imports it.
    """
    with _lock:
        _providers(tracer_provider, meter_provider)
        for name in _instrumentors.REGISTRY:
            if name not in _active:
                _enable_locked(name, kwargs)
        return list(_active)


def uninstrument() -> None:
    """Turn off every instrumentor ``instrument()`` turned on (original functions restored)."""
    with _lock:
        for name in list(_active):
            _active.pop(name).uninstall()


def active_instrumentors() -> list[str]:
    """Names of the instrumentors currently on."""
    return list(_active)
