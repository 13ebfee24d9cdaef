"""Capture: one module per backend, each building call records and handing them over.

An instrumentor only captures: it opens a :class:`~otel_tokens.call.Call` with the request's
facts (``otel_tokens.handler``), fills in the response's facts (usage, model, ids, finish
reasons, error) and ends it. Provider SDK imports live here and nowhere else. Each backend
has a light ``*_patches`` module (what ``instrument()`` installs: the patch table, nothing
per call) and the per-call module it loads at the first call (``openai_sdk``,
``anthropic_sdk``, ``google_genai_sdk``, ``bedrock_sdk``, ``agent_cli``, ``backend``). Agent-CLI output parsers are in
:mod:`.parsers`.
"""

from __future__ import annotations

#: backend name -> module exposing install(**options), uninstall() and DEPENDENCIES
BACKENDS: dict[str, str] = {
    "openai": "otel_tokens.capture.openai_patches",
    "anthropic": "otel_tokens.capture.anthropic_patches",
    "google_genai": "otel_tokens.capture.google_genai_patches",
    "bedrock": "otel_tokens.capture.bedrock_patches",
    "litellm": "otel_tokens.capture.litellm_patches",
    "openai_agents": "otel_tokens.capture.openai_agents_patches",
    "pydantic_ai": "otel_tokens.capture.pydantic_ai_patches",
    "langgraph": "otel_tokens.capture.langgraph_patches",
    "crewai": "otel_tokens.capture.crewai_patches",
    "llama_index": "otel_tokens.capture.llama_index_patches",
    "smolagents": "otel_tokens.capture.smolagents_patches",
    "autogen": "otel_tokens.capture.autogen_patches",
    "agno": "otel_tokens.capture.agno_patches",
    "strands": "otel_tokens.capture.strands_patches",
    "google_adk": "otel_tokens.capture.google_adk_patches",
    "agent_framework": "otel_tokens.capture.agent_framework_patches",
    "semantic_kernel": "otel_tokens.capture.semantic_kernel_patches",
    "genai_agents": "otel_tokens.capture.genai_agents_patches",
    "agent_cli": "otel_tokens.capture.agent_cli_patches",
    "agent_backends": "otel_tokens.capture.backend_patches",
}
