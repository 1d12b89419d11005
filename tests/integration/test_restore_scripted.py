"""A thread whose session files are all gone opens from the store (issue 23), on a real
``liminal acp`` with the store on, the real Claude harness, and the scripted agent keeping
session files as Claude Code would and refusing a load of a session with no file, as Claude
Code's adapter does. The real CLIs' side is in tests/acceptance/test_restore.py.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest

from liminal.gradient.recall import KEY_IN_MARKER, RecallKey
from liminal.kernel.journal import SwapJournal
from liminal.lookup.recaller import Recaller
from liminal.lookup.sessionlines import stored_lines
from liminal.store.sqlite import SqliteStore
from tests.integration.test_commands_scripted import CWD, opened, run_liminal, said, session_files
from tests.support.proxy_process import ProxyProcess

pytestmark = pytest.mark.anyio


def shown(proxy: ProxyProcess, thread: str, start: int = 0) -> str:
    """Every text the client was sent for ``thread`` since ``start``."""
    return "\n".join(m["params"]["update"]["content"]["text"] for m in proxy.messages()[start:]
                     if m.get("method") == "session/update" and m["params"].get("sessionId") == thread
                     and isinstance(m["params"]["update"].get("content"), dict)
                     and isinstance(m["params"]["update"]["content"].get("text"), str))


def opened_files(home: Path) -> list[dict[str, str]]:
    log = home / "agent_in.bin.opened"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


async def threads_with_their_files_gone(tmp_path: Path, *, gone: bool = True, other: bool = True
                                        ) -> tuple[str, str, str, dict[str, bytes]]:
    """A thread with a swap and one without (unless not ``other``: the scripted agent's replay
    then ends in the moved thread's last prompt), through one liminal; then every session file of
    theirs deleted (unless not ``gone``). Returns the moved thread, the other, the moved one's backing session, and
    the files as they were."""
    threads: dict[str, str] = {}

    async def before(proxy: ProxyProcess) -> None:
        moved = threads["moved"] = await opened(proxy)
        await said(proxy, moved, "turn alpha used:5000")
        await said(proxy, moved, "turn bravo used:130000")  # past the trigger: a swap
        journal = SwapJournal(tmp_path / "liminal-home" / "swaps.jsonl")
        with anyio.fail_after(30):
            while not any(r.outcome == "committed" for r in journal.records()):  # noqa: ASYNC110
                await anyio.sleep(0.05)
        await said(proxy, moved, "turn charlie used:21000")
        threads["still"] = ""
        if other:
            found = await proxy.request("session/new", {"cwd": CWD, "mcpServers": []})
            still = threads["still"] = str(found["result"]["sessionId"])
            await said(proxy, still, "turn delta used:4000")

    await run_liminal(tmp_path, before)
    moved, still = threads["moved"], threads["still"]
    [record] = [r for r in SwapJournal(tmp_path / "liminal-home" / "swaps.jsonl").records()
                if r.outcome == "committed"]
    backing = record.new_backing_id
    assert backing is not None
    files = session_files(tmp_path)
    assert {moved, backing} | ({still} if other else set()) <= set(files)
    for path in (tmp_path / "claude" / "projects").glob("*/*.jsonl") if gone else ():
        path.unlink()  # every file of the threads' past: only the store is left
    return moved, still, backing, files


async def loads_its_whole_history(proxy: ProxyProcess, thread: str) -> None:
    """The client loads ``thread``: what it is shown is the thread's real history (the store's,
    first turn to last), never the compressed copy's."""
    start = len(proxy.messages())
    await opened(proxy, thread)
    history = shown(proxy, thread, start)
    assert "turn alpha" in history and "turn charlie" in history, history
    assert "[compressed]" not in history, history


def opens_on(tmp_path: Path, moved: str, backing: str) -> Callable[[ProxyProcess], Awaitable[None]]:
    """After a restart: the moved thread loads with its whole history, the agent opens the
    session ``backing`` only, and the thread goes on there."""
    async def after(proxy: ProxyProcess) -> None:
        await loads_its_whole_history(proxy, moved)
        assert [o["sessionId"] for o in opened_files(tmp_path)] == [backing]
        await said(proxy, moved, "turn echo used:22000")

    return after


