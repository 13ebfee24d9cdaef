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

    def instrument(self, **kwargs: Any) -> Any:
        if kwargs.get("skip_dep_check") and not (
            kwargs.get("tracer_provider") or kwargs.get("meter_provider")
        ):
            # Loaded by opentelemetry-instrument (it passes skip_dep_check, which
            # BaseInstrumentor.instrument removes). Without an OpenTelemetry distro nothing has
            # set up the SDK: do it, as otel-tokens run would. A distro's providers are set
            # before instrumentors load and are left alone.
            from ..telemetry.setup import configure

            configure()
        return super().instrument(**kwargs)

    def _instrument(self, **kwargs: Any) -> None:
        from ..telemetry.setup import enable

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
