"""Capture: where calls to a model are seen, and what they said, as call records.

An instrumentor only captures: it opens a :class:`~otel_tokens.call.Call` with the request's
facts, fills in the response's facts (usage, model, ids, finish reasons, error) and ends it,
all through the one start/finish path (:mod:`.lifecycle`, with :mod:`.stream` for streams).
The folders read as the way a call is seen:

- :mod:`.wire`: model APIs' wire formats, one module each (OpenAI, Anthropic, Gemini, Cohere,
  Ollama, watsonx.ai; gRPC messages too), the one parser shared by every client that speaks it;
- where clients are hooked: :mod:`.http` (httpx, requests, aiohttp: any client, by wire format),
  :mod:`.grpc` (grpc's channels: Vertex AI, xAI), :mod:`.sdk` (provider SDKs whose calls are
  read above the HTTP layer), :mod:`.agent_cli` (agent CLIs run as subprocesses, with their
  output parsers), :mod:`.methods` (any ``module:Class.method``);
- :mod:`.frameworks`: agent names and runs from agent frameworks (no call records of their own).

Provider SDK imports live here and nowhere else. Each backend is a light ``<name>_patches``
module (its ``BACKEND`` description and what ``instrument()`` installs: the patch table,
nothing per call) beside the per-call module it loads at the first call. The backends are the
``*_patches`` modules found in these folders: adding one registers it (the registry, the entry
point's class and the extra all read its ``BACKEND``); nothing else lists them.
"""

from __future__ import annotations

import os

_SUFFIX = "_patches.py"


def _found() -> dict[str, str]:
    """backend name -> its ``*_patches`` module, for every such module of this package's folders
    (read from the disk: nothing is imported)."""
    here = os.path.dirname(__file__)
    found = {}
    for folder in sorted(os.listdir(here)):
        if os.path.isfile(os.path.join(here, folder, "__init__.py")):
            for entry in os.listdir(os.path.join(here, folder)):
                if entry.endswith(_SUFFIX):
                    found[entry[: -len(_SUFFIX)]] = f"{__name__}.{folder}.{entry[:-3]}"
    return dict(sorted(found.items()))


#: backend name -> module exposing BACKEND, install(**options), uninstall() and DEPENDENCIES
BACKENDS: dict[str, str] = _found()
