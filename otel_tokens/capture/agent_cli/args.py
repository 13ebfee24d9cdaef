"""The model an agent-CLI command line asks for (``gen_ai.request.model`` of its run).

Each CLI's own flags, then its own configuration where the flag is absent: Claude Code
``--model``; Codex ``-m/--model``, ``-c model=...`` (``--config``), ``--profile NAME`` and
``$CODEX_HOME/config.toml`` (``~/.codex/config.toml``: ``model``, or the profile's);
Gemini CLI ``-m/--model`` (its alias ``auto`` is not a model); Copilot CLI ``--model`` or
``COPILOT_MODEL``. None when nothing says: unknown, never a guess.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

__all__ = ["request_model"]

_FLAGS: dict[str, tuple[str, ...]] = {
    "claude": ("--model",),
    "codex": ("-m", "--model"),
    "gemini": ("-m", "--model"),
    "copilot": ("--model",),
}
_ALIASES = frozenset(("auto", "default"))


def request_model(
    cli: str, argv: Sequence[str], env: Mapping[str, str] | None = None
) -> str | None:
    """The model ``argv`` (and the CLI's configuration in ``env``) asks for, or None."""
    env = os.environ if env is None else env
    model = _flag(argv, _FLAGS.get(cli, ()))
    if model is None and cli == "codex":
        model = _codex_config(argv, env)
    if model is None and cli == "copilot":
        model = env.get("COPILOT_MODEL") or None
    return None if model is None or model.lower() in _ALIASES else model


def _flag(argv: Sequence[str], names: tuple[str, ...]) -> str | None:
    """The value of the last of ``names`` (``--model x`` or ``--model=x``)."""
    found = None
    for index, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name in names:
            if eq:
                found = value
            elif index + 1 < len(argv):
                found = argv[index + 1]
    return found or None


def _codex_config(argv: Sequence[str], env: Mapping[str, str]) -> str | None:
    """``-c model=...`` overrides, then the profile's or the top-level ``model`` of config.toml."""
    for index, arg in enumerate(argv):
        value = None
        if arg in ("-c", "--config") and index + 1 < len(argv):
            value = argv[index + 1]
        elif arg.startswith("--config="):
            value = arg.partition("=")[2]
        if value is not None:
            key, _, raw = value.partition("=")
            if key.strip() == "model":
                return raw.strip().strip("'\"") or None
    config = _toml(
        os.path.join(env.get("CODEX_HOME") or os.path.expanduser("~/.codex"), "config.toml")
    )
    profile = _flag(argv, ("--profile", "-p")) or config.get("profile")
    profiles = config.get("profiles")
    if (
        isinstance(profile, str)
        and isinstance(profiles, dict)
        and isinstance(profiles.get(profile), dict)
    ):
        model = profiles[profile].get("model")
        if isinstance(model, str) and model:
            return model
    model = config.get("model")
    return model if isinstance(model, str) and model else None


def _toml(path: str) -> dict[str, Any]:
    """A TOML file's table; empty when it is missing or unreadable."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
