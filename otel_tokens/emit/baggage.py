"""Who a call is for, from OpenTelemetry baggage set upstream (a gateway, a web handler):
``user.id``, ``tenant.id`` and ``gen_ai.conversation.id`` (``session.id`` as the conversation
when that is all there is). Read once per call; nothing when the baggage is empty."""

from __future__ import annotations

from opentelemetry import baggage

__all__ = ["who_from_baggage"]


def who_from_baggage() -> tuple[str | None, str | None, str | None] | None:
    """(user, tenant, conversation) from the current context's baggage, or None."""
    entries = baggage.get_all()
    if not entries:
        return None
    values = [entries.get("user.id"), entries.get("tenant.id"),
              entries.get("gen_ai.conversation.id") or entries.get("session.id")]  # fmt: skip
    values = [v if isinstance(v, str) and v else None for v in values]
    return tuple(values) if any(values) else None  # type: ignore[return-value]
