"""Agent CLIs run as subprocesses (Copilot, Claude Code, Codex, Gemini, and wrappers).

The run tracking; :mod:`.agent_cli_patches` installs the wrappers and imports this
module at the first agent-CLI run. It wraps ``subprocess.Popen`` (so ``run``, ``check_output`` and ``communicate`` are covered) and
asyncio's subprocess protocol. A child whose executable is a known CLI gets one
``invoke_agent {cli}`` span; its output is parsed when the process ends (``communicate``,
``wait``/``poll`` once the pipes are drained, or garbage collection as a last resort).

What the caller reads is never changed. A caller that reads the pipes itself gets its bytes
unchanged: they are copied as they pass. Copilot CLI (1.0.102) prints no usage on stdout, so
by default (``OTEL_TOKENS_COPILOT_USAGE_FILE``, on unless set false) a Copilot run without
``--usage-output-file`` gets one pointing at a private temporary file, read after the exit and
deleted; a caller's own ``--usage-output-file`` is read and left as it is. Opt-in
(``OTEL_TOKENS_COPILOT_JSON=true``): a Copilot call made with ``-s`` through
``subprocess.run`` (or ``check_output``) runs with ``--output-format json`` instead and the
caller receives, byte for byte, what ``-s`` prints (seed 002, Option A); the JSONL stays on
the run record (:func:`agent_run`, ``last_agent_run()``).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import weakref
from typing import Any

import wrapt

from ... import faults
from ...call import Call
from ...handler import get_handler
from .agent_cli_patches import (  # noqa: F401 (install, uninstall, cli_names: re-exported)
    DEPENDENCIES,
    _argv,
    _bind,
    _recognize,
    _via_run,
    cli_names,
    install,
    uninstall,
)
from .runs import CLI_OUTPUT_REWRITTEN, CLI_USAGE_FILE, report_run, start_run
from .args import request_model
from .parsers import PARSERS, AgentRun
from .parsers.copilot import silent_output

__all__ = ["agent_run", "cli_names", "install", "uninstall"]

_MAX_CAPTURE = 256 * 1024 * 1024  # bytes of output kept per run before giving up


class _Tee(wrapt.ObjectProxy):  # type: ignore[misc]
    """A child's pipe as the caller sees it: every byte passes through unchanged, and a copy
    goes to the run (while it is listening)."""

    def __init__(self, wrapped: Any, run: _Run, index: int) -> None:
        super().__init__(wrapped)
        self._self_run = run
        self._self_index = index
        self._self_listening = True
        self._self_done = False

    def _self_seen(self, data: Any) -> None:
        try:
            if data:
                if self._self_listening:
                    self._self_run.feed(self._self_index, data)
            elif data is not None:
                self._self_eof()
        except Exception as exc:
            faults.report("internal", exc)

    def _self_eof(self) -> None:
        if not self._self_done:
            self._self_done = True
            self._self_run.pipe_done()

    def read(self, *args: Any, **kwargs: Any) -> Any:
        data = self.__wrapped__.read(*args, **kwargs)
        self._self_seen(data)
        size = args[0] if args else kwargs.get("size", kwargs.get("n", -1))
        if data is not None and (size is None or size < 0):  # read to the end
            self._self_eof()
        return data

    def read1(self, *args: Any, **kwargs: Any) -> Any:
        data = self.__wrapped__.read1(*args, **kwargs)
        self._self_seen(data)
        return data

    def readline(self, *args: Any, **kwargs: Any) -> Any:
        data = self.__wrapped__.readline(*args, **kwargs)
        self._self_seen(data)
        return data

    def readlines(self, *args: Any, **kwargs: Any) -> Any:
        lines = self.__wrapped__.readlines(*args, **kwargs)
        for line in lines:
            self._self_seen(line)
        if not args and not kwargs:  # read to the end
            self._self_eof()
        return lines

    def readinto(self, buffer: Any) -> Any:
        n = self.__wrapped__.readinto(buffer)
        if n is not None:
            self._self_seen(bytes(memoryview(buffer)[:n]) if n else b"")
        return n

    def __iter__(self) -> _Tee:
        return self

    def __next__(self) -> Any:
        try:
            line = next(self.__wrapped__)
        except StopIteration:
            self._self_seen(b"")
            raise
        self._self_seen(line)
        return line

    def close(self) -> None:
        try:
            self.__wrapped__.close()
        finally:
            self._self_eof()


class _Run:
    """One instrumented child: its call, the output seen so far, and how it ends."""

    def __init__(
        self, call: Call, parser: str, rewrite: bool, usage_file: str | None, own_file: bool = True
    ) -> None:
        self.call = call
        self.parser = parser
        self.rewrite = rewrite
        self.usage_file = usage_file
        self.own_file = own_file  # ours: deleted after reading; the caller's: left as it is
        self.chunks: tuple[list[Any], list[Any]] = ([], [])
        self.size = 0
        self.overflow = False
        self.tees: list[_Tee] = []
        self.async_fds: set[int] | None = None  # asyncio: pipes still open
        self.transport: Any = None
        self.returncode: int | None = None
        self.result: AgentRun | None = None
        self.finished = False
        self.in_communicate = False  # communicate() ends the run itself, with its result
        self.lock = threading.Lock()

    # -- output -----------------------------------------------------------------------------
    def feed(self, index: int, data: Any) -> None:
        if self.overflow or self.finished:
            return
        self.size += len(data)
        if self.size > _MAX_CAPTURE:
            self.overflow = True
            self.chunks[0].clear()
            self.chunks[1].clear()
            faults.report("parse", None, "agent-CLI output too large to parse")
            return
        self.chunks[index].append(data)

    def listen(self, on: bool) -> None:
        for tee in self.tees:
            tee._self_listening = on

    def pipe_done(self) -> None:
        if self.returncode is not None:
            self.maybe_finish()

    def drained(self) -> bool:
        if self.async_fds is not None:
            return not self.async_fds
        return all(tee._self_done for tee in self.tees)

    def maybe_finish(self) -> None:
        if self.returncode is not None and not self.in_communicate and self.drained():
            self.finish()

    @staticmethod
    def _joined(chunks: list[Any]) -> Any:
        if not chunks:
            return None
        return "".join(chunks) if isinstance(chunks[0], str) else b"".join(chunks)

    # -- the end ----------------------------------------------------------------------------
    def finish(self, stdout: Any = None, stderr: Any = None) -> AgentRun | None:
        """Parse what was seen and end the call (once); never raises."""
        with self.lock:
            if self.finished:
                return self.result
            self.finished = True
        attrs: dict[str, Any] = {}
        try:
            out = stdout if stdout is not None else self._joined(self.chunks[0])
            err = stderr if stderr is not None else self._joined(self.chunks[1])
            self.chunks[0].clear()
            self.chunks[1].clear()
            usage_text = self._read_usage_file()
            if self.rewrite:
                attrs[CLI_OUTPUT_REWRITTEN] = True
            if self.usage_file is not None:
                attrs[CLI_USAGE_FILE] = usage_text is not None
            code = self.returncode
            if self.parser == "copilot":
                run = PARSERS["copilot"](out, stderr=err, exit_code=code, usage_file=usage_text)
            else:
                run = PARSERS[self.parser](out, stderr=err, exit_code=code)
            self.result = run
        except Exception as exc:
            faults.report("parse", exc)
            run = None
        report_run(self.call, run, attributes=attrs)
        return self.result

    def _read_usage_file(self) -> str | None:
        path = self.usage_file
        if path is None:
            return None
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
            return text if text.strip() else None
        except OSError:
            return None
        finally:
            if self.own_file:
                _remove(path)

    def abandon(self) -> None:
        """The process object was collected before its end was seen: report what we have."""
        if not self.finished:
            self.finish()


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def agent_run(process: Any) -> AgentRun | None:
    """The parsed run of a ``Popen`` or asyncio ``Process`` (None until it ended)."""
    target = getattr(process, "_transport", None)
    if target is not None:  # asyncio Process -> its Popen
        try:
            process = target.get_extra_info("subprocess") or process
        except Exception:
            pass
    run = getattr(process, "_otel_tokens_run", None)
    if not isinstance(run, _Run):
        return None
    if not run.finished and run.returncode is None and run.transport is not None:
        # asyncio: ``wait()``/``communicate()`` can return (the exit status is known) in the
        # same loop turn as the exit, before the protocol's ``process_exited`` callback ran
        try:
            returncode = run.transport.get_returncode()
            if returncode is not None:
                run.returncode = returncode
                run.maybe_finish()
        except Exception as exc:
            faults.report("internal", exc)
    return run.result


# -- Popen ------------------------------------------------------------------------------------
def _rewrite_copilot(argv: list[str]) -> list[str] | None:
    """``-s``/``--silent`` replaced by ``--output-format json`` (None: nothing to rewrite)."""
    if any(a == "--output-format" or a.startswith("--output-format=") for a in argv):
        return None
    if "-s" not in argv and "--silent" not in argv:
        return None
    out: list[str] = []
    for arg in argv:
        if arg in ("-s", "--silent"):
            out.extend(("--output-format", "json"))
        else:
            out.append(arg)
    return out


def _popen_init(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    plan = None
    try:
        plan = _plan(args, kwargs)
    except Exception as exc:
        faults.report("internal", exc)
    if plan is None:
        return wrapped(*args, **kwargs)
    run, call_args, call_kwargs = plan
    try:
        result = wrapped(*call_args, **call_kwargs)
    except BaseException as exc:
        run.finished = True
        if run.usage_file is not None and run.own_file:
            _remove(run.usage_file)
        report_run(run.call, None, exception=exc)
        raise
    try:
        _attach(instance, run)
        if call_args is not args or call_kwargs is not kwargs:  # the flags we added stay ours:
            instance.args = _bind(args, kwargs)["args"]  # the caller sees its own command line
    except Exception as exc:
        faults.report("internal", exc)
    return result


def _plan(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[_Run, tuple[Any, ...], dict[str, Any]] | None:
    bound = _bind(args, kwargs)
    if "args" not in bound:
        return None
    shell = bool(bound.get("shell", False))
    argv = _argv(bound["args"], shell)
    found = _recognize(argv, bound.get("executable"))
    if found is None or argv is None:
        return None
    parser, exe = found
    new_argv, rewrite, usage_file, own_file = list(argv), False, None, True
    if parser == "copilot":
        editable = not shell and not isinstance(bound["args"], (str, bytes, os.PathLike))
        new_argv, rewrite, usage_file, own_file = _copilot_plan(argv, bound, editable)
    env = bound.get("env") if isinstance(bound.get("env"), dict) else None
    call = start_run(parser, exe, argv, request_model=request_model(parser, argv, env))
    run = _Run(call, parser, rewrite, usage_file, own_file)
    if new_argv != argv:
        if "args" in kwargs:
            kwargs = {**kwargs, "args": new_argv}
        else:
            args = (new_argv, *args[1:])
    return run, args, kwargs


def _copilot_plan(
    argv: list[str], bound: dict[str, Any], editable: bool
) -> tuple[list[str], bool, str | None, bool]:
    """(argv to run, rewritten for -s, the usage file to read, whether it is ours)."""
    new_argv, rewrite = list(argv), False
    given = _flag_value(argv, "--usage-output-file")
    if given is not None:
        return new_argv, rewrite, given, False  # the caller's own file: read, left as it is
    if not editable:
        return new_argv, rewrite, None, True
    settings = get_handler().settings
    if settings.copilot_json and _via_run.get() and bound.get("stdout") == subprocess.PIPE:
        changed = _rewrite_copilot(new_argv)
        if changed is not None:
            new_argv, rewrite = changed, True
    if not settings.copilot_usage_file:
        return new_argv, rewrite, None, True
    fd, usage_file = tempfile.mkstemp(prefix="otel_tokens-copilot-", suffix=".json")
    os.close(fd)
    return [*new_argv, "--usage-output-file", usage_file], rewrite, usage_file, True


def _flag_value(argv: list[str], name: str) -> str | None:
    for index, arg in enumerate(argv):
        if arg == name and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith(name + "="):
            return arg.partition("=")[2]
    return None


def _attach(popen: Any, run: _Run) -> None:
    popen._otel_tokens_run = run
    for index, name in ((0, "stdout"), (1, "stderr")):
        pipe = getattr(popen, name, None)
        if pipe is not None:
            tee = _Tee(pipe, run, index)
            run.tees.append(tee)
            setattr(popen, name, tee)
    weakref.finalize(popen, run.abandon)


def _run_of(instance: Any) -> _Run | None:
    run = getattr(instance, "_otel_tokens_run", None)
    return run if isinstance(run, _Run) and not run.finished else None


def _communicate(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    run = _run_of(instance)
    if run is None or run.async_fds is not None:
        return wrapped(*args, **kwargs)
    run.listen(False)  # communicate() reads the pipes itself: take its result instead
    run.in_communicate = True
    try:
        result = wrapped(*args, **kwargs)
    finally:
        run.listen(True)
        run.in_communicate = False
    try:
        out, err = result
        run.returncode = instance.returncode
        prefix_out, prefix_err = run._joined(run.chunks[0]), run._joined(run.chunks[1])
        parsed = run.finish(_concat(prefix_out, out), _concat(prefix_err, err))
        if (
            run.rewrite
            and parsed is not None
            and out is not None
            and parsed.output_format == "jsonl"
        ):
            text = silent_output(parsed.raw)  # what -s would have printed, byte for byte
            result = (text if isinstance(out, str) else text.encode("utf-8"), err)
    except Exception as exc:
        faults.report("internal", exc)
    return result


def _concat(prefix: Any, rest: Any) -> Any:
    if prefix is None:
        return rest
    if rest is None:
        return prefix
    try:
        return prefix + rest
    except TypeError:
        return rest


def _wait(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    code = wrapped(*args, **kwargs)
    run = _run_of(instance)
    if run is not None and run.async_fds is None and code is not None:
        try:
            run.returncode = code
            run.maybe_finish()
        except Exception as exc:
            faults.report("internal", exc)
    return code


# -- asyncio ----------------------------------------------------------------------------------
def _protocol_run(protocol: Any) -> _Run | None:
    run = getattr(protocol, "_otel_tokens_run", None)
    return run if isinstance(run, _Run) and not run.finished else None


def _connection_made(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    result = wrapped(*args, **kwargs)
    try:
        transport = args[0] if args else kwargs.get("transport")
        popen = transport.get_extra_info("subprocess")
        run = getattr(popen, "_otel_tokens_run", None)
        if isinstance(run, _Run) and not run.finished:
            # asyncio reads the pipes' descriptors itself: take the data from the protocol
            for tee in run.tees:
                tee._self_listening = False
            run.tees.clear()
            for name in ("stdout", "stderr"):
                pipe = getattr(popen, name, None)
                if isinstance(pipe, _Tee):
                    setattr(popen, name, pipe.__wrapped__)
            run.transport = transport
            run.async_fds = {fd for fd in (1, 2) if transport.get_pipe_transport(fd) is not None}
            instance._otel_tokens_run = run
    except Exception as exc:
        faults.report("internal", exc)
    return result


def _pipe_data_received(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    run = _protocol_run(instance)
    if run is not None:
        try:
            fd, data = args
            if fd in (1, 2):
                run.feed(fd - 1, data)
        except Exception as exc:
            faults.report("internal", exc)
    return wrapped(*args, **kwargs)


def _pipe_connection_lost(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    run = _protocol_run(instance)
    result = wrapped(*args, **kwargs)
    if run is not None and run.async_fds is not None:
        try:
            run.async_fds.discard(args[0])
            run.maybe_finish()
        except Exception as exc:
            faults.report("internal", exc)
    return result


def _process_exited(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    run = _protocol_run(instance)
    if run is not None:
        try:
            run.returncode = run.transport.get_returncode()
            run.maybe_finish()
        except Exception as exc:
            faults.report("internal", exc)
    return wrapped(*args, **kwargs)
