"""``BaseInstrumentor`` classes for ``opentelemetry-instrument`` (the entry points).

Each enables one backend of :data:`otel_tokens.instrumentors.REGISTRY` through the same
code as ``otel_tokens.instrument()``: explicit ``tracer_provider``/``meter_provider`` are
honoured, the global ones used otherwise; when none is set (no distro configured the SDK),
``configure()`` sets it up from the standard variables.
"""

from __future__ import annotations

from typing import Any, Collection

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

__all__ = [
    "AgentBackendsInstrumentor", "AgentCliInstrumentor", "AnthropicInstrumentor", "OpenAIInstrumentor",
]  # fmt: skip


class _Delegating(BaseInstrumentor):  # type: ignore[misc]
    """Turns one registered backend on and off through otel_tokens' set-up."""

    name = ""

    def instrumentation_dependencies(self) -> Collection[str]:
        from ..telemetry.setup import dependencies_of

        return dependencies_of(self.name)

    def _instrument(self, **kwargs: Any) -> None:
        from ..telemetry.setup import configure, enable

        if kwargs.get("tracer_provider") is None and kwargs.get("meter_provider") is None:
            # opentelemetry-instrument without an OpenTelemetry distro sets up no SDK: do it
            # here, as otel-tokens run would. A distro's (or the application's) providers are
            # already set by now and are left alone.
            configure()
        enable(self.name, **kwargs)

    def _uninstrument(self, **kwargs: Any) -> None:
        from ..telemetry.setup import disable

        disable(self.name)


class AgentCliInstrumentor(_Delegating):
    """Agent CLIs (Copilot, Claude Code, Codex, Gemini) run through subprocess or asyncio."""

    name = "agent_cli"


class AgentBackendsInstrumentor(_Delegating):
    """The backends named in ``OTEL_TOKENS_BACKENDS``."""

    name = "agent_backends"


class AnthropicInstrumentor(_Delegating):
    """The ``anthropic`` SDK: ``messages.create``/``parse``/``stream``, beta included."""

    name = "anthropic"


class OpenAIInstrumentor(_Delegating):
    """The ``openai`` SDK: chat completions, Responses, embeddings (sync, async, streams)."""

    name = "openai"
