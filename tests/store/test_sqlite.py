"""What only the SQLite backend has to get right: its transactions and its files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from liminal.store.base import StoreError
from liminal.store.records import Batch, SessionRecord, ThreadUpdate
from liminal.store.sqlite import SqliteStore
from tests.store.test_store_contract import frame, message

pytestmark = pytest.mark.anyio


async def test_a_thread_delete_that_fails_part_way_deletes_nothing(tmp_path: Path) -> None:
    """Deleting is all or nothing: one that fails part way (the database busy past the timeout,
    the disk full, the process killed) must not leave a thread listed whose conversation is gone
    but whose frames and session lines remain (and come back at the next derivation)."""
    store = await SqliteStore.open(tmp_path / "liminal.db")
    record = SessionRecord(SessionRecord.make_id("b1", 0), "b1", "t1", 0, "u1", "user", None,
                           None, (), "a session line", b"{}")
    await store.write(Batch([frame(0, b"a")], [message("m1", "the conversation")],
                            [ThreadUpdate("t1", 100.0, title="t", backing_ids=("t1", "b1"))],
                            [record]))
    # A stand-in for a failure after the first statements: the session lines refuse to go.
    with sqlite3.connect(tmp_path / "liminal.db") as other:
        other.execute("CREATE TRIGGER refuse BEFORE DELETE ON session_records "
                      "BEGIN SELECT RAISE(ABORT, 'disk I/O error (test)'); END")
    with pytest.raises(StoreError):
        await store.delete_thread("t1")
    assert [m.id for m in await store.messages("t1")] == ["m1"]
    assert len(await store.frames(thread_id="t1")) == 1
    assert await store.thread("t1") is not None
    await store.aclose()
