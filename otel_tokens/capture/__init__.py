"""Capture: one module per backend, each building call records and handing them over.

An instrumentor only captures: it opens a :class:`~otel_tokens.call.Call` with the request's
facts, fills in the response's facts (usage, model, ids, finish reasons, error) and ends it,
all through the one start/finish path (:mod:`.lifecycle`). Provider SDK imports live here
and nowhere else. Each backend is a light ``<name>_patches`` module (its ``BACKEND``
description, and what ``instrument()`` installs: the patch table, nothing per call) and the
per-call module it loads at the first call (``openai_sdk``, ``anthropic_sdk``,
``google_genai_sdk``, ``bedrock_sdk``, ``litellm_sdk``, ``agent_cli``, ``backend``; the HTTP
layer's ``http_layer``, ``http_requests``, ``http_aiohttp``; the gRPC layer's ``grpc_layer``).
Model APIs' wire formats, one module each (their gRPC messages too), are in :mod:`.wire`;
agent-CLI output parsers in :mod:`.parsers`.

The backends are the ``*_patches`` modules found here: adding one registers it (the registry,
the entry point's class and the extra all read its ``BACKEND``); nothing else lists them.
"""

from __future__ import annotations

import os

_SUFFIX = "_patches.py"


def _found() -> dict[str, str]:
    """backend name -> its ``*_patches`` module, for every such module of this package (read
    from the folder: nothing is imported)."""
    names = sorted(entry[: -len(_SUFFIX)] for entry in os.listdir(os.path.dirname(__file__))
                   if entry.endswith(_SUFFIX))  # fmt: skip
    return {name: f"{__name__}.{name}_patches" for name in names}


#: backend name -> module exposing BACKEND, install(**options), uninstall() and DEPENDENCIES
BACKENDS: dict[str, str] = _found()
