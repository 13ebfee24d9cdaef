"""Exporter guards: an exporter that raises is counted as an ``exporter`` fault, not lost.

The SDK's processors already keep exporter exceptions away from the host, but only log them;
``configure()`` wraps the exporters it builds so such failures also move
``otel_tokens.instrumentation.errors{otel_tokens.error.kind="exporter"}``.
"""

from __future__ import annotations

from typing import Any, Callable

from .. import faults as _sink

__all__ = ["GuardedMetricExporter", "GuardedSpanExporter"]


def _faults() -> Any:
    return _sink.sink()


class GuardedSpanExporter:
    """Delegates to a span exporter; an exception becomes a counted fault and FAILURE."""

    def __init__(self, exporter: Any, faults: Callable[[], Any] = _faults) -> None:
        self._exporter = exporter
        self._faults = faults

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        try:
            result = self._exporter.export(spans)
        except Exception as exc:
            self._faults().report("exporter", exc)
            return SpanExportResult.FAILURE
        if result is SpanExportResult.FAILURE:
            self._faults().report("exporter", detail="span export failed")
        return result

    def shutdown(self) -> None:
        try:
            self._exporter.shutdown()
        except Exception as exc:
            self._faults().report("exporter", exc)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        try:
            return bool(self._exporter.force_flush(timeout_millis))
        except Exception as exc:
            self._faults().report("exporter", exc)
            return False


def GuardedMetricExporter(exporter: Any, faults: Callable[[], Any] = _faults) -> Any:  # noqa: N802
    """A MetricExporter (subclassed at call time, so the SDK is imported only when used) that
    delegates to ``exporter`` and counts its failures."""
    from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult

    class _Guarded(MetricExporter):
        def __init__(self) -> None:
            super().__init__(
                preferred_temporality=getattr(exporter, "_preferred_temporality", None),
                preferred_aggregation=getattr(exporter, "_preferred_aggregation", None),
            )
            self._exporter = exporter  # the wrapped one (a forked child renews its connections)

        def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> Any:
            try:
                result = exporter.export(metrics_data, timeout_millis=timeout_millis, **kwargs)
            except Exception as exc:
                faults().report("exporter", exc)
                return MetricExportResult.FAILURE
            if result is MetricExportResult.FAILURE:
                faults().report("exporter", detail="metric export failed")
            return result

        def force_flush(self, timeout_millis: float = 10_000) -> bool:
            try:
                return bool(exporter.force_flush(timeout_millis=timeout_millis))
            except Exception as exc:
                faults().report("exporter", exc)
                return False

        def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
            try:
                exporter.shutdown(timeout_millis=timeout_millis, **kwargs)
            except Exception as exc:
                faults().report("exporter", exc)

    return _Guarded()
