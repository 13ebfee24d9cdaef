"""Instrumentors: one module per backend; provider SDK imports live here and nowhere else.

Each module in ``REGISTRY`` exposes ``install(**options)``, ``uninstall()`` and
``DEPENDENCIES`` (pip requirement strings of the library it instruments; empty for the
standard library). ``otel_tokens.instrument()`` calls them directly, so turning
instrumentation on imports neither a provider SDK nor opentelemetry-instrumentation; the
``BaseInstrumentor`` classes that ``opentelemetry-instrument`` finds through entry points
live in :mod:`.entry_points` and delegate to the same functions. These modules hold only the
patches; the per-call machinery (:mod:`.openai_sdk`, :mod:`.anthropic_sdk`,
:mod:`.subprocess`, :mod:`.backend`) is imported at the first call that needs it.
"""

from __future__ import annotations

#: name -> module exposing install(), uninstall() and DEPENDENCIES
REGISTRY: dict[str, str] = {
    "openai": "otel_tokens.instrumentors.openai_patches",
    "anthropic": "otel_tokens.instrumentors.anthropic_patches",
    "agent_cli": "otel_tokens.instrumentors.subprocess_patches",
    "agent_backends": "otel_tokens.instrumentors.backend_patches",
}
