"""Instrumentors: one module per backend; provider SDK imports live here and nowhere else.

``REGISTRY`` names every instrumentor as ``"module:Class"`` (a ``BaseInstrumentor``);
``otel_tokens.instrument()`` turns on those whose libraries are installed. The modules are
imported only then, so ``import otel_tokens`` never imports a provider SDK.
"""

from __future__ import annotations

#: name -> "module:Class"; filled as backends land (OpenAI, Anthropic, agent CLIs).
REGISTRY: dict[str, str] = {
    "agent_cli": "otel_tokens.instrumentors.subprocess:SubprocessInstrumentor",
    "agent_backends": "otel_tokens.instrumentors.backend:BackendInstrumentor",
}
