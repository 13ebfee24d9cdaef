"""Which model clients otel_tokens records, and how: the one table of coverage.

One :class:`Client` row per library or API: the distribution whose presence shows it is
installed, its call styles, what is recorded (a capture's words, or ``not recorded`` and why)
and the backends of :data:`otel_tokens.capture.BACKENDS` that must be on for it.
``otel-tokens check`` lists the rows of every installed distribution from it, and a test holds
docs/coverage.md's table to it, row for row. Nothing here imports a client library.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["CLIENTS", "NOT_RECORDED", "Client", "installed_versions", "normalise"]

#: how every row that records nothing starts its ``recorded`` text
NOT_RECORDED = "not recorded"


@dataclass(frozen=True)
class Client:
    """One library or API: ``name`` as docs/coverage.md's table shows it, ``distribution`` the pip name
    that shows it installed, ``styles`` its call styles, ``recorded`` what is recorded (or
    ``not recorded: why``), ``backends`` the backends that record it (all must be on)."""

    name: str
    distribution: str
    styles: str
    recorded: str
    backends: tuple[str, ...] = ()

    @property
    def is_recorded(self) -> bool:
        """False for a row that records nothing (whatever is on)."""
        return not self.recorded.startswith(NOT_RECORDED)


_SDK = "yes: its SDK capture"
_ANY = (
    "yes: the HTTP layer, any POST in the OpenAI (images and audio too), Anthropic, Gemini, "
    "Cohere, Ollama, watsonx.ai or TGI format"
)
_GRPC = "yes: the gRPC layer (and the HTTP layer for REST)"
_NAMES = "agent names (its calls: its model client's row)"


def _http(wire: str) -> str:
    return f"yes: the HTTP layer ({wire} format)"


def _through(capture: str) -> str:
    return f"yes: through {capture}"


def _framework(name: str, backend: str, styles: str = "its agents' model calls") -> Client:
    return Client(name, name, styles, _NAMES, (backend,))


#: every model client otel_tokens knows of, recorded or not: one row each (docs/coverage.md's
#: table is the same rows; edit both)
CLIENTS: tuple[Client, ...] = (
    # provider SDKs with a capture of their own
    Client(
        "openai",
        "openai",
        "chat completions, Responses, completions, embeddings, "
        "transcriptions, Assistants runs; sync, async, streams, raw responses",
        _SDK,
        ("openai",),
    ),
    Client(
        "openai images",
        "openai",
        "`images.generate`, `images.edit`, `create_variation`; streamed partial images",
        _SDK + " (DALL-E reports no usage: unknown)",
        ("openai",),
    ),
    Client(
        "openai audio.speech",
        "openai",
        "`audio.speech.create`; sync, async, raw",
        _SDK + ' (tokens with `stream_format="sse"`; plain audio: tts-1 and tts-1-hd '
        "billed per input character, a token-priced model's unknown)",
        ("openai",),
    ),
    Client(
        "openai Realtime",
        "openai",
        "`realtime.connect` (websocket), sync and async; the "
        "Agents SDK's `RealtimeSession` and its voice pipeline's streamed speech-to-text "
        "session",
        _SDK + " (each `response.done` a call, each input transcription a `transcription` call)",
        ("openai",),
    ),
    Client(
        "openai Batch results",
        "openai",
        "`files.content` of a batch's output file; sync, async, raw, streamed",
        _SDK + " (each row once, at batch prices)",
        ("openai",),
    ),
    Client(
        "anthropic",
        "anthropic",
        "`messages.create`, `parse`, `stream`, beta; sync, async",
        _SDK,
        ("anthropic",),
    ),
    Client(
        "anthropic Message Batches results",
        "anthropic",
        "`messages.batches.results`, beta; sync, async",
        _SDK + " (each row once, at batch prices)",
        ("anthropic",),
    ),
    Client(
        "google-genai",
        "google-genai",
        "`generate_content`, `generate_content_stream`; "
        "sync, `client.aio`; Gemini API and Vertex AI",
        _SDK,
        ("google_genai",),
    ),
    Client(
        "google-genai embeddings",
        "google-genai",
        "`embed_content`; sync, `client.aio`",
        _SDK + " (Gemini API reports no usage: unknown)",
        ("google_genai",),
    ),
    Client(
        "google-genai live",
        "google-genai",
        "`aio.live.connect` (websocket)",
        _SDK + " (each turn's `usage_metadata` a call)",
        ("google_genai",),
    ),
    Client(
        "boto3 (bedrock-runtime)",
        "botocore",
        "`converse`, `converse_stream`, `invoke_model`, `invoke_model_with_response_stream`",
        _SDK,
        ("bedrock",),
    ),
    Client(
        "litellm",
        "litellm",
        "`completion`, `text_completion`, `embedding`, `responses` "
        "and their `a*` twins, stream or not",
        _SDK,
        ("litellm",),
    ),
    # provider SDKs recorded by the HTTP layer, by their wire format
    Client("groq", "groq", "chat completions; sync, async, streams", _http("OpenAI"), ("http",)),
    Client(
        "mistralai",
        "mistralai",
        "`chat.complete`, `chat.stream`, embeddings; sync, async",
        _http("OpenAI"),
        ("http",),
    ),
    Client("together", "together", "chat completions, streams", _http("OpenAI"), ("http",)),
    Client(
        "cohere",
        "cohere",
        "v2 `chat`, `chat_stream`, `embed`; sync, async",
        _http("Cohere"),
        ("http",),
    ),
    Client(
        "ollama",
        "ollama",
        "`chat`, `generate`, `embed`; sync, async, streams",
        _http("Ollama"),
        ("http",),
    ),
    Client(
        "huggingface_hub",
        "huggingface_hub",
        "`InferenceClient.chat_completion`, streams",
        _http("OpenAI"),
        ("http",),
    ),
    Client(
        "huggingface_hub text_generation",
        "huggingface_hub",
        "`InferenceClient.text_generation`, `AsyncInferenceClient`; `details`, streams",
        _http("TGI") + "; a prompt alone too (the call marks its request: its body is that "
        "of the other tasks)",
        ("http",),
    ),
    Client(
        "huggingface_hub other tasks",
        "huggingface_hub",
        "`InferenceClient.summarization`, `translation`, `feature_extraction`, ...",
        f"{NOT_RECORDED}: their answers carry no usage",
        (),
    ),
    Client(
        "azure-ai-inference",
        "azure-ai-inference",
        "`ChatCompletionsClient.complete` (`stream=True` too), `EmbeddingsClient`; sync, aio",
        _http("OpenAI"),
        ("http",),
    ),
    Client(
        "fireworks-ai",
        "fireworks-ai",
        "`chat.completions.create`; sync, async, streams",
        _http("OpenAI"),
        ("http",),
    ),
    Client(
        "httpx",
        "httpx",
        "a POST written by hand or by an SDK not listed here (httpx2 too)",
        _ANY,
        ("http",),
    ),
    Client(
        "requests",
        "requests",
        "a POST written by hand or by an SDK not listed here",
        _ANY,
        ("http",),
    ),
    Client(
        "aiohttp", "aiohttp", "a POST written by hand or by an SDK not listed here", _ANY, ("http",)
    ),
    Client(
        "google-cloud-aiplatform",
        "google-cloud-aiplatform",
        "`vertexai` `GenerativeModel.generate_content` (`stream=True` too), "
        "`generate_content_async`; gRPC and REST",
        _GRPC,
        ("grpc", "http"),
    ),
    Client(
        "vertexai",
        "vertexai",
        "`GenerativeModel.generate_content`; gRPC and REST",
        _GRPC,
        ("grpc", "http"),
    ),
    Client(
        "ibm-watsonx-ai",
        "ibm-watsonx-ai",
        "`ModelInference` chat, generate, their streams; sync, async",
        _http("watsonx.ai"),
        ("http",),
    ),
    Client(
        "xai-sdk",
        "xai-sdk",
        "`chat.create`, `sample`, `stream`, `defer`; `image.sample`; sync, async",
        "yes: the gRPC layer (a deferred completion once, when done)",
        ("grpc",),
    ),
    # provider SDKs not recorded
    Client(
        "google-generativeai",
        "google-generativeai",
        "`GenerativeModel.generate_content`",
        f"{NOT_RECORDED}: gRPC (a deprecated SDK: use google-genai)",
        (),
    ),
    Client(
        "replicate",
        "replicate",
        "`run`, predictions",
        f"{NOT_RECORDED}: its predictions API is no known wire format",
        (),
    ),
    # recorded through another library's capture
    Client(
        "claude-agent-sdk",
        "claude-agent-sdk",
        "`query`, `ClaudeSDKClient`",
        _through("the Claude Code CLI parser (exact)"),
        ("agent_cli",),
    ),
    Client(
        "langchain-openai",
        "langchain-openai",
        "`ChatOpenAI`, `AzureChatOpenAI`, `OpenAIEmbeddings`",
        _through("the openai SDK capture"),
        ("openai",),
    ),
    Client(
        "langchain-anthropic",
        "langchain-anthropic",
        "`ChatAnthropic`",
        _through("the anthropic SDK capture"),
        ("anthropic",),
    ),
    Client(
        "langchain-aws",
        "langchain-aws",
        "`ChatBedrockConverse`, `ChatBedrock`",
        _through("the Bedrock capture"),
        ("bedrock",),
    ),
    Client(
        "langchain-groq",
        "langchain-groq",
        "`ChatGroq`",
        _through("groq (the HTTP layer)"),
        ("http",),
    ),
    Client(
        "langchain-ollama",
        "langchain-ollama",
        "`ChatOllama`, `OllamaEmbeddings`",
        _through("ollama (the HTTP layer)"),
        ("http",),
    ),
    Client(
        "langchain-mistralai",
        "langchain-mistralai",
        "`ChatMistralAI`",
        _through("httpx (the HTTP layer)"),
        ("http",),
    ),
    Client(
        "langchain-xai",
        "langchain-xai",
        "`ChatXAI`",
        _through("the openai SDK capture"),
        ("openai",),
    ),
    Client(
        "langchain-deepseek",
        "langchain-deepseek",
        "`ChatDeepSeek`",
        _through("the openai SDK capture"),
        ("openai",),
    ),
    Client(
        "llama-index-llms-openai",
        "llama-index-llms-openai",
        "`OpenAI`",
        _through("the openai SDK capture"),
        ("openai",),
    ),
    Client(
        "llama-index-llms-anthropic",
        "llama-index-llms-anthropic",
        "`Anthropic`",
        _through("the anthropic SDK capture"),
        ("anthropic",),
    ),
    Client("dspy", "dspy", "`dspy.LM`", _through("the litellm capture"), ("litellm",)),
    Client(
        "instructor",
        "instructor",
        "a patched client",
        _through("the client it patches (its row)"),
        (),
    ),
    # agent frameworks: the agent's name on each call
    _framework("openai-agents", "openai_agents"),
    _framework("pydantic-ai-slim", "pydantic_ai"),
    _framework("langgraph", "langgraph"),
    _framework("crewai", "crewai"),
    _framework("llama-index-core", "llama_index"),
    _framework("smolagents", "smolagents"),
    _framework("autogen-agentchat", "autogen"),
    _framework("agno", "agno"),
    _framework("strands-agents", "strands"),
    _framework("google-adk", "google_adk"),
    _framework("agent-framework-core", "agent_framework"),
    _framework("semantic-kernel", "semantic_kernel"),
)


def normalise(name: str) -> str:
    """A distribution's name as PEP 503 compares it (``Foo_Bar`` is ``foo-bar``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_versions() -> dict[str, str]:
    """distribution -> installed version, for each distribution :data:`CLIENTS` names that is
    installed (read from its metadata, found as pip and ``import`` find it; nothing imported)."""
    found: dict[str, str] = {}
    for name in dict.fromkeys(client.distribution for client in CLIENTS):
        version = _version_of(name)
        if version is not None:
            found[name] = version
    return found


def _version_of(name: str) -> str | None:
    """The version of distribution ``name``; None when it is not installed."""
    from importlib import metadata

    try:
        version = metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - metadata that cannot be read: installed, version unknown
        return "?"
    return version if isinstance(version, str) else "?"
