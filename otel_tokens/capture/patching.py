"""Patching shared by every instrumentor (wrapt does the patching): patch tables installed
now or at the application's import, wrappers whose per-call module loads at the first call."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import threading
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Iterable

import wrapt

from .. import faults

__all__ = ["Backend", "SdkPatches", "deferred", "report_load_failure", "unwrap"]


@dataclass(frozen=True)
class Backend:
    """One backend's description, the ``BACKEND`` of its ``capture/<name>_patches.py``: the
    registry, the ``opentelemetry-instrument`` entry point's class and the pip extra are all
    read from it (``tests/layout`` checks ``pyproject.toml`` against every description).

    ``instrumentor``: the entry point's class name (``otel_tokens.entry_points``);
    ``summary``: its docstring; ``requirements``: the library it patches, as
    ``instrumentation_dependencies()`` reports it; ``extra``: the pip extra installing that
    library (None: nothing to install); ``apis``: the request shapes its calls describe
    (:data:`otel_tokens.request.Api`), each rendered for the estimate by its format's
    renderer (``account/estimate/renderers/``).
    """

    instrumentor: str
    summary: str
    requirements: tuple[str, ...] = ()
    extra: str | None = None
    apis: tuple[str, ...] = ()


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


def report_load_failure(module: str, exc: Exception) -> None:
    """A module imported at the first call failed to load: logged and counted, never raised."""
    faults.report("internal", exc, f"cannot load {module}: {exc!r}")


def deferred(module: str, name: str) -> Callable[[bool], Any]:
    """A wrapper factory for :class:`SdkPatches` whose wrapper is ``module.wrapper(name,
    is_async)``, built at the first call: ``module`` (the per-call machinery) is imported
    then, not by ``instrument()``. If it cannot be imported, the failure is counted and the
    call goes through unwrapped."""

    def factory(is_async: bool) -> Callable[..., Any]:
        real: Callable[..., Any] | None = None

        def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
            nonlocal real
            if real is None:
                try:
                    real = importlib.import_module(module).wrapper(name, is_async)
                except Exception as exc:
                    report_load_failure(module, exc)
                    return wrapped(*args, **kwargs)
                if wrapper.loaded is not None:  # later calls go straight to the real wrapper
                    wrapper.loaded(real)
            return real(wrapped, instance, args, kwargs)  # type: ignore[misc]

        wrapper.loaded = None  # type: ignore[attr-defined]  # set by SdkPatches
        return wrapper

    return factory


#: (module, class, method, wrapper factory); the factory gets (is_async) and returns a wrapt
#: wrapper; class "" patches a module-level function
Target = tuple[str, str, str, Callable[[bool], Any]]


class SdkPatches:
    """The patches of one provider SDK. Each target module is patched when ``install()`` runs
    if it is already imported, else as soon as the application imports it (a post-import
    hook): SDKs that load their resource modules lazily (openai 3.x) keep doing so, and
    nothing is imported or patched until it is used."""

    def __init__(
        self,
        package: str,
        targets: Iterable[Target],
        on_uninstall: Callable[[], None] | None = None,
    ) -> None:
        self.package = package
        self.targets = tuple(targets)
        self._on_uninstall = on_uninstall
        self.installed = False
        self._hooked: set[str] = set()
        self._patched: list[tuple[Any, str]] = []
        # reentrant: reading a target off a module may import another target module (a
        # package's lazy __getattr__), whose post-import hook patches it from inside this one
        self._lock = threading.RLock()

    @property
    def patched(self) -> bool:
        """True while any method of the SDK is wrapped."""
        return bool(self._patched)

    def _patch_module(self, module: Any) -> None:
        """Wrap the targets of one imported module (at most once each)."""
        with self._lock:
            if not self.installed:
                return
            for module_name, cls_name, method, factory in self.targets:
                if module_name != module.__name__:
                    continue
                owner = getattr(module, cls_name, None) if cls_name else module  # "": a function
                if owner is None or method not in vars(owner) or (owner, method) in self._patched:
                    continue  # an older SDK without this API, or done already
                is_async = (
                    cls_name.startswith("Async")
                    if cls_name
                    else inspect.iscoroutinefunction(inspect.unwrap(getattr(owner, method)))
                )
                wrapper = factory(is_async)
                wrapt.wrap_function_wrapper(owner, method, wrapper)
                if hasattr(wrapper, "loaded"):  # a deferred wrapper: swapped once loaded
                    wrapper.loaded = partial(self._swap, owner, method, vars(owner)[method])
                self._patched.append((owner, method))

    def _swap(self, owner: Any, method: str, installed: Any, real: Callable[..., Any]) -> None:
        """Put ``real`` (a deferred wrapper's, now loaded) in place of the loader, unless
        another instrumentation has wrapped the method since: its wrapper stays on top."""
        with self._lock:
            if self.installed and vars(owner).get(method) is installed:
                setattr(owner, method, wrapt.FunctionWrapper(installed.__wrapped__, real))

    def install(self) -> bool:
        """Patch now what is imported, the rest on import; False when the SDK is not installed."""
        try:
            if self.package not in sys.modules and importlib.util.find_spec(self.package) is None:
                return False
        except (ImportError, ValueError):
            return False
        self.installed = True
        for module_name in dict.fromkeys(target[0] for target in self.targets):
            module = sys.modules.get(module_name)
            if module is not None:
                self._patch_module(module)
            elif module_name not in self._hooked:
                wrapt.register_post_import_hook(self._patch_module, module_name)
                self._hooked.add(module_name)
        return True

    def uninstall(self) -> None:
        """Restore the original SDK methods (identity checks hold)."""
        with self._lock:
            self.installed = False
            patched, self._patched = self._patched, []
        for cls, method in patched:
            unwrap(cls, method)
        if patched and self._on_uninstall is not None:
            self._on_uninstall()
