"""Which wire format a POST path speaks: the formats in the order they are tried."""

from __future__ import annotations

from typing import Any

from . import anthropic, cohere, gemini, ollama, openai, openai_media, tgi, watsonx
from .base import Wire

__all__ = ["Wire", "find"]

#: the more specific paths first: OpenAI's suffixes are the most general but for TGI's, whose
#: ``/generate``, ``/`` and ``/models/{id}`` its body must confirm (Ollama's ``/api/generate``,
#: Azure AI's ``/models/chat/completions`` are taken before); OpenAI's images and audio after
#: its chat (their paths are OpenAI's own, and a chat call is not slowed by their test)
_FORMATS: tuple[Any, ...] = (gemini, ollama, anthropic, cohere, watsonx, openai, openai_media, tgi)
_SUFFIXES = tuple(suffix for module in _FORMATS for suffix in module.SUFFIXES)


def find(path: str) -> Wire | None:
    """The wire format a POST to ``path`` speaks, or None (nearly every request: one test of
    the path's end, one for Gemini's ``:method`` paths, one for serverless ``/models/``)."""
    if not path.endswith(_SUFFIXES) and ":" not in path and "/models/" not in path:
        return None
    for module in _FORMATS:
        wire = module.recognise(path)
        if wire is not None:
            return wire
    return None