async def test_a_thread_whose_files_are_all_gone_loads_from_the_store_and_goes_on(tmp_path: Path) -> None:
    moved, still, backing, files = await threads_with_their_files_gone(tmp_path)

    async def after(proxy: ProxyProcess) -> None:
        await loads_its_whole_history(proxy, moved)
        loaded = await proxy.request("session/load", {"sessionId": still, "cwd": CWD, "mcpServers": []})
        assert "result" in loaded, loaded
        # The agent read each session from the file written again: byte for byte the one it
        # had, and the thread goes on on it.
        assert {o["sessionId"]: o["bytes"].encode() for o in opened_files(tmp_path)} == {
            backing: files[backing], still: files[still]}
        await said(proxy, moved, "turn echo used:22000")
        await said(proxy, still, "turn foxtrot used:5000")

    await run_liminal(tmp_path, after, AGENT_LOAD_NEEDS_FILE="1")
    now = session_files(tmp_path)
    assert moved not in now  # the thread's older session needs no file: recall reads the store
    assert now[backing].startswith(files[backing]) and b"turn echo" in now[backing][len(files[backing]):]
    assert now[still].startswith(files[still]) and b"turn foxtrot" in now[still][len(files[still]):]
    for path in (tmp_path / "claude" / "projects").glob("*/*.jsonl"):
        assert path.stat().st_mode & 0o777 == 0o600
    # Every recall key in the context the thread went on with resolves: the session they name
    # has no file, the store answers.
    keys = list(dict.fromkeys(KEY_IN_MARKER.findall(now[backing].decode())))
    assert keys
    store = await SqliteStore.open(tmp_path / "liminal-home" / "liminal.db", create=False)
    try:
        recaller = Recaller(store, None, {"CLAUDE_CONFIG_DIR": str(tmp_path / "claude")})
        for key in keys:
            assert RecallKey.parse(key).session_id == moved
            assert await recaller.recall(key), key
        # And the store still holds each session whole, the turns after the restore among them:
        # it could be written again tomorrow.
        for session in (backing, still):
            assert b"".join(line + b"\n" for line in await stored_lines(store, session)) == now[session]
    finally:
        await store.aclose()


async def test_a_session_the_store_lacks_a_line_of_is_not_written_and_the_load_is_answered(
        tmp_path: Path) -> None:
    """A line of the session missing from the store (set aside, never indexed): no file is
    written from the gap; the load goes to the agent as it is, and its error is the answer."""
    moved, _, backing, _ = await threads_with_their_files_gone(tmp_path)
    with contextlib.closing(sqlite3.connect(tmp_path / "liminal-home" / "liminal.db")) as db, db:
        [(offset,)] = db.execute("SELECT offset FROM session_records WHERE backing_id = ? "
                                 "ORDER BY offset LIMIT 1 OFFSET 3", (backing,)).fetchall()
        db.execute("DELETE FROM session_records WHERE backing_id = ? AND offset = ?", (backing, offset))

    async def after(proxy: ProxyProcess) -> None:
        await proxy.request("initialize", {"protocolVersion": 1})
        loaded = await proxy.request("session/load", {"sessionId": moved, "cwd": CWD, "mcpServers": []})
        assert loaded.get("error", {}).get("message", "").startswith("Resource not found"), loaded
        assert backing not in session_files(tmp_path)
        assert "session file not written from the store" in proxy.stderr.decode()

    await run_liminal(tmp_path, after, AGENT_LOAD_NEEDS_FILE="1")


