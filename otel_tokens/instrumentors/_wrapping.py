"""Wrapping helpers shared by every instrumentor (wrapt does the patching)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Any, Callable, Iterable

import wrapt

__all__ = ["SdkPatches", "unwrap"]

# wrapt >= 2 puts function wrappers under BaseObjectProxy; wrapt 1 has only ObjectProxy
_PROXY = getattr(wrapt, "BaseObjectProxy", wrapt.ObjectProxy)


def unwrap(owner: Any, attribute: str) -> None:
    """Restore ``owner.attribute`` to what a wrapt wrapper replaced (no-op when not wrapped).

    The same as ``opentelemetry.instrumentation.utils.unwrap``, kept here so that
    ``otel_tokens.instrument()`` does not import opentelemetry-instrumentation (~20 ms).
    """
    current = getattr(owner, attribute, None)
    if isinstance(current, _PROXY) and hasattr(current, "__wrapped__"):
        setattr(owner, attribute, current.__wrapped__)


#: (module, class, method, wrapper factory); the factory gets (is_async) and returns a wrapt wrapper
Target = tuple[str, str, str, Callable[[bool], Any]]


class SdkPatches:
    """The patches of one provider SDK, applied when ``install()`` runs if the SDK is imported,
    else as soon as the application imports it (a post-import hook: zero cost until then)."""

    def __init__(self, package: str, targets: Iterable[Target],
                 on_uninstall: Callable[[], None] | None = None) -> None:  # fmt: skip
        self.package = package
        self.targets = tuple(targets)
        self._on_uninstall = on_uninstall
        self.installed = self.patched = self._hooked = False

    def classes(self) -> list[tuple[Any, str, Callable[[bool], Any], bool]]:
        """(class, method, factory, is_async) for every target this SDK version has."""
        found = []
        for module_name, cls_name, method, factory in self.targets:
            try:
                cls = getattr(importlib.import_module(module_name), cls_name)
            except (ImportError, AttributeError):
                continue  # an older SDK without this API
            if method in vars(cls):
                found.append((cls, method, factory, cls_name.startswith("Async")))
        return found

    def patch(self, _module: Any = None) -> None:
        if not self.installed or self.patched:
            return
        for cls, method, factory, is_async in self.classes():
            wrapt.wrap_function_wrapper(cls, method, factory(is_async))
        self.patched = True

    def install(self) -> bool:
        """Patch now or on import; False when the SDK is not installed at all."""
        try:
            if self.package not in sys.modules and importlib.util.find_spec(self.package) is None:
                return False
        except (ImportError, ValueError):
            return False
        self.installed = True
        if self.package in sys.modules:
            self.patch()
        elif not self._hooked:
            wrapt.register_post_import_hook(self.patch, self.package)
            self._hooked = True
        return True

    def uninstall(self) -> None:
        """Restore the original SDK methods (identity checks hold)."""
        self.installed = False
        if not self.patched:
            return
        for cls, method, _factory, _is_async in self.classes():
            unwrap(cls, method)
        self.patched = False
        if self._on_uninstall is not None:
            self._on_uninstall()
