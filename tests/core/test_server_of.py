"""``endpoints.server_of``: the one URL -> (``server.address``, ``server.port``) reader and
cache every capture uses (SDK clients' base URLs, the HTTP layer's requests, websockets)."""

from __future__ import annotations

import pytest

from otel_tokens import endpoints
from otel_tokens.endpoints import server_of


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://api.openai.com/v1", ("api.openai.com", 443)),
        ("http://127.0.0.1:8080/v1/chat/completions", ("127.0.0.1", 8080)),
        ("http://localhost/api", ("localhost", 80)),
        ("wss://api.openai.com/v1/realtime?model=gpt-4o", ("api.openai.com", 443)),
        ("ws://gw.internal:81", ("gw.internal", 81)),
        ("http://[::1]:11434/api/chat", ("::1", 11434)),
        ("https://user:secret@gw.example:8443/v1", ("gw.example", 8443)),
        ("http://host:99999/x", ("host", 80)),  # a port that is not one: the scheme's
        ("grpc://host", ("host", None)),  # a scheme of no known port: none
        ("http://[::1/v1", (None, None)),  # not a URL
        ("", (None, None)),
        (None, (None, None)),
    ],
)
def test_address_and_port_of_a_url(url, expected):
    assert server_of(url) == expected
    assert server_of(url) == expected  # and from the cache


def test_a_url_object_reads_as_its_string():
    httpx = pytest.importorskip("httpx", reason="SDK extras install httpx")
    url = httpx.URL("https://api.anthropic.com:444/v1/")
    assert server_of(url) == server_of(str(url)) == ("api.anthropic.com", 444)
    assert server_of(httpx.URL("http://127.0.0.1/v1")) == ("127.0.0.1", 80)


def test_the_cache_stays_bounded_whatever_the_urls():
    """A gateway's callers name any host: the cache holds at most its bound."""
    httpx = pytest.importorskip("httpx", reason="SDK extras install httpx")
    endpoints.clear_cache()
    for i in range(3 * endpoints._CACHE_MAX):
        assert server_of(f"https://h{i}.example:{1000 + i}/v1") == (f"h{i}.example", 1000 + i)
        assert server_of(httpx.URL(f"http://o{i}.example/")) == (f"o{i}.example", 80)
    assert 0 < len(endpoints._servers) <= endpoints._CACHE_MAX
