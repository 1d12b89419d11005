"""``liminal threads``, ``history`` and ``search`` over a store the indexer filled."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import anyio
import orjson
import pytest

from liminal import cli
from liminal.ingest.indexer import Indexer
from liminal.store.base import Census, Store, StoreError
from liminal.store.sqlite import SqliteStore
from tests.store.conftest import conversation, event
from tests.support.mongo import KINDS, fresh_database_sync


@pytest.fixture(params=KINDS)
def home(request: pytest.FixtureRequest, tmp_path: Path,
         monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A home whose store (SQLite in it, or a MongoDB database of its own) the indexer filled."""
    monkeypatch.setenv("LIMINAL_HOME", str(tmp_path))
    for var in ("LIMINAL_STORE_URL", "LIMINAL_CACHE_URL"):
        monkeypatch.delenv(var, raising=False)

    async def fill(url: str) -> None:
        store: Store
        if url:
            from liminal.store.mongo import MongoStore

            store = await MongoStore.open(url)
        else:
            store = await SqliteStore.open(tmp_path / "liminal.db")
        indexer = Indexer(store, tmp_path / "spool")
        for e in conversation():
            indexer.offer(e)
        indexer.offer(event("note", {"jsonrpc": "2.0", "method": "liminal/swap", "params": {
            "outcome": "committed", "tokens_before": 130000, "tokens_after": 80000,
            "duration_s": 0.4}}, thread="sess-1", backing="sess-2", time=1010.0))
        await indexer.aclose()
        from liminal.lookup.memos import save_memo

        await save_memo(store, "the relay's spare capacitor is in drawer 4", ["ops"], "sess-1")
        await store.aclose()

    if request.param == "sqlite":
        anyio.run(fill, "")
        yield tmp_path
        return
    with fresh_database_sync() as url:
        monkeypatch.setenv("LIMINAL_STORE_URL", url)
        anyio.run(fill, url)
        yield tmp_path


def test_threads(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["threads"]) == 0
    out = capsys.readouterr().out
    assert "sess-1" in out and "Refactor the flux capacitor" in out
    assert " claude " in out and "12.3k/200k" in out
    assert cli.main(["threads", "--json"]) == 0
    [t] = orjson.loads(capsys.readouterr().out)
    assert (t["id"], t["turns"], t["swaps"], t["cwd"]) == ("sess-1", 1, 0, "/work/demo")
    assert t["moves"] == t["swaps"]  # every move; "swaps" its older name in --json
    assert " MOVES " in out and "SWAPS" not in out  # the dashboard's Swaps are liminal's rewrites only


def test_rename_archive_and_delete_a_thread(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["threads", "rename", "sess", "Flux", "work"]) == 0
    assert cli.main(["threads", "--json"]) == 0
    [t] = orjson.loads(capsys.readouterr().out.split("\n", 1)[1])
    assert t["title"] == "Flux work"
    assert cli.main(["threads", "archive", "sess-1"]) == 0
    capsys.readouterr()
    assert cli.main(["threads"]) == 0
    assert "sess-1" not in capsys.readouterr().out
    assert cli.main(["threads", "--all"]) == 0
    assert "(archived)" in capsys.readouterr().out
    assert cli.main(["threads", "unarchive", "sess-1"]) == 0
    assert cli.main(["threads", "delete", "sess-1"]) == 2  # not without --yes
    assert "--yes" in capsys.readouterr().err
    # Open in a connection of liminal serve: refused.
    from liminal.serve.locks import ThreadLocks

    held = ThreadLocks(home)
    assert anyio.run(held.try_take, "sess-1")
    assert cli.main(["threads", "delete", "sess-1", "--yes"]) == 1
    assert "is open in a live liminal" in capsys.readouterr().err
    anyio.run(held.release_all)
    assert cli.main(["threads", "delete", "sess-1", "--yes"]) == 0
    assert "deleted thread sess-1" in capsys.readouterr().out
    assert cli.main(["history", "sess-1"]) == 1
    assert cli.main(["threads", "rename", "nope", "x"]) == 1
    assert cli.main(["threads", "rename", "sess-1"]) == 2


