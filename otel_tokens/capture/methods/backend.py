"""Any agent backend: wrap a framework's own invoke method and parse what it returns.

``instrument_backend("pkg.module:Class.invoke", parser="copilot")`` wraps the method (sync
or async) so every call gets one ``invoke_agent {name}`` span with the parsed usage. The
result may be an object with ``stdout`` (and optionally ``stderr``, ``exit_code``/
``returncode``), a str/bytes, or a dict (with ``stdout``/``output``, or the CLI's JSON
itself). ``parser`` is a CLI name or a callable taking the result and returning an
:class:`~otel_tokens.parsers.AgentRun`, a :class:`~otel_tokens.usage.Usage` or None. With
``enrich_result=True`` the result's ``token_usage`` and ``premium_requests`` attributes, when
it has them, are set (seed 002's ``AgentResult``). The result itself is never replaced.

``OTEL_TOKENS_BACKENDS`` (``target=parser`` entries separated by ``;``) does the same from
``otel_tokens.instrument()``, through :func:`install`.
"""

from __future__ import annotations

import importlib
import inspect
import json
import threading
from typing import Any, Callable

import wrapt

from ... import faults
from ...usage import Usage
from ..agent_cli.runs import report_run, start_run
from ..lifecycle import async_wrapper, sync_wrapper
from ..agent_cli.parsers import AgentRun, get_parser
from ..patching import unwrap

__all__ = ["install", "instrument_backend", "uninstall", "uninstrument_backend"]

BACKENDS_ENV = "OTEL_TOKENS_BACKENDS"
TARGET_ATTR = "otel_tokens.backend.target"

ParserArg = str | Callable[[Any], "AgentRun | Usage | None"]
_wrapped: dict[str, tuple[Any, str]] = {}  # target -> (owner, attribute)
_env_targets: list[str] = []  # wrapped from OTEL_TOKENS_BACKENDS (BaseInstrumentor is a singleton)
_lock = threading.Lock()


def _resolve(target: str) -> tuple[str, str, Any, str]:
    """``"pkg.mod:Class.method"`` -> (module, dotted name, owner object, attribute)."""
    module_name, sep, dotted = target.partition(":")
    if not sep or not module_name or not dotted:
        raise ValueError(f"backend target must look like 'pkg.module:Class.method', got {target!r}")
    module = importlib.import_module(module_name)
    owner: Any = module
    *path, attr = dotted.split(".")
    for name in path:
        owner = getattr(owner, name)
    if not callable(getattr(owner, attr, None)):
        raise ValueError(f"backend target {target!r} is not a callable")
    return module_name, dotted, owner, attr


def _fields(result: Any) -> tuple[Any, Any, int | None]:
    """(stdout, stderr, exit code) of whatever a backend returned."""
    if isinstance(result, (str, bytes, bytearray)):
        return result, None, None
    if isinstance(result, dict):
        out = result.get("stdout", result.get("output"))
        if out is None and ("stdout" not in result and "output" not in result):
            return json.dumps(result), None, None  # the CLI's own JSON, already decoded
        code = result.get("exit_code", result.get("exitCode", result.get("returncode")))
        return out, result.get("stderr"), code if type(code) is int else None
    out = getattr(result, "stdout", None)
    err = getattr(result, "stderr", None)
    code = None
    for name in ("exit_code", "exitCode", "returncode"):
        value = getattr(result, name, None)
        if type(value) is int:
            code = value
            break
    return out, err, code


def _parse(parser: ParserArg, name: str, result: Any) -> AgentRun | None:
    if callable(parser):
        got = parser(result)
        if got is None or isinstance(got, AgentRun):
            return got
        if isinstance(got, Usage):
            return AgentRun(cli=name, usage=(got,))
        raise TypeError(f"backend parser returned {type(got).__name__}, not AgentRun/Usage/None")
    out, err, code = _fields(result)
    if isinstance(out, (str, bytes, bytearray)) or out is None:
        return get_parser(parser)(
            out, stderr=err if isinstance(err, (str, bytes)) else None, exit_code=code
        )
    raise TypeError(f"backend result's stdout is {type(out).__name__}, not text")


