"""Wire formats: what a model API's requests and answers look like on the wire, one module
each, shared by every client that speaks it (the HTTP layer, :mod:`..http_layer`).

A format module names the POST paths it answers (:data:`Wire` per path suffix) and reads the
request's JSON body (model, output limit, what the estimate reads), a whole answer's JSON into
a :class:`~otel_tokens.capture.lifecycle.Response`, and stream events (decoded JSON, one at a
time) with an :class:`~otel_tokens.capture.stream.Accumulator`. Where an SDK capture reads the
same format, its dict-capable readers are the one parser (openai, anthropic, google-genai).
The stream framings (server-sent events, NDJSON) are in :mod:`.framing`.

Adding a wire format: one module here with ``SUFFIXES`` and ``recognise(path)``, listed in
:data:`_FORMATS`, and its tests (the shape: :mod:`.base`).
"""

from __future__ import annotations

from typing import Any

from . import anthropic, cohere, gemini, ollama, openai, watsonx
from .base import Wire

__all__ = ["Wire", "find"]

#: the more specific paths first: OpenAI's suffixes are the most general
_FORMATS: tuple[Any, ...] = (gemini, ollama, anthropic, cohere, watsonx, openai)
_SUFFIXES = tuple(suffix for module in _FORMATS for suffix in module.SUFFIXES)


def find(path: str) -> Wire | None:
    """The wire format a POST to ``path`` speaks, or None (nearly every request: one test of
    the path's end, and one for Gemini's ``:method`` paths)."""
    if not path.endswith(_SUFFIXES) and ":" not in path:
        return None
    for module in _FORMATS:
        wire = module.recognise(path)
        if wire is not None:
            return wire
    return None
