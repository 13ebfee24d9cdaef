"""Agent names and conversation ids read from an agent framework's own run context:
installed when the application imports the framework, nothing imported or patched before
(see :func:`otel_tokens.account.agents.add_framework_source`)."""

from __future__ import annotations

import importlib.util
import sys
from typing import Callable

import wrapt

from ..account.agents import FrameworkRun, add_framework_source, remove_framework_source

__all__ = ["FrameworkNames"]


class FrameworkNames:
    """``reader`` says what framework run the calls are in once ``module`` (the framework's
    run-context module) is imported."""

    def __init__(self, module: str, reader: Callable[[], FrameworkRun | None]) -> None:
        self.module, self.reader = module, reader
        self.installed = self._hooked = False

    def _on_import(self, _module: object) -> None:
        if self.installed:
            add_framework_source(self.reader)

    def install(self) -> bool:
        """False when the framework is not installed."""
        try:  # the top-level package only: finding a submodule would import its parents
            package = self.module.partition(".")[0]
            if package not in sys.modules and importlib.util.find_spec(package) is None:
                return False
        except (ImportError, ValueError):
            return False
        self.installed = True
        if self.module in sys.modules:
            add_framework_source(self.reader)
        elif not self._hooked:
            wrapt.register_post_import_hook(self._on_import, self.module)
            self._hooked = True
        return True

    def uninstall(self) -> None:
        self.installed = False
        remove_framework_source(self.reader)