def _enrich(result: Any, run: AgentRun) -> None:
    total = run.total
    for attr, value in (("token_usage", total), ("premium_requests", run.premium_requests)):
        if value is not None and hasattr(result, attr) and not isinstance(result, dict):
            try:
                setattr(result, attr, value)
            except Exception as exc:  # a frozen result: leave it as it is
                faults.report("internal", exc, f"cannot set result.{attr}")


def _make_wrapper(target: str, parser: ParserArg, name: str, enrich: bool, is_async: bool) -> Any:
    """The wrapt wrapper of one backend method, on the one path (:mod:`..lifecycle`)."""
    attrs = {TARGET_ATTR: target}

    def start(_instance: Any, args: tuple, kwargs: dict) -> tuple[Any, tuple, dict, None]:
        return start_run(name, attributes=attrs), args, kwargs, None

    def read(call: Any, result: Any, _context: None) -> Any:
        run = None
        try:
            run = _parse(parser, name, result)
        except Exception as exc:
            faults.report("parse", exc)
        report_run(call, run if run is not None else AgentRun(cli=name))
        if enrich and run is not None:
            _enrich(result, run)
        return result

    return (async_wrapper if is_async else sync_wrapper)(start, read)


def instrument_backend(
    target: str,
    parser: ParserArg = "copilot",
    *,
    enrich_result: bool = False,
    name: str | None = None,
) -> bool:
    """Wrap ``target`` (``"pkg.module:Class.method"``) so each call reports an agent run.

    ``name`` labels the span (``invoke_agent {name}``; default: the parser's name). A target or
    parser that does not exist is one warning (and an ``argument`` fault), never an exception:
    returns False and wraps nothing; True once the target is wrapped.
    """
    try:
        _wrap(target, parser, enrich_result, name)
    except (ImportError, AttributeError, ValueError, TypeError) as exc:
        faults.report(
            "argument", exc, f"instrument_backend({target!r}): not wrapped: {exc}", each=True
        )
        return False
    return True


def _wrap(target: str, parser: ParserArg, enrich_result: bool, name: str | None) -> None:
    """Wrap ``target`` once; raises for a target or parser that does not exist."""
    if not isinstance(target, str):
        raise ValueError(f"backend target must be a string, got {type(target).__name__}")
    if isinstance(parser, str):
        get_parser(parser)  # unknown names fail here, not on the first call
    elif not callable(parser):
        raise ValueError("parser must be a CLI name or a callable")
    label = name or (parser if isinstance(parser, str) else getattr(parser, "__name__", "agent"))
    with _lock:
        if target in _wrapped:
            return
        module_name, dotted, owner, attr = _resolve(target)
        original = inspect.unwrap(getattr(owner, attr))
        is_async = inspect.iscoroutinefunction(original)
        wrapper = _make_wrapper(target, parser, label, enrich_result, is_async)
        wrapt.wrap_function_wrapper(module_name, dotted, wrapper)
        _wrapped[target] = (owner, attr)


def uninstrument_backend(target: str | None = None) -> None:
    """Restore ``target``'s original method (every wrapped target when None)."""
    with _lock:
        targets = list(_wrapped) if target is None else [target]
        for key in targets:
            entry = _wrapped.pop(key, None)
            if entry is not None:
                unwrap(*entry)


DEPENDENCIES: tuple[str, ...] = ()


def install(**_: Any) -> None:
    """Wrap every backend named in ``OTEL_TOKENS_BACKENDS``; one that cannot be wrapped is one
    line naming it (and a ``config`` fault), and the others are wrapped all the same."""
    from ...settings import current

    for target, parser in current().backends:
        try:
            _wrap(target, parser, False, None)
        except (ImportError, AttributeError, ValueError, TypeError) as exc:
            faults.report("config", exc, f"{BACKENDS_ENV}: cannot wrap {target!r}: {exc}")
            continue
        _env_targets.append(target)


def uninstall() -> None:
    """Unwrap the backends ``install()`` wrapped."""
    while _env_targets:
        uninstrument_backend(_env_targets.pop())
