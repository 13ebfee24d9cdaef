"""Imported by Python at start-up in programs run by ``otel-tokens run``.

Chains to the ``sitecustomize`` this one hides (if any), then turns otel_tokens on:
``configure()`` (the standard OTEL_* / OTEL_TOKENS_* variables decide where telemetry goes)
and ``instrument()`` (every instrumentor). A failure is one line on stderr, never an
exception in the program.
"""

import os
import sys


def _chain() -> None:
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


def _start() -> None:
    try:
        import otel_tokens
    except ImportError:
        sys.stderr.write(
            f"otel-tokens run: otel_tokens is not importable by {sys.executable}; "
            "the program runs without instrumentation (install otel-tokens in its environment)\n"
        )
        return
    try:
        otel_tokens.configure()
        otel_tokens.instrument()
    except Exception as exc:  # noqa: BLE001 - the program must run whatever happens here
        message = " ".join(str(exc).split())
        sys.stderr.write(f"otel-tokens run: instrumentation is off: {message}\n")


try:
    _chain()
finally:
    if os.environ.get("OTEL_TOKENS_RUN") == "1":
        _start()
