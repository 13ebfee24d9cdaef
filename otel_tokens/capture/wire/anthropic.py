"""Anthropic's Messages API on the wire (``POST /v1/messages``), whole or streamed (named
server-sent events: ``message_start``, ``content_block_delta``, ``message_delta``, ...). The
readers are the ``anthropic`` SDK capture's own (:mod:`..sdk.anthropic`): cache classes,
thinking, web searches, 1-hour cache writes and the iterations billed apart."""

from __future__ import annotations

from typing import Any

from ...request import Request
from ..sdk.anthropic import _messages_request, _messages_response, _MessagesAccumulator
from .base import Wire

__all__ = ["SUFFIXES", "recognise"]


def _request(body: dict[str, Any], model: str | None) -> Request:
    return _messages_request(body)


_MESSAGES = Wire("chat", _request, _messages_response, lambda body: _MessagesAccumulator())
SUFFIXES = ("/v1/messages",)


def recognise(path: str) -> Wire | None:
    """The Messages request a POST to ``path`` is, or None (``/v1/messages/batches`` and
    ``count_tokens`` are not a model's answer)."""
    return _MESSAGES if path.endswith(SUFFIXES) else None
