"""What only the SQLite backend has to get right: its transactions and its files."""

from __future__ import annotations

import sqlite3
import tempfile
import unicodedata
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from liminal.store.base import StoreError
from liminal.store.records import Batch, SessionRecord, ThreadUpdate
from liminal.store.sqlite import SqliteStore
from tests.store.test_store_contract import frame, message


@pytest.mark.anyio
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


@pytest.mark.anyio
@pytest.mark.parametrize("fts", [True, False], ids=["fts5", "like"])
async def test_a_deleted_threads_words_are_gone_from_the_stores_files(tmp_path: Path, fts: bool) -> None:
    """Deleting reaches the bytes: SQLite leaves a deleted row in its free pages (unless built
    with secure delete, as Debian's is and python.org's and macOS's are not), the full-text
    index keeps a deleted row's terms in its segments until they are merged, and the WAL keeps
    the pages as they were. Anyone who reads the file must find none of the thread's words."""
    store = await SqliteStore.open(tmp_path / "liminal.db", fts=fts)
    # Whatever this build's default: the store's own connections say so.
    assert [c.execute("PRAGMA secure_delete").fetchone()[0] for c in (store._writer, store._reader)] == [1, 1]
    words = "the codename quuxplover and the zebrafishword"
    record = SessionRecord(SessionRecord.make_id("b1", 0), "b1", "t1", 0, "u1", "user", None,
                           None, (), f"a session line: {words}", b"{}")
    await store.write(Batch([frame(0, words.encode())],
                            [message("m1", words), message("m2", "a word kept", thread="t2")],
                            [ThreadUpdate("t1", 100.0, title="t", backing_ids=("t1", "b1")),
                             ThreadUpdate("t2", 100.0, title="kept")], [record]))
    await store.delete_thread("t1")
    [hit] = await store.search("kept")
    assert hit.thread_id == "t2"
    # Read with the store open: its close checkpoints the WAL anyway, which a running liminal
    # does only now and then.
    for word in (b"quuxplover", b"zebrafishword"):
        assert not files_holding(tmp_path, word), word
    await store.aclose()


def files_holding(folder: Path, word: bytes) -> list[str]:
    return [f.name for f in folder.iterdir() if f.name.startswith("liminal.db") and word in f.read_bytes()]


# Letters that NFC composes and NFD takes apart: kana with (semi-)voiced marks, Hangul
# syllables, Latin with diacritics. macOS file names (HFS+) and tools that print them are NFD;
# what a person types is NFC.
_COMPOSABLE = "がぎぐげござじずぜぞだぢづでどばびぶべぼぱぴぷぺぽガギグゲゴ한국어가각간글자éèêñöüÅçǅ"


@pytest.mark.parametrize("fts", [True, False], ids=["fts5", "like"])
@given(word=st.text(alphabet=_COMPOSABLE, min_size=1, max_size=6),
       stored=st.sampled_from(["NFC", "NFD"]), typed=st.sampled_from(["NFC", "NFD"]))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_search_finds_a_word_whichever_unicode_form_it_was_stored_or_typed_in(
        tmp_path: Path, fts: bool, word: str, stored: str, typed: str) -> None:
    async def check() -> list[str]:
        with tempfile.TemporaryDirectory(dir=tmp_path) as folder:
            store = await SqliteStore.open(Path(folder) / "liminal.db", fts=fts)
            try:
                text = f"the word {unicodedata.normalize(stored, word)} was here"
                await store.write(Batch(messages=[message("m1", text)]))
                return [h.id for h in await store.search(unicodedata.normalize(typed, word))]
            finally:
                await store.aclose()

    assert anyio.run(check) == ["m1"]


def _modes(folder: Path) -> dict[str, int]:
    import stat

    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()}


@pytest.mark.anyio
async def test_a_database_readable_by_others_is_made_private_with_its_wal_and_shm(
        tmp_path: Path) -> None:
    """A database an older liminal left 0644 (or a copy restored under umask 022): SQLite gives
    its -wal and -shm the database's mode, so every conversation written from now on would be
    readable by others too. Opening it for writing makes all three 0600."""
    import os

    old = os.umask(0o022)
    try:
        path = tmp_path / "liminal.db"
        with sqlite3.connect(path) as made:
            made.execute("PRAGMA journal_mode=WAL")
            made.execute("CREATE TABLE x (y)")
            holder = sqlite3.connect(path)  # keeps -wal and -shm in place
            holder.execute("SELECT * FROM x").fetchall()
        for name in ("liminal.db", "liminal.db-wal", "liminal.db-shm"):
            if (tmp_path / name).exists():
                (tmp_path / name).chmod(0o644)
        store = await SqliteStore.open(path)
        await store.write(Batch(messages=[message("m1", "a private conversation")]))
        modes = _modes(tmp_path)
        await store.aclose()
        holder.close()
    finally:
        os.umask(old)
    assert modes == {"liminal.db": 0o600, "liminal.db-wal": 0o600, "liminal.db-shm": 0o600}


