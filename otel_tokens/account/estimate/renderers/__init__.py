"""The request renderers, one module per wire format (as ``capture/wire/`` has one reader
module per format), and the table the estimate reads: request shape (``Request.api``) ->
:class:`~..rendering.Renderer`. A new format: its module here, with its ``RENDERERS``, and
its line below.
"""

from __future__ import annotations

from ..rendering import Renderer
from . import anthropic, bedrock, gemini, openai

__all__ = ["FALLBACK", "RENDERERS"]

#: every request shape a backend describes (its ``BACKEND.apis``) -> its renderer
RENDERERS: dict[str, Renderer] = {
    **openai.RENDERERS,
    **anthropic.RENDERERS,
    **gemini.RENDERERS,
    **bedrock.RENDERERS,
}

#: a shape no renderer is registered for: its messages read as chat messages, no preamble
FALLBACK = Renderer(openai.RENDERERS["openai_chat"].message)
