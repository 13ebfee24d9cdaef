"""Secrets and prompt content in telemetry: what the suite-wide scan looks for.

Every span attribute, span-event attribute and metric label emitted through the in-memory SDK
of any test is checked after the test runs (see tests/conftest.py): no API-key shapes, bearer
tokens or authorization headers ever; no prompt text from the fixtures unless content
capture is opted in.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Iterable

from .. import cassettes

SECRET_PATTERNS = [
    re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}"),  # OpenAI / Anthropic keys
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),  # GitHub tokens
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"(?i)\b(?:authorization|x-api-key)\b"),
    re.compile(r"test_openai_api_key|test_anthropic_api_key"),  # the keys in the recordings
    re.compile(r"https?://[^/\s:@]+:[^/\s@]+@"),  # credentials inside a URL
]


@functools.lru_cache(maxsize=1)
def fixture_prompts() -> frozenset[str]:
    """User and system prompt texts of the recorded requests (long enough to be distinctive)."""
    prompts: set[str] = set()
    if not cassettes.CASSETTES.is_dir():
        return frozenset()
    for it in cassettes.interactions():
        body = it.request_body
        if not isinstance(body, dict):
            continue
        for message in body.get("messages") or []:
            content = message.get("content") if isinstance(message, dict) else None
            texts = [content] if isinstance(content, str) else [
                part.get("text") for part in content or [] if isinstance(part, dict)]
            prompts.update(t for t in texts if isinstance(t, str) and len(t) >= 16)
        if isinstance(body.get("input"), str) and len(body["input"]) >= 16:
            prompts.add(body["input"])
        if isinstance(body.get("system"), str) and len(body["system"]) >= 16:
            prompts.add(body["system"])
    return frozenset(prompts)


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def emitted(telemetry: Any) -> Iterable[tuple[str, str, str]]:
    """(where, key, text) for everything a test's in-memory SDK received."""
    for span in telemetry.finished():
        for key, value in (span.attributes or {}).items():
            for text in _strings(value):
                yield f"span {span.name!r}", key, text
        for event in span.events:
            for key, value in (event.attributes or {}).items():
                for text in _strings(value):
                    yield f"event {event.name!r}", key, text
    for point in telemetry.points():
        for key, value in point.attributes.items():
            for text in _strings(value):
                yield f"metric {point.name}", key, text


def problems(telemetries: Iterable[Any], capture_content: bool) -> list[str]:
    """Every secret (always) and fixture prompt (unless capture is on) found."""
    found = []
    prompts = () if capture_content else fixture_prompts()
    for telemetry in telemetries:
        for where, key, text in emitted(telemetry):
            for pattern in SECRET_PATTERNS:
                if pattern.search(text):
                    found.append(f"{where} {key}: secret-like {pattern.pattern!r}: {text[:80]!r}")
            for prompt in prompts:
                if prompt in text:
                    found.append(f"{where} {key}: prompt text {prompt[:40]!r}")
    return found


def describe(found: list[str]) -> str:
    return json.dumps(found[:10], indent=1)
