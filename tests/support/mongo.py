"""A MongoDB database of its own for each test, on the server ``LIMINAL_TEST_MONGO_URL`` names.

CI starts one (``.ci/run``: ``scripts/mongo-wire``, FerretDB on SQLite); locally, see
docs/testing.md. Without the variable, every test that needs it is skipped. Each test gets a
database named ``liminal_test_<random>`` and drops it when done.

``LIMINAL_TEST_MONGO_SOCKET_URL`` names the same server by its Unix socket: a liminal running in
the acceptance tests' loopback-only network namespace reaches a path, not the host's ports.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest

MONGO_URL = os.environ.get("LIMINAL_TEST_MONGO_URL", "")
MONGO_SOCKET_URL = os.environ.get("LIMINAL_TEST_MONGO_SOCKET_URL", "")

needs_mongo = pytest.mark.skipif(not MONGO_URL, reason="LIMINAL_TEST_MONGO_URL is not set")
needs_mongo_socket = pytest.mark.skipif(
    not (MONGO_URL and MONGO_SOCKET_URL),
    reason="LIMINAL_TEST_MONGO_URL and LIMINAL_TEST_MONGO_SOCKET_URL are not both set")

# For tests that run once per kind of store: ``@pytest.mark.parametrize("store_kind", KINDS)``.
KINDS = ["sqlite", pytest.param("mongodb", marks=needs_mongo)]


def mongo_test_url(base: str, database: str) -> str:
    """``base`` with its database replaced (query string kept)."""
    head, _, query = base.partition("?")
    scheme, _, rest = head.partition("://")
    hosts = rest.split("/", 1)[0]
    return f"{scheme}://{hosts}/{database}" + (f"?{query}" if query else "")


def database_name() -> str:
    return f"liminal_test_{uuid.uuid4().hex[:12]}"


@asynccontextmanager
async def fresh_database(base: str = "") -> AsyncIterator[str]:
    """The URL of a new database on the test server (``base``: another URL of it), dropped after."""
    from pymongo import AsyncMongoClient

    name = database_name()
    try:
        yield mongo_test_url(base or MONGO_URL, name)
    finally:
        client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(MONGO_URL)
        try:
            await client.drop_database(name)
        finally:
            await client.close()


@contextmanager
def fresh_database_sync(base: str = "") -> Iterator[str]:
    """``fresh_database`` for a test outside an event loop."""
    from pymongo import MongoClient

    name = database_name()
    try:
        yield mongo_test_url(base or MONGO_URL, name)
    finally:
        client: MongoClient[dict[str, Any]] = MongoClient(MONGO_URL)
        try:
            client.drop_database(name)
        finally:
            client.close()


async def atomic_updates(store: object) -> bool:
    """Whether the store's server applies a conditional update to one document atomically.

    MongoDB does (what a merge that writes only over the version it read relies on). FerretDB
    1.x does not: it reads the matching documents, then writes them, with nothing between to
    stop another writer; no update of it can keep two concurrent writers' changes."""
    client = getattr(store, "_client", None)
    if client is None:
        return True
    info = await client.admin.command("buildInfo")
    return "ferretdbVersion" not in info


@contextmanager
def liminal_on_mongodb(liminal_home: Path) -> Iterator[str]:
    """A liminal home whose ``config.toml`` records into a new database on the test server,
    named by its Unix socket (liminal in the rig runs in a loopback-only network namespace)."""
    with fresh_database_sync(base=MONGO_SOCKET_URL) as url:
        liminal_home.mkdir(mode=0o700, parents=True, exist_ok=True)
        with (liminal_home / "config.toml").open("a", encoding="utf-8") as config:
            config.write(f'[store]\nurl = "{url}"\n')
        yield url


@asynccontextmanager
async def recorded(liminal_home: Path) -> AsyncIterator[Any]:
    """The store a liminal with this home recorded into, as liminal itself finds it (its
    ``config.toml``, else SQLite in the home)."""
    from liminal import config
    from liminal.store.configured import open_store

    settings = config.load(env={"LIMINAL_HOME": str(liminal_home)})
    async with open_store(settings, create=False) as store:
        yield store
