"""Fixtures of the fleet ledger tests: a real PostgreSQL (a throwaway cluster, or the one
``OTEL_TOKENS_TEST_POSTGRES_URL`` names) and a fresh database per test; they skip, saying why,
where PostgreSQL or psycopg is not installed (the rest of the suite runs without them). And the
fake LLM server the fleet's processes call, keeping what it answered per tenant."""

from __future__ import annotations

import collections
import itertools
import os
import uuid
from contextlib import closing

import pytest

from ..process.conftest import FakeLLM
from .cluster import Cluster, binaries

_names = itertools.count()


def _psycopg():
    try:
        import psycopg
    except ImportError:
        pytest.skip("psycopg is not installed (pip install 'otel-tokens[postgres]')")
    return psycopg


@pytest.fixture(scope="session")
def pg_cluster():
    """A cluster of our own (stoppable): initdb + pg_ctl from Debian's postgresql package."""
    _psycopg()
    bin_dir = binaries()
    if bin_dir is None:
        pytest.skip("PostgreSQL binaries not found (Debian: apt-get install postgresql)")
    cluster = Cluster(bin_dir)
    yield cluster
    cluster.remove()


@pytest.fixture(scope="session")
def pg_server(request):
    """The URL of a server's maintenance database: OTEL_TOKENS_TEST_POSTGRES_URL, or ours."""
    given = os.environ.get("OTEL_TOKENS_TEST_POSTGRES_URL")
    if given:
        _psycopg()
        return given
    return request.getfixturevalue("pg_cluster").url


def new_database(server_url: str) -> str:
    """A fresh, empty database on the server of ``server_url``; its URL."""
    psycopg = _psycopg()
    name = f"otel_tokens_test_{next(_names)}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return server_url.rsplit("/", 1)[0] + "/" + name


@pytest.fixture
def ledger_db(pg_server) -> str:
    """A fresh database on the test server."""
    return new_database(pg_server)


@pytest.fixture
def own_ledger_db(pg_cluster) -> tuple[Cluster, str]:
    """A fresh database on our own cluster (a test that stops and starts the server)."""
    return pg_cluster, new_database(pg_cluster.url)


class TenantLLM(FakeLLM):
    """The process tests' fake LLM, answering at once, with what it answered also summed per
    tenant (the request's ``user``): the truth the ledger must hold."""

    delay = 0.0

    def __init__(self) -> None:
        self.by_tenant: collections.Counter[str] = collections.Counter()
        self.calls_by_tenant: collections.Counter[str] = collections.Counter()
        super().__init__()

    def _count(self, body: dict, tokens: int) -> None:
        self.by_tenant[body["user"]] += tokens
        self.calls_by_tenant[body["user"]] += 1


@pytest.fixture
def tenant_llm():
    with closing(TenantLLM()) as server:
        yield server
