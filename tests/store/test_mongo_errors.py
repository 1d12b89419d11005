"""A MongoDB that does not answer fails each store call with ``StoreError``, the one error every
caller of a store handles (the recaller, the replay, the commands, the thread list): no server
is needed to show it, a client pointed at a loopback port where nothing listens will do."""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from pymongo import AsyncMongoClient

from liminal.store.base import StoreError
from liminal.store.mongo import MongoStore

pytestmark = pytest.mark.anyio


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


CALLS: dict[str, Callable[[MongoStore], Awaitable[Any]]] = {
    "frame_count": lambda s: s.frame_count(),
    "messages": lambda s: s.messages("t"),
    "messages of a kind": lambda s: s.messages("t", kind="mark"),
    "delete_thread": lambda s: s.delete_thread("t"),
    "thread": lambda s: s.thread("t"),
    "threads": lambda s: s.threads(),
    "session_records": lambda s: s.session_records("b"),
    "session_records of a uuid": lambda s: s.session_records("b", uuid="u"),
    "session_file_end": lambda s: s.session_file_end("b"),
    "search": lambda s: s.search("word"),
    "frames": lambda s: s.frames(thread_id="t"),
}


@pytest.mark.parametrize("call", list(CALLS))
async def test_a_mongodb_that_does_not_answer_is_a_store_error(call: str) -> None:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        f"mongodb://127.0.0.1:{closed_port()}/", serverSelectionTimeoutMS=200, connectTimeoutMS=200)
    store = MongoStore(client, "liminal")
    try:
        with pytest.raises(StoreError):
            await CALLS[call](store)
    finally:
        await store.aclose()


@pytest.mark.parametrize("url", ["mongodb://h:abc/db", "mongodb://", "mongodb:///db", "mongodb://h/a b",
                                 "mongodb+srv://h:1/db"])
async def test_a_mongodb_url_the_client_refuses_is_a_store_error(url: str) -> None:
    """Refused by pymongo before any connection (a ValueError, an InvalidURI): it escaped as
    itself, so `liminal threads` crashed with a traceback and liminal acp's index worker died
    at every start (the frames stayed in the spool)."""
    with pytest.raises(StoreError, match="cannot open MongoDB store"):
        await MongoStore.open(url, timeout_ms=100)
