"""Whether the installed OpenTelemetry packages meet otel_tokens' declared minimum versions.

pip can leave older packages beside otel_tokens (``--no-deps``, a lock file, a later install
that downgrades one). Below the floors its set-up would fail (e.g. a semantic-conventions
release without the GenAI names), so ``configure()`` and ``instrument()`` check first: when a
requirement is not met, otel_tokens stays off, says so in one line, and the program runs on.
The floors are read from the installed package's own metadata (pyproject's ``dependencies``).
"""

from __future__ import annotations

import logging
import re
import threading

__all__ = ["too_old", "usable"]

_log = logging.getLogger("otel_tokens")
_DISTRIBUTION = "otel-tokens"
_lock = threading.Lock()
_verdict: bool | None = None
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # a requirement's project name (PEP 508)


def too_old() -> list[tuple[str, str | None, str]]:
    """The OpenTelemetry requirements the installed packages do not meet: ``(name, installed
    version or None, specifier)``; empty when all are met or nothing is declared (a source
    tree that was not installed). Only those break the set-up (the others' faults are caught
    and counted per call), and each lookup costs start-up time; requirements with a marker
    (the extras') are not checked, as ``packaging.requirements`` costs tens of milliseconds."""
    from importlib import metadata

    from packaging.specifiers import SpecifierSet

    try:
        declared = metadata.requires(_DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        return []
    unmet = []
    for line in declared:
        name = _NAME.match(line)
        if name is None or ";" in line or not name.group().startswith("opentelemetry-"):
            continue
        spec = SpecifierSet(line[name.end() :].strip().strip("()"))
        try:
            installed: str | None = metadata.version(name.group())
        except metadata.PackageNotFoundError:
            installed = None
        if installed is None or not spec.contains(installed, prereleases=True):
            unmet.append((name.group(), installed, str(spec)))
    return unmet


def usable() -> bool:
    """True when otel_tokens can run here; the first False logs the one line saying why and
    what to install. Checked once per process."""
    global _verdict
    with _lock:
        if _verdict is None:
            _verdict = _check()
        return _verdict


def _check() -> bool:
    try:
        unmet = too_old()
    except Exception as exc:  # a check that cannot run stops neither the program nor otel_tokens
        _log.debug("otel_tokens: cannot check the installed versions: %r", exc)
        return True
    if unmet:
        found = "; ".join(
            f"{name} {installed or 'not installed'} (needs {spec})"
            for name, installed, spec in unmet
        )
        fix = " ".join(f"'{name}{spec}'" for name, _, spec in unmet)
        _log.warning(
            "otel_tokens is off, the program runs without it: %s; to turn it on: pip install %s",
            found,
            fix,
        )
    return not unmet
