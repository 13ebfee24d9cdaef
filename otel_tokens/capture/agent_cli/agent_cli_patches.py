"""What ``instrument()`` installs for agent CLIs: the ``subprocess``/asyncio patches, light.

A ``Popen`` is checked here against the known CLI names; only a matching one imports
:mod:`.commands` (the run tracking, parsers and reporting), at its first run. Until then
the other wrapped methods call straight through: no run can exist yet.
"""

from __future__ import annotations

import contextvars
import importlib
import os
import sys
from typing import Any, Callable, Mapping, Sequence

import wrapt

from ... import faults
from .parsers import PARSERS
from ..patching import Backend, report_load_failure, unwrap

__all__ = ["BACKEND", "DEPENDENCIES", "cli_names", "install", "uninstall"]

BACKEND = Backend(
    "AgentCliInstrumentor",
    "Agent CLIs (Copilot, Claude Code, Codex, Gemini) run through subprocess or asyncio.",
    requirements=(),
    extra=None,
    apis=(),
)
DEPENDENCIES: tuple[str, ...] = BACKEND.requirements
_RUNS = "otel_tokens.capture.agent_cli.commands"
_SUFFIXES = (".exe", ".cmd", ".bat", ".ps1", ".js", ".mjs", ".cjs", ".sh")
_LAUNCHERS = ("node", "npx", "bunx", "pnpx")
_TRIVIAL = frozenset(("--version", "-v", "-V", "--help", "-h", "help", "version"))

_via_run: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "otel_tokens_via_run", default=False
)
_names: dict[str, str] = {}


def cli_names(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Executable name -> parser: the four CLIs, ``OTEL_TOKENS_CLI_NAMES`` (``name=parser``
    entries, comma-separated; a bare known name also works) and ``extra``. An ``extra`` entry
    naming no known parser is left out, with one warning and a ``config`` fault."""
    from ...settings import current

    names = {name: name for name in PARSERS}
    names.update(current().cli_names)
    for name, parser in (extra or {}).items():
        if parser not in PARSERS:
            faults.report(
                "config",
                detail=f"cli_names: {name}={parser!r} names no known parser "
                f"({', '.join(PARSERS)}); left out",
            )
            continue
        names[name] = parser
    return names


def _base(arg: str) -> str:
    name = os.path.basename(arg.rstrip("/\\")).lower()
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _argv(args: Any, shell: bool) -> list[str] | None:
    """The command line as a list of strings, or None when it cannot be read."""
    if isinstance(args, (str, bytes, os.PathLike)):
        text = os.fsdecode(args)
        if not shell:
            return [text]
        import shlex  # shell=True with a string only

        try:
            return shlex.split(text)
        except ValueError:
            return None
    try:
        return [os.fsdecode(a) for a in args]
    except TypeError:
        return None


def _recognize(argv: Sequence[str] | None, executable: Any) -> tuple[str, str] | None:
    """``(parser, executable name)`` when the command runs a known CLI."""
    if not argv:
        return None
    names = _names
    exe = _base(argv[0])
    if executable is not None:
        exe_override = _base(os.fsdecode(executable))
        if exe_override in names:
            exe = exe_override
    skip = 1
    if exe in _LAUNCHERS and len(argv) > 1:  # node .../copilot/index.js, npx @github/copilot@1
        path = argv[1].replace("\\", "/").rstrip("/")
        for part in reversed(path.split("/")[-2:]):
            candidate = _base(part.split("@")[0] if not part.startswith("@") else part)
            if candidate in names:
                exe, skip = candidate, 2
                break
    parser = names.get(exe)
    if parser is None:
        return None
    rest = argv[skip:]
    if rest and all(a in _TRIVIAL for a in rest):
        return None  # --version / --help: not an agent invocation
    return parser, exe


def _bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Popen's arguments by name (args, executable, stdout, shell, ...)."""
    names = ("args", "bufsize", "executable", "stdin", "stdout", "stderr")
    bound = dict(zip(names, args))
    bound.update(kwargs)
    return bound


def _is_agent_cli(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """True when ``Popen(*args, **kwargs)`` runs a known CLI."""
    bound = _bind(args, kwargs)
    if "args" not in bound:
        return False
    argv = _argv(bound["args"], bool(bound.get("shell", False)))
    return argv is not None and _recognize(argv, bound.get("executable")) is not None


def _popen_init(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    try:
        found = _is_agent_cli(args, kwargs)
    except Exception as exc:
        faults.report("internal", exc)
        found = False
    if found:
        try:
            runs = importlib.import_module(_RUNS)
        except Exception as exc:  # the run tracking cannot load: the child runs untracked
            report_load_failure(_RUNS, exc)
        else:
            return runs._popen_init(wrapped, instance, args, kwargs)
    return wrapped(*args, **kwargs)


def _tracked(name: str) -> Callable[..., Any]:
    """A wrapper handing over to ``subprocess.<name>`` once an agent-CLI run was started."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        handler = getattr(sys.modules.get(_RUNS), name, None)
        if handler is None:  # no agent-CLI run started yet: nothing to observe
            return wrapped(*args, **kwargs)
        return handler(wrapped, instance, args, kwargs)

    return wrapper


def _run_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    token = _via_run.set(True)
    try:
        return wrapped(*args, **kwargs)
    finally:
        _via_run.reset(token)


_TARGETS: tuple[tuple[str, str, Any], ...] = (
    ("subprocess", "Popen.__init__", _popen_init),
    ("subprocess", "Popen.communicate", _tracked("_communicate")),
    ("subprocess", "Popen.wait", _tracked("_wait")),
    ("subprocess", "Popen.poll", _tracked("_wait")),
    ("subprocess", "run", _run_wrapper),
    *(
        ("asyncio.subprocess", f"SubprocessStreamProtocol.{method}", _tracked(f"_{method}"))
        for method in (
            "connection_made",
            "pipe_data_received",
            "pipe_connection_lost",
            "process_exited",
        )
    ),
)


def install(**kwargs: Any) -> None:
    """Wrap ``subprocess.Popen`` and asyncio subprocesses: one span per agent-CLI run.

    ``cli_names={"my-wrapper": "copilot"}`` adds executable names (as does
    ``OTEL_TOKENS_CLI_NAMES``); a bad entry is left out with one warning.
    """
    _names.clear()
    _names.update(cli_names(kwargs.get("cli_names")))
    import asyncio.subprocess  # noqa: F401  (targets below)

    for module, name, wrapper in _TARGETS:
        try:
            wrapt.wrap_function_wrapper(module, name, wrapper)
        except (AttributeError, ImportError) as exc:  # another Python: that path is uncovered
            faults.report("config", exc, f"cannot wrap {module}.{name}")


def uninstall() -> None:
    """Restore the original ``subprocess`` and asyncio functions."""
    for module, name, _wrapper in _TARGETS:
        owner_name, _, attr = name.rpartition(".")
        try:
            owner = importlib.import_module(module)
            if owner_name:
                owner = getattr(owner, owner_name)
            unwrap(owner, attr)
        except Exception as exc:
            faults.report("config", exc, f"cannot unwrap {module}.{name}")
