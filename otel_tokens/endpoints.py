"""Which provider a client's base URL is: ``gen_ai.provider.name`` named by the endpoint.

An ``openai`` or ``anthropic`` client pointed at another provider (DeepSeek, Groq, OpenRouter,
z.ai, a LiteLLM proxy, Ollama on localhost) is that provider, not the SDK's. In order:

1. ``OTEL_TOKENS_PROVIDER_URLS`` (base-URL prefix -> provider name), for private gateways;
2. the client's platform (Azure OpenAI, Anthropic on Bedrock or Vertex);
3. genai-prices' own provider URL patterns (``api_pattern``), named as the semantic
   conventions name the provider where they do (``deepseek``, ``x_ai``, ``gcp.gemini``, ...),
   else by genai-prices' provider id (``openrouter``, ``together``, ``cerebras``, ...); then
   the few hosts it has no pattern for (``*.ml.cloud.ibm.com``: ``ibm.watsonx.ai``);
4. a local or private-network server (loopback, private addresses, ``localhost``,
   ``*.local``, ``*.internal``, single-label hosts): self-hosted, named by its host and
   never priced as another provider (:func:`is_self_hosted`);
5. any other host: named by its host (priced by model name, marked so).
"""

from __future__ import annotations

import ipaddress
import re
import threading
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import urlsplit

__all__ = ["Endpoint", "SEMCONV_NAMES", "endpoint", "is_self_hosted", "server_of"]

#: genai-prices provider ids -> the semantic conventions' ``gen_ai.provider.name``
SEMCONV_NAMES: dict[str, str] = {
    "openai": "openai",
    "anthropic": "anthropic",
    "azure": "azure.ai.openai",
    "aws": "aws.bedrock",
    "mistral": "mistral_ai",
    "groq": "groq",
    "deepseek": "deepseek",
    "x-ai": "x_ai",
    "perplexity": "perplexity",
    "cohere": "cohere",
}

#: providers genai-prices has no URL pattern for: host (or its parent domain) -> the semantic
#: conventions' name
_HOSTS = {"ml.cloud.ibm.com": "ibm.watsonx.ai"}

#: provider names that are self-hosted servers by definition (litellm's routing names them so)
_SELF_HOSTED_PROVIDERS = frozenset(
    (
        "ollama",
        "ollama_chat",
        "vllm",
        "hosted_vllm",
        "lm_studio",
        "llamafile",
        "xinference",
        "triton",
    )
)
_LOCAL_SUFFIXES = (".localhost", ".local", ".internal", ".lan", ".home.arpa", ".localdomain")
_CACHE_MAX = 256
_cache: dict[tuple[Any, ...], Endpoint] = {}
_by_object: dict[int, tuple[Any, tuple[Any, ...], Endpoint]] = {}
_self_hosted_names: dict[str, None] = {}  # provider names given to self-hosted endpoints
_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A client's endpoint: its provider name, whether it is self-hosted, the genai-prices
    provider matched by URL (None: none matched)."""

    provider: str
    self_hosted: bool = False
    price_id: str | None = None


def _host_is_local(host: str) -> bool:
    host = host.strip("[]").lower()
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host == "localhost" or "." not in host or host.endswith(_LOCAL_SUFFIXES)
    return ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_unspecified


def is_self_hosted(name: str | None) -> bool:
    """Whether a provider name is a self-hosted endpoint's (its local host, or a name this
    module gave one): such a call is never priced at another provider's price."""
    if not name:
        return False
    if name in _self_hosted_names or name in _SELF_HOSTED_PROVIDERS:
        return True
    if "." not in name and ":" not in name:  # a provider's name, not a host (see above)
        return name == "localhost"
    return _host_is_local(name)


class _Parsed(NamedTuple):
    """A URL as its host is matched: ``origin`` (scheme and host, no user, password or port),
    ``full`` (the origin with its port and path), ``host``."""

    origin: str
    full: str
    host: str


def _parsed(url: str) -> _Parsed | None:
    """``url`` parsed (None when it names no host): who a URL reaches is its host, never a
    user name before an ``@`` (``https://api.openai.com@127.0.0.1``)."""
    try:
        split = urlsplit(url)
        host, port = split.hostname, split.port
    except ValueError:
        return None
    if not split.scheme or not host:
        return None
    origin = f"{split.scheme}://{host}"
    return _Parsed(origin, f"{origin}{f':{port}' if port else ''}{split.path}", host)


def _override(url: _Parsed, overrides: Any) -> str | None:
    """The provider the longest matching ``OTEL_TOKENS_PROVIDER_URLS`` prefix names; a prefix
    matches up to a boundary (``https://gw.corp`` is not ``https://gw.corp.evil.example``)."""
    best, found = -1, None
    for prefix, provider in overrides:
        rest = url.full[len(prefix) :]
        if (
            url.full.startswith(prefix)
            and len(prefix) > best
            and (not rest or prefix.endswith("/") or rest[0] in "/:?#")
        ):
            best, found = len(prefix), provider
    return found


def _by_pattern(url: _Parsed) -> str | None:
    """The genai-prices provider id whose ``api_pattern`` matches the URL's parsed host (and
    path, for the patterns that name one)."""
    from genai_prices import data_snapshot

    for provider in data_snapshot.get_snapshot().providers:
        if provider.api_pattern and _host_matches(provider.api_pattern, url):
            return provider.id
    return None