async def test_a_session_clear_opened_that_has_turns_since_is_written_again_not_reopened_empty(
        tmp_path: Path) -> None:
    """``/clear`` puts a thread on a session opened empty, which the CLI writes at its first
    turn. That file gone, a load had the thread reopened on a new empty session (what is right
    while the session has no turn, ``liminal.kernel.reopen``): the turns since ``/clear`` were
    lost to the model though the store held them. The store's lines win."""
    state: dict[str, str] = {}

    async def before(proxy: ProxyProcess) -> None:
        thread = state["thread"] = await opened(proxy)
        await said(proxy, thread, "turn alpha used:5000")
        await said(proxy, thread, "/clear")
        await said(proxy, thread, "turn bravo after the clear used:3000")

    await run_liminal(tmp_path, before, AGENT_CLAUDE_NEW_EMPTY="1")
    thread = state["thread"]
    journal = SwapJournal(tmp_path / "liminal-home" / "swaps.jsonl")
    [record] = [r for r in journal.records() if r.outcome == "committed"]
    assert record.opened == "empty" and record.new_backing_id is not None
    backing = record.new_backing_id
    files = session_files(tmp_path)
    assert b"turn bravo" in files[backing]
    for path in (tmp_path / "claude" / "projects").glob("*/*.jsonl"):
        path.unlink()

    async def after(proxy: ProxyProcess) -> None:
        await opened(proxy, thread)
        assert {o["sessionId"]: o["bytes"].encode() for o in opened_files(tmp_path)} == {
            backing: files[backing]}
        await said(proxy, thread, "turn charlie used:4000")

    await run_liminal(tmp_path, after, AGENT_LOAD_NEEDS_FILE="1", AGENT_CLAUDE_NEW_EMPTY="1")
    assert [r.move for r in journal.records() if r.outcome == "committed"] == [record.move]
    assert b"turn charlie" in session_files(tmp_path)[backing]


async def test_a_moved_thread_without_its_journal_opens_on_the_session_the_store_has_it_on(
        tmp_path: Path) -> None:
    """The swap journal binds a thread to its session at start. Without it (deleted, or the
    liminal of another machine on the same store, which never saw the move) the moved thread
    was bound to its first session, and its load refused (written, that session would have
    opened it on its context before the swap). The store's lineage says where the thread is:
    it is bound there, that session written from the store and loaded, and it goes on."""
    moved, _, backing, files = await threads_with_their_files_gone(tmp_path)
    (tmp_path / "liminal-home" / "swaps.jsonl").unlink()

    async def after(proxy: ProxyProcess) -> None:
        await loads_its_whole_history(proxy, moved)
        assert {o["sessionId"]: o["bytes"].encode() for o in opened_files(tmp_path)} == {
            backing: files[backing]}
        await said(proxy, moved, "turn echo used:22000")

    await run_liminal(tmp_path, after, AGENT_LOAD_NEEDS_FILE="1")
    now = session_files(tmp_path)
    assert moved not in now
    assert now[backing].startswith(files[backing]) and b"turn echo" in now[backing][len(files[backing]):]


async def test_a_thread_moved_elsewhere_opens_on_the_stores_session_though_an_old_file_of_it_is_here(
        tmp_path: Path) -> None:
    """A host that still has an old file of a thread another host has since moved (here: the
    journal gone, so this liminal has the thread on its first session, whose file is still on
    disk) forwarded the client's load to that file: the thread opened silently on the context
    it had before the move. The store is asked first whenever it is configured: its lineage
    is further along, so the thread is bound there and that session opened, and it goes on."""
    moved, _, backing, files = await threads_with_their_files_gone(tmp_path, gone=False)
    (tmp_path / "liminal-home" / "swaps.jsonl").unlink()

    await run_liminal(tmp_path, opens_on(tmp_path, moved, backing), AGENT_LOAD_NEEDS_FILE="1")
    now = session_files(tmp_path)
    assert now[moved] == files[moved]  # the old file is left as it was
    assert now[backing].startswith(files[backing]) and b"turn echo" in now[backing][len(files[backing]):]


async def test_a_moved_thread_the_store_has_nowhere_newer_is_loaded_as_the_client_asked(
        tmp_path: Path) -> None:
    """The store asked and nothing newer there: the client's own load goes to the agent (its id,
    the thread's session), the history from the store as for any moved thread."""
    moved, _, backing, _ = await threads_with_their_files_gone(tmp_path, gone=False, other=False)

    await run_liminal(tmp_path, opens_on(tmp_path, moved, backing), AGENT_LOAD_NEEDS_FILE="1")
    loads = [json.loads(line) for line in (tmp_path / "agent_in.bin").read_text().splitlines()
             if '"session/load"' in line]
    assert [(m["id"], m["params"]["sessionId"]) for m in loads if m.get("method") == "session/load"][-1:] \
        == [(2, backing)]