@pytest.mark.anyio
@pytest.mark.parametrize("fts", [True, False], ids=["fts5", "like"])
async def test_a_database_made_before_liminal_kept_its_own_lines_reads_and_takes_them(
        tmp_path: Path, fts: bool) -> None:
    """A store made by an earlier liminal has no ``own`` column: read (by ``liminal mcp``'s
    recall, by search) its lines are all the CLI's, and the first write of session lines adds
    the column."""
    path = tmp_path / "liminal.db"
    store = await SqliteStore.open(path, fts=fts)
    await store.aclose()
    with sqlite3.connect(path) as old:
        old.execute("ALTER TABLE session_records DROP COLUMN own")
    cli = SessionRecord(SessionRecord.make_id("b1", 0), "b1", "t1", 0, "u1", "user", None, None,
                        (), "the flux capacitor", b'{"uuid":"u1"}')
    with sqlite3.connect(path) as old:
        old.execute("INSERT INTO session_records (id, backing_id, thread_id, offset, uuid, type, "
                    "tool_ids, text, raw) VALUES (?,?,?,?,?,?,?,?,?)",
                    (cli.id, "b1", "t1", 0, "u1", "user", "[]", cli.text, cli.raw))
    reader = await SqliteStore.open(path, create=False, fts=fts)
    assert await reader.session_records("b1", uuid="u1") == [cli]
    assert [h.id for h in await reader.search("flux")] == [cli.id]
    writer = await SqliteStore.open(path, fts=fts)
    copy = SessionRecord(SessionRecord.make_id("b2", 0), "b2", "t1", 0, "u1", "user", None, None,
                         (), "", b'{"uuid":"u1","sessionId":"b2"}', own=True)
    await writer.write(Batch(session_records=[copy]))
    assert await reader.session_records("b2") == [copy]
    assert [h.id for h in await reader.search("flux")] == [cli.id]
    await writer.aclose()
    await reader.aclose()


_OTHER_PROCESS = """
import sys, anyio
from pathlib import Path
from liminal.store.records import Batch
from liminal.store.sqlite import SqliteStore
from tests.store.test_store_contract import message

async def main(path, write):
    store = await SqliteStore.open(Path(path), create=False)
    if write:
        await store.write(Batch((), [message(write, "from the other process")], ()))
    print(",".join(m.id for m in await store.messages("t1")))
    await store.aclose()

anyio.run(main, sys.argv[1], sys.argv[2])
"""


def _other_process(path: Path, write: str = "") -> list[str]:
    """A store opened, used and closed by a process of its own (``liminal history``, the index
    worker): the ids of the messages of ``t1`` it read."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _OTHER_PROCESS, str(path), write], cwd=root,
                          capture_output=True, text=True, check=True, timeout=60)
    return [m for m in done.stdout.strip().split(",") if m]


@pytest.mark.anyio
async def test_stores_opened_one_after_another_in_a_process_keep_seeing_the_others_writes(
        tmp_path: Path) -> None:
    """``liminal acp`` opens the store several times (its index, its rewind, its commands); a
    command (``liminal history``) opens and closes it beside. Each open of the file by liminal
    itself dropped SQLite's locks of the stores already open (POSIX locks are the process's),
    so the command's close took itself for the last user and deleted the -wal and -shm: the
    stores open in liminal read a snapshot that never moved again (a rewind refused "unknown
    message id" for a message the index had stored) and what they wrote went to the deleted
    file, lost."""
    path = tmp_path / "liminal.db"
    first = await SqliteStore.open(path)
    await first.write(Batch((), [message("m1", "the first turn")], ()))
    second = await SqliteStore.open(path)
    try:
        assert await anyio.to_thread.run_sync(_other_process, path) == ["m1"]
        assert await anyio.to_thread.run_sync(_other_process, path, "m2") == ["m1", "m2"]
        for store in (first, second):
            assert [m.id for m in await store.messages("t1")] == ["m1", "m2"]
        await first.write(Batch((), [message("m3", "written here after")], ()))
        assert await anyio.to_thread.run_sync(_other_process, path) == ["m1", "m2", "m3"]
    finally:
        await second.aclose()
        await first.aclose()
