"""tiktoken's encodings without a network: seed tiktoken's own cache from bpe-openai.

tiktoken downloads ``o200k_base``/``cl100k_base`` on first use; CI and development machines
here have no internet. The ``bpe-openai`` package ships the same official files (tiktoken
verifies each file's SHA-256 against its own expected hash when loading), so the tests write
them where tiktoken looks (``TIKTOKEN_CACHE_DIR``, named by the SHA-1 of the download URL).
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.resources
import os
import pathlib

import pytest

URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
NAMES = ("o200k_base", "cl100k_base")


def seed_cache(directory: pathlib.Path) -> None:
    """Write the encodings into ``directory`` and point tiktoken at it."""
    try:
        data = importlib.resources.files("bpe_openai") / "data"
    except ModuleNotFoundError:
        pytest.skip("bpe-openai (test extra) is not installed: no offline tiktoken encodings")
    directory.mkdir(parents=True, exist_ok=True)
    for name in NAMES:
        target = directory / hashlib.sha1(URL.format(name).encode()).hexdigest()
        if not target.exists():
            target.write_bytes(gzip.decompress((data / f"{name}.tiktoken.gz").read_bytes()))
    os.environ["TIKTOKEN_CACHE_DIR"] = str(directory)


def load_encodings(directory: pathlib.Path) -> None:
    """Seed the cache and load the encodings into otel_tokens' tokenizer registry."""
    from otel_tokens.account.estimate import text as tokenizers

    seed_cache(directory)
    tokenizers._failed.clear()
    tokenizers.warm_up()
    if tokenizers.encoding_for("gpt-4o") is None:
        pytest.fail("tiktoken could not load o200k_base from the seeded cache")