def _host_matches(pattern: str, url: _Parsed) -> bool:
    """Whether ``pattern`` names ``url``'s whole host: a look-alike that only begins with a
    provider's host (``api.deepseek.com.evil.example``) does not match. A pattern may end
    inside the host only before its last label (``api.moonshot.`` + ``ai``)."""
    found = re.match(pattern, url.origin)
    if found is not None:
        rest = url.origin[found.end() :]
        return not rest or (url.origin[found.end() - 1] == "." and "." not in rest)
    # a pattern that needs a path (a gateway's route): its host part is matched by the full
    # URL, so the host's own domain must be one the pattern names
    found = re.match(pattern, url.full)
    domain = ".".join(url.host.split(".")[-2:])
    return found is not None and found.end() > len(url.origin) and re.escape(domain) in pattern


def _azure_ai_inference(url: _Parsed, found: str | None) -> bool:
    """Azure AI model inference (Foundry's ``/models`` route, serverless
    ``*.inference.ai.azure.com``), which Azure OpenAI's ``/openai`` routes on the same hosts
    are not."""
    if url.host.endswith(".inference.ai.azure.com"):
        return True
    path = url.full[len(url.origin) :].lstrip(":0123456789")
    return found == "azure" and (path == "/models" or path.startswith("/models/"))


def _resolve(
    url: str, host: str | None, default: str, platform: str | None, overrides: Any
) -> Endpoint:
    parsed = _parsed(url)
    named = _override(parsed, overrides) if overrides and parsed is not None else None
    if named is not None:
        return Endpoint(named, price_id=None)
    found = _by_pattern(parsed) if parsed is not None and url.startswith("http") else None
    if platform is not None:
        return Endpoint(platform, price_id=found)
    if found == "google":
        vertex = host is not None and "aiplatform" in host
        return Endpoint("gcp.vertex_ai" if vertex else "gcp.gemini", price_id=found)
    if parsed is not None and _azure_ai_inference(parsed, found):
        return Endpoint("azure.ai.inference", price_id="azure")
    if found is not None:
        return Endpoint(SEMCONV_NAMES.get(found, found), price_id=found)
    if not host:
        return Endpoint(default)
    host = host.lower()
    named = _by_host(host)
    if named is not None:
        return Endpoint(named)
    if _host_is_local(host):
        with _lock:
            if len(_self_hosted_names) >= _CACHE_MAX:
                _self_hosted_names.pop(next(iter(_self_hosted_names)))
            _self_hosted_names[host] = None
        return Endpoint(host, self_hosted=True)
    return Endpoint(host)


def _by_host(host: str) -> str | None:
    """The provider :data:`_HOSTS` names for ``host`` (``us-south.ml.cloud.ibm.com``)."""
    for domain, provider in _HOSTS.items():
        if host == domain or host.endswith("." + domain):
            return provider
    return None


def endpoint(
    base_url: Any,
    host: str | None,
    default: str,
    platform: str | None = None,
    overrides: tuple[tuple[str, str], ...] = (),
) -> Endpoint:
    """The :class:`Endpoint` of a client's ``base_url`` (``host``: its host, already parsed;
    ``default``: the SDK's provider when the URL says nothing; ``platform``: the client
    class's own platform, e.g. ``aws.bedrock``; ``overrides``: the settings'
    ``provider_urls``). Cached per URL and overrides."""
    seen = _by_object.get(id(base_url))  # clients keep their URL object: no str() per call
    if seen is not None and seen[0] is base_url and seen[1] == (default, platform, overrides):
        return seen[2]
    url = str(base_url) if base_url is not None else ""
    key = (url, default, platform, overrides)
    found = _cache.get(key)
    if found is None:
        found = _resolve(url.lower(), host, default, platform, overrides)
    with _lock:
        if len(_cache) >= _CACHE_MAX or len(_by_object) >= _CACHE_MAX:
            _cache.clear()  # clients come and go: keep it small
            _by_object.clear()
        _cache[key] = found
        _by_object[id(base_url)] = (base_url, key[1:], found)  # holding it keeps its id unique
    return found


def clear_cache() -> None:
    """Forget resolved endpoints (tests)."""
    _cache.clear()
    _by_object.clear()
    _servers.clear()


#: the port a URL of each scheme reaches when it names none
_DEFAULT_PORTS = {"https": 443, "wss": 443, "http": 80, "ws": 80}
_servers: dict[Any, tuple[Any, str | None, int | None]] = {}


def server_of(url: Any) -> tuple[str | None, int | None]:
    """(``server.address``, ``server.port``) of a URL: a string, or a URL object with
    ``scheme``, ``host`` and ``port`` (httpx's); the scheme's port when it names none, None
    for what is not there. The one cache of them: kept per URL string, or per URL object
    (clients keep theirs: a call parses nothing), at most ``_CACHE_MAX`` URLs."""
    if url is None:
        return None, None
    string = type(url) is str
    hit = _servers.get(url if string else id(url))
    if hit is not None and (string or hit[0] is url):
        return hit[1], hit[2]
    host, port = _parse_server(url)
    if len(_servers) >= _CACHE_MAX:  # clients come and go: keep it small
        _servers.clear()
    _servers[url if string else id(url)] = (url, host, port)  # holding it keeps its id unique
    return host, port


def _parse_server(url: Any) -> tuple[str | None, int | None]:
    """(host, port) of a URL, parsed; a port that is not one (``:99999``) reads as none."""
    if isinstance(url, str):
        try:
            split = urlsplit(url)
            scheme, host = split.scheme, split.hostname
        except ValueError:  # not a URL (an unclosed ``[``)
            return None, None
        try:
            port = split.port
        except ValueError:
            port = None
    else:
        scheme, host = getattr(url, "scheme", None), getattr(url, "host", None)
        port = getattr(url, "port", None)
    default = _DEFAULT_PORTS.get(scheme) if isinstance(scheme, str) else None
    return host or None, port or default
