"""What ``instrument()`` installs for ``OTEL_TOKENS_BACKENDS``: :mod:`.backend` (with the
parsers and run reporting) is imported only when the setting names a backend."""

from __future__ import annotations

import sys
from typing import Any

from ..patching import Backend

__all__ = ["BACKEND", "DEPENDENCIES", "install", "uninstall"]

BACKEND = Backend(
    "AgentBackendsInstrumentor",
    "The backends named in ``OTEL_TOKENS_BACKENDS``.",
    requirements=(),
    extra=None,
    apis=(),
)
DEPENDENCIES: tuple[str, ...] = BACKEND.requirements
_BACKEND = "otel_tokens.capture.methods.backend"


def install(**options: Any) -> None:
    """Wrap every backend named in ``OTEL_TOKENS_BACKENDS``."""
    from ...settings import current

    if current().backends:
        from .backend import install as install_backends

        install_backends(**options)


def uninstall() -> None:
    """Unwrap the backends ``install()`` wrapped."""
    backend = sys.modules.get(_BACKEND)
    if backend is not None:
        backend.uninstall()
