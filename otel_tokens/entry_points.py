"""``BaseInstrumentor`` classes for ``opentelemetry-instrument`` (the entry points).

One class per backend of :data:`otel_tokens.capture.BACKENDS`, built from its ``BACKEND``
description when first asked for (``otel_tokens.entry_points:OpenAIInstrumentor``): adding a
backend adds no code here. Each turns its backend on and off through the one registry
(:mod:`otel_tokens.registry`), the same as ``otel_tokens.instrument()``: whether it is
instrumented is the registry's answer, not a flag of its own, so mixing the two APIs in any
order leaves each backend patched once or not at all. Explicit ``tracer_provider``/
``meter_provider`` are honoured, the global ones used otherwise; when none is set (no distro
configured the SDK), ``configure()`` sets it up from the standard variables.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any, Collection

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from . import registry
from .capture import BACKENDS

__all__ = ["instrumentor_classes"]


class _Delegating(BaseInstrumentor):  # type: ignore[misc]
    """Turns one registered backend on and off through the registry."""

    name = ""

    @property  # type: ignore[override]
    def _is_instrumented_by_opentelemetry(self) -> bool:
        return registry.is_active(self.name)

    @_is_instrumented_by_opentelemetry.setter
    def _is_instrumented_by_opentelemetry(self, value: bool) -> None:
        pass  # the registry knows; BaseInstrumentor's own flag would drift from it

    def instrumentation_dependencies(self) -> Collection[str]:
        return registry.dependencies_of(self.name)

    def instrument(self, **kwargs: Any) -> Any:
        if kwargs.get("skip_dep_check") and not (
            kwargs.get("tracer_provider") or kwargs.get("meter_provider")
        ):
            # Loaded by opentelemetry-instrument (it passes skip_dep_check, which
            # BaseInstrumentor.instrument removes). Without an OpenTelemetry distro nothing has
            # set up the SDK: do it, as otel-tokens run would. A distro's providers are set
            # before instrumentors load and are left alone.
            from .emit.setup import configure

            configure()
        providers = kwargs.get("tracer_provider"), kwargs.get("meter_provider")
        if registry.is_active(self.name) and providers != (None, None):
            # already on (through either API): BaseInstrumentor would ignore the providers
            registry.use_providers(*providers)
        return super().instrument(**kwargs)

    def _instrument(self, **kwargs: Any) -> None:
        registry.enable(self.name, **kwargs)

    def _uninstrument(self, **kwargs: Any) -> None:
        registry.disable(self.name)


_classes: dict[str, type[_Delegating]] = {}  # class name -> class (BaseInstrumentor: one each)
_lock = threading.Lock()


def instrumentor_classes() -> dict[str, type[_Delegating]]:
    """Every backend's instrumentor class, by class name (built once)."""
    with _lock:
        if not _classes:
            for name, module in BACKENDS.items():
                backend = importlib.import_module(module).BACKEND
                _classes[backend.instrumentor] = type(
                    backend.instrumentor,
                    (_Delegating,),
                    {
                        "name": name,
                        "__doc__": backend.summary,
                        "__module__": __name__,
                    },
                )
        return dict(_classes)


def __getattr__(name: str) -> type[_Delegating]:
    """``otel_tokens.entry_points.OpenAIInstrumentor`` and the like (PEP 562)."""
    found = instrumentor_classes().get(name)
    if found is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return found


def __dir__() -> list[str]:
    """The module's names, the instrumentor classes included (``dir()``, PEP 562)."""
    return sorted({*globals(), *instrumentor_classes()})