def test_a_thread_on_a_shared_sqlite_file_is_locked_and_unlocked_where_its_sidecars_look(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Homes that share one SQLite file lock its threads beside it (``<file>.threads/locks``):
    a deletion refuses while a live liminal there holds the thread, and leaves no lock file
    naming it afterwards (it named the deleted thread)."""
    from liminal.commands.acp import thread_locks
    from liminal.config import load

    home, shared = tmp_path / "home", tmp_path / "shared" / "liminal.db"
    home.mkdir(mode=0o700)
    shared.parent.mkdir()
    monkeypatch.setenv("LIMINAL_HOME", str(home))
    monkeypatch.setenv("LIMINAL_STORE_URL", f"sqlite://{shared}")
    monkeypatch.delenv("LIMINAL_CACHE_URL", raising=False)

    async def fill() -> None:
        store = await SqliteStore.open(shared)
        indexer = Indexer(store, home / "spool")
        for e in conversation():
            indexer.offer(e)
        await indexer.aclose()
        await store.aclose()

    anyio.run(fill)
    locking = thread_locks(load())
    assert locking is not None
    assert anyio.run(locking.take, "sess-1")  # as ``liminal acp`` on another home holds it
    assert cli.main(["threads", "delete", "sess-1", "--yes"]) == 1
    assert "is open in a live liminal" in capsys.readouterr().err
    for release in locking.release:
        anyio.run(release.aclose)
    beside = shared.with_name("liminal.db.threads") / "locks"
    assert (beside / "sess-1.lock").exists()  # released, the file stays until the thread goes
    assert cli.main(["threads", "delete", "sess-1", "--yes"]) == 0
    assert not (beside / "sess-1.lock").exists()


def test_history(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["history", "sess"]) == 0  # a unique prefix is enough
    out = capsys.readouterr().out
    for line in ("# Refactor the flux capacitor module", "> Refactor the flux capacitor module",
                 "  Let me think.", "I will read the file.", "── turn 1 · ", "context 12.3k of 200k tokens",
                 "▸ Read flux.py", "    def gigawatts(): return 1.21",
                 "[plan] [ ] Rename gigawatts",
                 "[liminal: swap compressed the model's context (130k -> 80k tokens, in 0.40 s)]"):
        assert line in out
    assert cli.main(["history", "sess-1", "--json"]) == 0
    data = orjson.loads(capsys.readouterr().out)
    assert len(data["messages"]) == 9
    assert cli.main(["history", "nope"]) == 1


def test_search(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["search", "gigawatts"]) == 0
    out = capsys.readouterr().out
    assert "Refactor the flux capacitor module · turn 1 · tool (Read flux.py)" in out and "gigawatts" in out
    assert cli.main(["search", "gigawatts", "--thread", "other", "--json"]) == 1
    # The last line (a MongoDB store logs what it found of the server first).
    assert capsys.readouterr().err.splitlines()[-1] == "liminal search: no such thread: other"
    assert cli.main(["search", "flux", "--json"]) == 0
    hits = orjson.loads(capsys.readouterr().out)
    assert hits and hits[0]["thread_id"] == "sess-1"


def test_search_finds_a_memo(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A memo is liminal's own record, which the conversation's search never reached: a person
    who saved "/memo the relay's spare capacitor is in drawer 4" and searched "drawer" was told
    "no match" (found trying the README as a new user). The dashboard's search had them."""
    assert cli.main(["search", "spare", "drawer"]) == 0
    out = capsys.readouterr().out
    assert " · memo\n    the relay's spare capacitor is in drawer 4  #ops\n" in out, out
    assert cli.main(["search", "drawer", "--thread", "sess-1"]) == 0  # one thread: its conversation
    assert capsys.readouterr().out.startswith("no match")


def test_a_database_from_before_thread_names_reads_and_takes_them(tmp_path: Path) -> None:
    import sqlite3

    from liminal.store.records import Batch, ThreadUpdate

    path = tmp_path / "liminal.db"

    async def make() -> None:
        store = await SqliteStore.open(path)
        await store.write(Batch(threads=[ThreadUpdate("t1", 100.0, title="old")]))
        await store.aclose()

    anyio.run(make)
    with sqlite3.connect(path) as db:  # as the schema was before ``named``
        db.execute("CREATE TABLE t2 (id TEXT PRIMARY KEY, title TEXT NOT NULL, cwd TEXT NOT NULL, "
                   "harness TEXT NOT NULL, state TEXT NOT NULL, backing_ids TEXT NOT NULL, "
                   "created REAL NOT NULL, updated REAL NOT NULL)")
        db.execute("INSERT INTO t2 SELECT id, title, cwd, harness, state, backing_ids, created, updated FROM threads")
        db.execute("DROP TABLE threads")
        db.execute("ALTER TABLE t2 RENAME TO threads")

    async def use() -> tuple[str, str, bool]:
        store = await SqliteStore.open(path, create=False)
        try:
            before = await store.thread("t1")
            await store.write(Batch(threads=[ThreadUpdate("t1", 101.0, title="new", named=True)]))
            after = await store.thread("t1")
            assert before is not None and after is not None
            return before.title, after.title, after.named
        finally:
            await store.aclose()

    assert anyio.run(use) == ("old", "new", True)


def test_a_deleted_threads_lock_is_never_held_by_two(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A connection of liminal serve opens the thread's lock file just as ``threads delete``
    takes it: the delete must not leave that connection holding a lock on a file it removed,
    while the next taker makes a new file and holds the thread too (two writers, one thread)."""
    import fcntl
    import os
    from types import SimpleNamespace

    from liminal.serve import locks as locks_module
    from liminal.serve.locks import ThreadLocks

    deleted: list[int] = []

    def flock(fd: int, operation: int) -> None:
        if not deleted:  # the waiting connection has opened the file and not locked it yet
            deleted.append(fd)
            assert cli.main(["threads", "delete", "sess-1", "--yes"]) == 0
        fcntl.flock(fd, operation)

    monkeypatch.setattr(locks_module, "fcntl", SimpleNamespace(flock=flock, LOCK_EX=fcntl.LOCK_EX, LOCK_NB=fcntl.LOCK_NB))
    waiting, later = ThreadLocks(home), ThreadLocks(home)
    fd = waiting._take_file("sess-1")  # the file layer of try_take, outside any event loop
    second = anyio.run(later.try_take, "sess-1")
    assert deleted and [fd is not None, second].count(True) == 1, (fd, second)
    if fd is not None:
        os.close(fd)
    anyio.run(later.release_all)


@pytest.mark.parametrize("argv", [["threads", "delete", "", "--yes"], ["threads", "archive", " "],
                                  ["threads", "rename", "", "New", "title"], ["history", ""]])
def test_an_empty_thread_names_no_thread(home: Path, capsys: pytest.CaptureFixture[str],
                                         argv: list[str]) -> None:
    """An empty THREAD (``liminal threads delete "$T" --yes`` with T unset) is a prefix of every
    id: with one thread in the store it named that one, and deleted it."""
    assert cli.main(argv) == 1
    assert re.search("no (single )?thread", capsys.readouterr().err)
    assert cli.main(["threads", "--json"]) == 0
    [t] = orjson.loads(capsys.readouterr().out)
    assert (t["id"], t["title"], t["state"]) == ("sess-1", "Refactor the flux capacitor module", "active")


@pytest.mark.parametrize("kind", ["a folder", "under a file", "a FIFO"])
def test_a_sqlite_store_path_that_cannot_be_a_database_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], kind: str,
) -> None:
    """An OSError opening the file escaped as itself (a traceback from every reader; the index
    worker died at each start), and a FIFO hung liminal for good on its open."""
    import os

    target = {"a folder": tmp_path / "db", "under a file": tmp_path / "f" / "x.db",
              "a FIFO": tmp_path / "fifo"}[kind]
    if kind == "a folder":
        target.mkdir()
    elif kind == "under a file":
        target.parent.write_text("x")
    else:
        os.mkfifo(target)
    monkeypatch.setenv("LIMINAL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LIMINAL_STORE_URL", f"sqlite://{target}")
    assert cli.main(["search", "x"]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err

    async def create() -> None:
        with anyio.fail_after(10), pytest.raises(StoreError):
            await SqliteStore.open(target, create=True)

    anyio.run(create)


def test_a_blank_title_is_refused_not_reported_as_done(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It changed nothing (a blank title never replaces one) while saying 'renamed thread ...: '."""
    assert cli.main(["threads", "rename", "sess", "  ", "\t"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "TITLE" in err


@pytest.fixture
def moved_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store the indexer filled with a thread liminal moved three times (two resumes of files
    it wrote and a /clear), and a session a client opened and never prompted."""
    from tests.store.conftest import moved

    monkeypatch.setenv("LIMINAL_HOME", str(tmp_path))
    for var in ("LIMINAL_STORE_URL", "LIMINAL_CACHE_URL"):
        monkeypatch.delenv(var, raising=False)
    never_prompted = [
        event("c2a", {"jsonrpc": "2.0", "id": 1, "method": "session/new",
                      "params": {"cwd": "/work/demo", "mcpServers": []}}, connection="c2", time=3000.0),
        event("a2c", {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "e-empty"}}, connection="c2",
              thread="e-empty", method="session/new", time=3000.1)]

    async def fill() -> None:
        store = await SqliteStore.open(tmp_path / "liminal.db")
        indexer = Indexer(store, tmp_path / "spool")
        for e in [*conversation(), *moved("sess-1", ["sess-2", "sess-3", "sess-4"], t0=2000.0),
                  *never_prompted]:
            indexer.offer(e)
        await indexer.aclose()
        await store.aclose()

    anyio.run(fill)
    return tmp_path


def test_threads_lists_a_moved_thread_once_with_its_first_title(
        moved_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On main: three more rows (a row of dashes with 0 turns, 'closed', one per session a move
    left), the thread titled after the last new session's first prompt, and the session a
    client opened and never prompted listed for good."""
    assert cli.main(["threads", "--json"]) == 0
    [t] = orjson.loads(capsys.readouterr().out)
    assert (t["id"], t["title"], t["state"], t["turns"], t["swaps"]) == (
        "sess-1", "Flux work", "active", 1, 3)
    assert t["backing_ids"] == ["sess-1", "sess-2", "sess-3", "sess-4"]
    assert cli.main(["threads"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert len(rows) == 1 and rows[0].startswith("sess-1") and "Flux work" in rows[0]
    # --all: the empty one too.
    assert cli.main(["threads", "--all", "--json"]) == 0
    assert [t["id"] for t in orjson.loads(capsys.readouterr().out)] == ["e-empty", "sess-1"]
    # history and search find the thread by a prefix of its id, or by a session it moved onto.
    for name in ("sess-1", "sess-", "sess-3"):
        assert cli.main(["history", name, "--json"]) == 0
        assert orjson.loads(capsys.readouterr().out)["thread"]["id"] == "sess-1"
    assert cli.main(["search", "gigawatts", "--thread", "sess-", "--json"]) == 0
    hits = orjson.loads(capsys.readouterr().out)
    assert hits and {h["thread_id"] for h in hits} == {"sess-1"}
    assert cli.main(["history", "e-e", "--json"]) == 0  # an empty thread is still a thread
    assert orjson.loads(capsys.readouterr().out)["thread"]["id"] == "e-empty"


def test_doctor_says_how_the_store_searches(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A server without text indexes (FerretDB) is searched by scanning: slower, and said."""
    assert cli.main(["doctor"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # The check's name is the row's second word; its text may start on the next line when the
    # path before it is long (a worker's tmp_path under pytest-xdist is).
    [at] = [i for i, x in enumerate(lines) if x.split()[1:2] == ["store"]]
    # The row as one line: a long one wraps onto indented lines when piped (100 columns).
    rest = [x.strip() for x in lines[at + 1:]]
    line = " ".join([lines[at].rstrip(), *rest[:next(
        (i for i, x in enumerate(lines[at + 1:]) if not x.startswith(" ")), len(rest))]])
    assert "opens (has threads); search: " in line
    assert line.endswith(("full-text index (FTS5)", "text index",
                          "scanning with regular expressions (the server has no text indexes)")), line
    # The store's size against its threads, one line (a size, or unknown where the server
    # does not say).
    [size] = [x for x in lines if x.split()[1:2] == ["size"]]
    assert re.search(r"^ok +size +([\d.,]+ [kM]B|size unknown), 1 thread, [\d,]+ messages \(0 repeated\)$",
                     size), size
    # Each CLI liminal knows, Gemini CLI among them, with where its sessions are.
    assert [x.split()[1] for x in lines if x.split()[1:2] in (["claude"], ["codex"], ["gemini"])] == [
        "claude", "codex", "gemini"]


def test_doctor_finds_a_store_much_larger_than_its_threads_warrant() -> None:
    from liminal.commands.doctor import store_size

    assert store_size(Census(3_900_000, 12, 1204, 0, 4096)) == (
        True, "3.9 MB, 12 threads, 1,204 messages (0 repeated)")
    assert store_size(Census(None, 1, 1, 0)) == (True, "size unknown, 1 thread, 1 message (0 repeated)")
    ok, text = store_size(Census(53_000_000, 12, 3470, 3134, 0))
    assert not ok and text.startswith("53.0 MB, 12 threads, 3,470 messages (3,134 repeated): ")
    ok, text = store_size(Census(60_000_000, 12, 120, 0, 45_000_000))
    assert not ok and "45.0 MB of it is free space" in text
    # What one deletion leaves in a small store is no problem: the store reuses it.
    assert store_size(Census(1_400_000, 1, 0, 0, 1_100_000)) == (
        True, "1.4 MB, 1 thread, 0 messages (0 repeated); 1.1 MB of it free")


def test_a_new_install_has_no_threads_and_finds_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Before the first ``liminal acp`` there is no store: ``liminal threads`` said "no store to
    read" and exited 1, as if something were broken; a new install simply has no threads yet."""
    monkeypatch.setenv("LIMINAL_HOME", str(tmp_path / "new-home"))
    for var in ("LIMINAL_STORE_URL", "LIMINAL_CACHE_URL"):
        monkeypatch.delenv(var, raising=False)
    assert cli.main(["threads"]) == 0
    assert capsys.readouterr().out == "no threads yet\n"
    assert cli.main(["threads", "--json"]) == 0
    assert orjson.loads(capsys.readouterr().out) == []
    assert cli.main(["search", "anything"]) == 0
    assert capsys.readouterr().out.startswith("no match")
    assert not (tmp_path / "new-home").exists()  # and nothing was made for asking
    # A store path set by hand that names no file may be a typo: said, and not made.
    monkeypatch.setenv("LIMINAL_STORE_URL", f"sqlite://{tmp_path / 'typo.db'}")
    assert cli.main(["threads"]) == 1
    assert "no store" in capsys.readouterr().err
    assert not (tmp_path / "typo.db").exists()


def test_turns_leave_out_liminals_own_commands(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A command liminal answered itself (``/marks`` here: its prompt from the client to
    liminal, its answer from liminal) was counted as a turn of the conversation."""
    from liminal import config
    from liminal.store.configured import open_store

    async def command() -> None:
        async with open_store(config.load(), create=False) as store:
            indexer = Indexer(store, home / "spool-2")
            for direction, message in (
                    ("c2l", {"jsonrpc": "2.0", "id": 90, "method": "session/prompt", "params": {
                        "sessionId": "sess-1", "prompt": [{"type": "text", "text": "/marks"}]}}),
                    ("l2c", {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "sess-1", "update": {
                        "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "No marks"}}}}),
                    ("l2c", {"jsonrpc": "2.0", "id": 90, "result": {"stopReason": "end_turn"}})):
                indexer.offer(event(direction, message, thread="sess-1", backing="sess-2", time=1020.0,
                                    connection="conn2"))
            await indexer.aclose()

    anyio.run(command)
    assert cli.main(["history", "sess-1"]) == 0
    out = capsys.readouterr().out  # the store has it, as liminal's, numbered as no turn
    assert "[you, to liminal] /marks" in out and "── turn 2" not in out, out
    assert cli.main(["threads", "--json"]) == 0
    [t] = orjson.loads(capsys.readouterr().out)
    assert t["turns"] == 1
