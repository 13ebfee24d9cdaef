"""``BaseInstrumentor`` classes for ``opentelemetry-instrument`` (the entry points).

Each turns one backend of :data:`otel_tokens.capture.BACKENDS` on and off through the one
registry (:mod:`otel_tokens.registry`), the same as ``otel_tokens.instrument()``: whether it is
instrumented is the registry's answer, not a flag of its own, so mixing the two APIs in any
order leaves each backend patched once or not at all. Explicit ``tracer_provider``/
``meter_provider`` are honoured, the global ones used otherwise; when none is set (no distro
configured the SDK), ``configure()`` sets it up from the standard variables.
"""

from __future__ import annotations

from typing import Any, Collection

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from . import registry

__all__ = [
    "AgentBackendsInstrumentor", "AgentCliInstrumentor", "AgentFrameworkInstrumentor",
    "AgnoInstrumentor", "AnthropicInstrumentor", "AutoGenInstrumentor", "BedrockInstrumentor",
    "CrewAIInstrumentor", "GenAIAgentSpansInstrumentor", "GoogleADKInstrumentor",
    "GoogleGenAIInstrumentor", "LangGraphInstrumentor", "LiteLLMInstrumentor",
    "LlamaIndexInstrumentor", "OpenAIAgentsInstrumentor", "OpenAIInstrumentor",
    "PydanticAIInstrumentor", "SemanticKernelInstrumentor", "SmolagentsInstrumentor",
    "StrandsInstrumentor",
]  # fmt: skip


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
        return super().instrument(**kwargs)

    def _instrument(self, **kwargs: Any) -> None:
        registry.enable(self.name, **kwargs)

    def _uninstrument(self, **kwargs: Any) -> None:
        registry.disable(self.name)


class AgentCliInstrumentor(_Delegating):
    """Agent CLIs (Copilot, Claude Code, Codex, Gemini) run through subprocess or asyncio."""

    name = "agent_cli"


class AgentBackendsInstrumentor(_Delegating):
    """The backends named in ``OTEL_TOKENS_BACKENDS``."""

    name = "agent_backends"


class AnthropicInstrumentor(_Delegating):
    """The ``anthropic`` SDK: ``messages.create``/``parse``/``stream``, beta included."""

    name = "anthropic"


class BedrockInstrumentor(_Delegating):
    """AWS Bedrock through boto3/botocore: ``converse``, ``converse_stream``, ``invoke_model``
    and ``invoke_model_with_response_stream`` of ``bedrock-runtime``."""

    name = "bedrock"


class CrewAIInstrumentor(_Delegating):
    """Agent names from CrewAI: each call is recorded under the role of the agent making it."""

    name = "crewai"


class LlamaIndexInstrumentor(_Delegating):
    """Agent names from LlamaIndex agents: each call is recorded under the agent stepping."""

    name = "llama_index"


class SmolagentsInstrumentor(_Delegating):
    """Agent names from smolagents: each call is recorded under the named agent running."""

    name = "smolagents"


class AutoGenInstrumentor(_Delegating):
    """Agent names from AutoGen AgentChat: each call is recorded under the agent handling it."""

    name = "autogen"


class AgnoInstrumentor(_Delegating):
    """Agent names from Agno: each call is recorded under the agent or team running."""

    name = "agno"


class StrandsInstrumentor(_Delegating):
    """Agent names from Strands Agents: each call is recorded under the agent running."""

    name = "strands"


class GoogleADKInstrumentor(_Delegating):
    """Agent names from Google ADK: each call is recorded under the agent running."""

    name = "google_adk"


class AgentFrameworkInstrumentor(_Delegating):
    """Agent names from Microsoft Agent Framework: each call is recorded under its agent."""

    name = "agent_framework"


class SemanticKernelInstrumentor(_Delegating):
    """Agent names from Semantic Kernel agents: each call is recorded under its agent."""

    name = "semantic_kernel"


class GenAIAgentSpansInstrumentor(_Delegating):
    """Agent names from GenAI ``invoke_agent`` spans, whichever framework or tracer made them."""

    name = "genai_agents"


class GoogleGenAIInstrumentor(_Delegating):
    """The ``google-genai`` SDK: ``models.generate_content`` and ``generate_content_stream``,
    sync and async, Gemini API and Vertex AI (each billed request)."""

    name = "google_genai"


class LangGraphInstrumentor(_Delegating):
    """Agent names and threads from LangGraph: each call is recorded under the graph's agent."""

    name = "langgraph"


class LiteLLMInstrumentor(_Delegating):
    """litellm: ``completion`` and ``acompletion``, stream or not, any provider."""

    name = "litellm"


class OpenAIAgentsInstrumentor(_Delegating):
    """Agent names from the OpenAI Agents SDK: each call is recorded under the running agent."""

    name = "openai_agents"


class PydanticAIInstrumentor(_Delegating):
    """Agent names from Pydantic AI: each call is recorded under the running agent."""

    name = "pydantic_ai"


class OpenAIInstrumentor(_Delegating):
    """The ``openai`` SDK: chat completions, Responses, embeddings (sync, async, streams)."""

    name = "openai"
