"""What ``instrument()`` installs for the ``openai`` SDK: the patch table, nothing per call.

The methods are wrapped as described in :mod:`.openai`, which holds the per-call
machinery and is imported at the first patched call (start-up cost).
"""

from __future__ import annotations

import sys
from typing import Any

from ..patching import Backend, SdkPatches, deferred

__all__ = ["BACKEND", "DEPENDENCIES", "install", "uninstall"]

BACKEND = Backend(
    "OpenAIInstrumentor",
    "The ``openai`` SDK: chat completions, Responses, embeddings, images, audio (sync, async, "
    "streams), batch output files, Realtime sessions.",
    requirements=("openai >= 1.40, < 4",),
    extra="openai",
    apis=("openai_chat", "openai_responses", "openai_embeddings", "openai_completions"),
)
DEPENDENCIES: tuple[str, ...] = BACKEND.requirements
_SDK = "otel_tokens.capture.sdk.openai"
_CHAT, _RESPONSES = deferred(_SDK, "chat"), deferred(_SDK, "responses")
_RETRIEVE, _EMBEDDINGS = deferred(_SDK, "retrieve"), deferred(_SDK, "embeddings")
_COMPLETIONS, _AUDIO = deferred(_SDK, "completions"), deferred(_SDK, "transcriptions")
_RUNS, _RUNS_STREAM = deferred(_SDK, "runs"), deferred(_SDK, "runs_stream")
_RUNS_MODULE = "openai.resources.beta.threads.runs.runs"
_MEDIA = "otel_tokens.capture.sdk.openai_media"  # images and speech
_IMAGES, _SPEECH = deferred(_MEDIA, "images"), deferred(_MEDIA, "speech")
#: a batch's output file read: each billed row a call at batch prices (see .batch_results)
_BATCH_OUTPUT = deferred("otel_tokens.capture.sdk.batch_results", "content")
#: every body and stream event, as sent, where the client makes its object of it (see .sent)
_SENT = (
    "openai._base_client",
    "BaseClient",
    "_process_response_data",
    deferred("otel_tokens.capture.sent", "openai"),
)
#: ... and where a response object's ``parse()`` rebuilds that object (``.parse()`` methods);
#: a gateway's cost header (LiteLLM proxy) is read there too, before the body (see .sent)
_PARSE = deferred("otel_tokens.capture.sent", "parse")
#: the Realtime API's websocket sessions: each ``response.done`` a call (see .openai_realtime)
_RT = "otel_tokens.capture.websocket.openai_realtime"
_RT_MODULE, _WS_MODULE = "openai.resources.realtime.realtime", "openai._websocket_connection"
_AGENTS_RT = "agents.realtime.openai_realtime"
#: its voice pipeline's streamed speech-to-text session too: hooked where it queues events
_VOICE, _STT_MODULE = "otel_tokens.capture.websocket.agents_voice", "agents.voice.models.openai_stt"


def _both(module: str, cls: str, methods: tuple[str, ...], factory: object) -> list:
    """The sync class and its ``Async`` twin, for each method."""
    return [(module, name, method, factory) for name in (cls, f"Async{cls}") for method in methods]


_PATCHES = SdkPatches(
    "openai",
    [
        *_both("openai.resources.chat.completions", "Completions", ("create", "parse"), _CHAT),
        *_both(
            "openai.resources.responses", "Responses", ("create", "parse", "compact"), _RESPONSES
        ),
        *_both("openai.resources.responses", "Responses", ("retrieve",), _RETRIEVE),
        *_both("openai.resources.embeddings", "Embeddings", ("create",), _EMBEDDINGS),
        *_both("openai.resources.completions", "Completions", ("create",), _COMPLETIONS),
        *_both("openai.resources.audio.transcriptions", "Transcriptions", ("create",), _AUDIO),
        *_both("openai.resources.audio.translations", "Translations", ("create",), _AUDIO),
        *_both(
            "openai.resources.images", "Images", ("generate", "edit", "create_variation"), _IMAGES
        ),
        *_both("openai.resources.audio.speech", "Speech", ("create",), _SPEECH),
        *_both(_RUNS_MODULE, "Runs", ("create", "retrieve", "submit_tool_outputs"), _RUNS),
        *_both(
            _RUNS_MODULE,
            "Runs",
            ("stream", "create_and_stream", "submit_tool_outputs_stream"),
            _RUNS_STREAM,
        ),
        *_both("openai.resources.files", "Files", ("content", "retrieve_content"), _BATCH_OUTPUT),
        _SENT,
        ("openai._response", "APIResponse", "parse", _PARSE),
        ("openai._response", "AsyncAPIResponse", "parse", _PARSE),
        ("openai._legacy_response", "LegacyAPIResponse", "parse", _PARSE),
        *_both(_RT_MODULE, "RealtimeConnectionManager", ("enter",), deferred(_RT, "enter")),
        (_RT_MODULE, "RealtimeConnectionManager", "__enter__", deferred(_RT, "enter")),
        (_RT_MODULE, "AsyncRealtimeConnectionManager", "__aenter__", deferred(_RT, "enter")),
        *_both(_RT_MODULE, "RealtimeConnection", ("parse_event",), deferred(_RT, "parse")),
        *_both(_RT_MODULE, "RealtimeConnection", ("recv_bytes",), deferred(_RT, "receive")),
        *_both(_WS_MODULE, "WebSocketConnectionBase", ("close",), deferred(_RT, "close")),
    ],
)


def _unhook_voice() -> None:
    """``uninstall()``: the speech-to-text sessions still read stop being read (see
    .agents_voice; nothing to do unless one was)."""
    module = sys.modules.get(_VOICE)
    if module is not None:
        module.unhook_all()


#: the OpenAI Agents SDK's realtime model opens its own websocket: hooked where it reads events
_AGENTS = SdkPatches(
    "agents",
    [
        (_AGENTS_RT, "OpenAIRealtimeWebSocketModel", "connect", deferred(_RT, "agents_connect")),
        (
            _AGENTS_RT,
            "OpenAIRealtimeWebSocketModel",
            "_handle_ws_event",
            deferred(_RT, "agents_event"),
        ),
        (
            _AGENTS_RT,
            "OpenAIRealtimeWebSocketModel",
            "_listen_for_messages",
            deferred(_RT, "agents_listen"),
        ),
        (
            _STT_MODULE,
            "OpenAISTTTranscriptionSession",
            "_setup_connection",
            deferred(_VOICE, "setup"),
        ),
    ],
    on_uninstall=_unhook_voice,
)


def install(**_: Any) -> bool:
    """Patch the SDK now if it is imported, else as soon as the application imports it."""
    installed = _PATCHES.install()
    if installed:
        _AGENTS.install()
    return installed


def uninstall() -> None:
    """Restore the original SDK methods (identity checks hold)."""
    _PATCHES.uninstall()
    _AGENTS.uninstall()
