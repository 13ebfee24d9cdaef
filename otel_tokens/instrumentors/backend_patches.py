"""What ``instrument()`` installs for ``OTEL_TOKENS_BACKENDS``: :mod:`.backend` (with the
parsers and run reporting) is imported only when the variable names a backend."""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["DEPENDENCIES", "install", "uninstall"]

DEPENDENCIES: tuple[str, ...] = ()
_BACKEND = "otel_tokens.instrumentors.backend"


def install(**options: Any) -> None:
    """Wrap every backend named in ``OTEL_TOKENS_BACKENDS`` (errors raise at start)."""
    if os.environ.get("OTEL_TOKENS_BACKENDS", "").replace(";", "").strip():
        from .backend import install as install_backends

        install_backends(**options)


def uninstall() -> None:
    """Unwrap the backends ``install()`` wrapped."""
    backend = sys.modules.get(_BACKEND)
    if backend is not None:
        backend.uninstall()
