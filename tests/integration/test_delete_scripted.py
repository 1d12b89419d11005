"""A thread deleted by either door is gone through every door (issue 33), on a real ``liminal
acp`` with the real Claude harness and the scripted agent keeping session files as Claude Code
would (``tests.support.claude_files``), the recall cache in files or in Redis.

The doomed thread swapped twice and was undone (four sessions: its own, two rewrites, the cut of
``/undo``), was forked (``/fork``: a thread with a file of its own), and its recall keys were
asked through ``/recall`` and through ``liminal mcp`` (another process), which filled the cache.
A second thread swapped too and was recalled the same way. Then one door deletes it:
``session/delete`` through the proxy, or ``liminal threads delete --yes`` with no proxy or
agent running. Afterwards no recall key of it resolves (``/recall``, the MCP ``recall`` tool, the
recaller, the dashboard), the cache holds nothing of its sessions, no file of it is in the CLI's
folder, no search finds it (``liminal search``, ``search_history``, the dashboard's), no list shows
it (``liminal threads``, ``session/list``, the dashboard's reader), and ``liminal doctor`` finds
nothing left; the second thread and the fork keep their files, blobs and keys. Before, every key
still resolved from the cache and, after the CLI's door, from the files it left.
The real CLIs' side: ``tests/acceptance/test_delete.py``.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from liminal.config import CacheSettings, Settings
from liminal.dashboard.reader import NotFound, Reader
from liminal.gradient.recall import KEY_IN_MARKER, RecallError, RecallKey
from liminal.kernel.journal import SwapJournal
from liminal.lookup.recaller import Recaller
from liminal.store.cache import Cache, open_cache
from liminal.store.sqlite import SqliteStore
from tests.integration.test_commands_scripted import CWD, opened, run_liminal, said
from tests.store.conftest import REDIS_URL
from tests.support.proxy_process import ProxyProcess, child_env

pytestmark = pytest.mark.anyio
CACHES = ["files", pytest.param("redis", marks=pytest.mark.skipif(
    not REDIS_URL, reason="LIMINAL_TEST_REDIS_URL is not set"))]


def env(tmp_path: Path, cache: str) -> dict[str, str]:
    return {"CLAUDE_CONFIG_DIR": str(tmp_path / "claude"), "CODEX_HOME": str(tmp_path / "codex"),
            "LIMINAL_CACHE_URL": REDIS_URL if cache == "redis" else ""}


def settings(tmp_path: Path, cache: str) -> Settings:
    return Settings(home=tmp_path / "liminal-home",
                    cache=CacheSettings(url=REDIS_URL if cache == "redis" else ""))


def files_of(tmp_path: Path, session: str) -> list[Path]:
    return [p for p in (tmp_path / "claude" / "projects").rglob("*") if session in p.name]


def keys_in(tmp_path: Path, session: str) -> list[str]:
    [path] = (tmp_path / "claude" / "projects").glob(f"*/{session}.jsonl")
    return list(dict.fromkeys(KEY_IN_MARKER.findall(path.read_text())))


async def liminal(tmp_path: Path, cache: str, *args: str) -> str:
    done = await anyio.run_process([sys.executable, "-m", "liminal", *args], check=False,
                                   env=child_env(tmp_path, **env(tmp_path, cache)))
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


class Mcp:
    """``liminal mcp`` bound to a thread, as the CLI runs it (a process of its own)."""

    def __init__(self, tmp_path: Path, cache: str, thread: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "liminal.mcp", "--home", str(tmp_path / "liminal-home"), "--thread", thread],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=child_env(tmp_path, **env(tmp_path, cache)))
        self.ids = iter(range(1, 10_000))

    def call(self, tool: str, **arguments: Any) -> tuple[str, bool]:
        assert self.proc.stdin and self.proc.stdout
        rpc_id = next(self.ids)
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call", "params": {
            "name": tool, "arguments": arguments}}).encode() + b"\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        assert answer["id"] == rpc_id, answer
        return "".join(c["text"] for c in answer["result"]["content"]), answer["result"]["isError"]

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait(30)


@contextlib.asynccontextmanager
async def mcp(tmp_path: Path, cache: str, thread: str) -> AsyncIterator[Mcp]:
    server = await anyio.to_thread.run_sync(Mcp, tmp_path, cache, thread)
    try:
        yield server
    finally:
        await anyio.to_thread.run_sync(server.close)


async def swapped(tmp_path: Path, proxy: ProxyProcess, thread: str, count: int, words: str) -> None:
    """A turn past the trigger, and the ``count``-th committed move of the home."""
    await said(proxy, thread, f"turn {words} used:130000")
    journal = SwapJournal(tmp_path / "liminal-home" / "swaps.jsonl")
    with anyio.fail_after(60):
        while len([r for r in journal.records() if r.outcome == "committed"]) < count:  # noqa: ASYNC110
            await anyio.sleep(0.05)
    await said(proxy, thread, f"turn after {words} used:21000")


async def held(tmp_path: Path, cache: str, sessions: list[str]) -> dict[str, int]:
    async with open_cache(settings(tmp_path, cache)) as opened_cache:
        found = await opened_cache.held()
    return {s: found[s] for s in sessions if found.get(s)}


def doctor_line(said: str, check: str) -> str:
    """``liminal doctor``'s line of ``check``, its words joined (a long one wraps)."""
    lines = said.splitlines()
    [at] = [n for n, line in enumerate(lines) if line.split()[1:2] == [check]]
    more = [line for line in lines[at + 1:] if line.startswith(" ")]
    for n, line in enumerate(lines[at + 1:]):
        if not line.startswith(" "):
            more = lines[at + 1:at + 1 + n]
            break
    return " ".join(" ".join([lines[at], *more]).split())


async def recaller_gives(tmp_path: Path, cache: Cache, key: str) -> bool:
    store = await SqliteStore.open(tmp_path / "liminal-home" / "liminal.db", create=False)
    try:
        await Recaller(store, cache, {"CLAUDE_CONFIG_DIR": str(tmp_path / "claude")}).recall(key)
        return True
    except RecallError:
        return False
    finally:
        await store.aclose()


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("door", ["session/delete", "liminal threads delete"])
async def test_a_deleted_thread_is_gone_through_every_door(tmp_path: Path, door: str, cache: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    state: dict[str, Any] = {}
    extra = {"LIMINAL_CACHE_URL": env(tmp_path, cache)["LIMINAL_CACHE_URL"]}

    async def before(proxy: ProxyProcess) -> None:
        doomed = state["doomed"] = await opened(proxy)
        await said(proxy, doomed, "turn quebec used:5000")
        await swapped(tmp_path, proxy, doomed, 1, "romeo")
        assert "Context optimised" in await said(proxy, doomed, "/optimise")  # a second rewrite
        await said(proxy, doomed, "turn hotel used:22000")
        assert "out of the model's context" in await said(proxy, doomed, "/undo")
        state["fork"] = (await said(proxy, doomed, "/fork")).split("session ")[1].split(":")[0]
        kept = state["kept"] = str((await proxy.request(
            "session/new", {"cwd": CWD, "mcpServers": []}))["result"]["sessionId"])
        await said(proxy, kept, "turn sierra used:5000")
        await swapped(tmp_path, proxy, kept, 4, "tango")
        journal = SwapJournal(tmp_path / "liminal-home" / "swaps.jsonl")
        lineage = state["lineage"] = [doomed] + [r.new_backing_id for r in journal.records(doomed)
                                                 if r.outcome == "committed"]
        assert len(lineage) == 4 and all(files_of(tmp_path, s) for s in lineage), lineage
        doomed_keys = state["doomed_keys"] = keys_in(tmp_path, lineage[-1])
        kept_keys = state["kept_keys"] = keys_in(tmp_path, journal.current(kept)[0] or "")
        assert doomed_keys and kept_keys
        # The cache filled: through the proxy's /recall, and through liminal mcp.
        for key in [*doomed_keys[:2], *kept_keys[:2]]:
            assert "neither the store" not in await said(proxy, kept, f"/recall {key}"), key
        async with mcp(tmp_path, cache, kept) as server:
            text, failed = await anyio.to_thread.run_sync(lambda: server.call("recall", key=doomed_keys[-1]))
            assert not failed and text
            def search() -> str:
                return server.call("search_history", query="quebec", all_threads=True)[0]

            with anyio.fail_after(60):  # found, once the index worker has stored the turn
                while "turn quebec" not in await anyio.to_thread.run_sync(search):  # noqa: ASYNC110
                    await anyio.sleep(0.2)
        assert set(await held(tmp_path, cache, lineage)) == {RecallKey.parse(k).session_id for k in doomed_keys}
        assert await held(tmp_path, cache, [kept])
        if door == "session/delete":
            answer = await proxy.request("session/delete", {"sessionId": doomed}, timeout=120)
            assert answer.get("result") == {}, answer

    await run_liminal(tmp_path, before, **extra)
    doomed, fork, kept, lineage = state["doomed"], state["fork"], state["kept"], state["lineage"]
    if door == "liminal threads delete":
        said_back = await liminal(tmp_path, cache, "threads", "delete", doomed[:8], "--yes")
        assert said_back.startswith(f"deleted thread {doomed}: "), said_back
        assert " files" in said_back and " cache entr" in said_back, said_back

    # No file of any of its sessions; the fork's and the other thread's stay.
    assert [p for s in lineage for p in files_of(tmp_path, s)] == []
    assert files_of(tmp_path, fork) and files_of(tmp_path, kept)
    # Nothing of it in the cache; the other thread's blobs stay.
    assert await held(tmp_path, cache, lineage) == {}
    assert await held(tmp_path, cache, [kept])
    async with open_cache(settings(tmp_path, cache)) as opened_cache:
        for key in state["doomed_keys"]:
            assert not await recaller_gives(tmp_path, opened_cache, key), key
        for key in state["kept_keys"]:
            assert await recaller_gives(tmp_path, opened_cache, key), key
    # No key of it resolves through the MCP server; no search finds it there.
    async with mcp(tmp_path, cache, kept) as server:
        for key in state["doomed_keys"]:
            text, failed = await anyio.to_thread.run_sync(lambda k=key: server.call("recall", key=k))
            assert failed, (key, text)
        text, failed = await anyio.to_thread.run_sync(
            lambda: server.call("search_history", query="quebec", all_threads=True))
        assert "turn quebec" not in text, text
        text, _ = await anyio.to_thread.run_sync(
            lambda: server.call("search_history", query="sierra", all_threads=True))
        assert "turn sierra" in text, text
    # Nor through the commands a person runs, nor the dashboard's reader.
    assert "turn quebec" not in await liminal(tmp_path, cache, "search", "quebec")
    assert "turn sierra" in await liminal(tmp_path, cache, "search", "sierra")
    shown = {t["id"] for t in json.loads(await liminal(tmp_path, cache, "threads", "--json", "--all"))}
    assert doomed not in shown and {kept, fork} <= shown, shown
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    reader = Reader(settings(tmp_path, cache))
    try:
        assert {row["id"] for row in await reader.threads(archived=True)} >= {kept, fork}
        assert doomed not in {row["id"] for row in await reader.threads(archived=True)}
        with pytest.raises(NotFound):
            await reader.thread(doomed)
        for key in state["doomed_keys"]:
            with pytest.raises(RecallError):
                await reader.recall(key)
        assert "turn quebec" not in json.dumps(await reader.search("quebec"))
    finally:
        await reader.aclose()
    doctor = await anyio.run_process([sys.executable, "-m", "liminal", "doctor"], check=False,
                                     env=child_env(tmp_path, **extra))
    assert doctor_line(doctor.stdout.decode(), "delete") == "ok delete nothing left of 1 deleted thread"

    # And through a client of a liminal started afterwards: /recall, /search, session/list.
    async def after(proxy: ProxyProcess) -> None:
        await opened(proxy, kept)
        for key in state["doomed_keys"]:
            text = await said(proxy, kept, f"/recall {key}")
            assert "neither the store nor a session file" in text, text
        assert "turn sierra" in await said(proxy, kept, "/search sierra")  # (a thread's own search)
        listed = {s["sessionId"] for s in (await proxy.request("session/list", {"cwd": CWD}))["result"]["sessions"]}
        assert doomed not in listed and {kept, fork} <= listed, listed

    await run_liminal(tmp_path, after, **extra)
    assert [p for s in lineage for p in files_of(tmp_path, s)] == []


@pytest.mark.parametrize("cache", CACHES)
async def test_doctor_finds_what_deleted_threads_left_and_purge_removes_it(tmp_path: Path, cache: str) -> None:
    """A thread an older liminal deleted (its tombstone names no session; its swap journal lines,
    files and cached blobs stayed), a line of its rewrite's session stored since under no thread
    (the CLI wrote the file again as its process ended), its part of a lesson the live thread
    shares, a record of it set aside, a slash command its model queued, the lines the CLIs' logs
    keep of its sessions (Claude Code's prompt history, written by its terminal interface;
    Codex's thread names): ``liminal doctor`` says what is left in one line, ``liminal threads
    purge`` removes it, and the live thread keeps everything."""
    from liminal.ingest import quarantine
    from liminal.kernel.journal import SwapRecord
    from liminal.lookup import lessons
    from liminal.mcp import link
    from liminal.store.records import DELETED, Batch, MessageRecord, SessionRecord, ThreadUpdate

    doomed, moved, kept, kept_moved = (f"{n}{n}{n}{n}{n}{n}{n}{n}-0000-4000-8000-00000000000{n}" for n in "1234")
    home = tmp_path / "liminal-home"
    home.mkdir(mode=0o700)
    project = tmp_path / "claude" / "projects" / "-w"
    (project / moved / "tool-results").mkdir(parents=True)
    for name in (f"{doomed}.jsonl", f"{moved}.jsonl", f"{moved}/tool-results/toolu_1.txt",
                 f"{kept}.jsonl", f"{kept_moved}.jsonl"):
        (project / name).write_text("{}\n")
    journal = SwapJournal(home / "swaps.jsonl")
    for thread, old, new in ((doomed, doomed, moved), (kept, kept, kept_moved)):
        journal.append(SwapRecord(thread_id=thread, old_backing_id=old, new_backing_id=new, outcome="committed",
                                  reason="test", started_at=1.0, duration_s=0.1, tokens_before=None,
                                  tokens_after=None, zone=[{"key": "k", "kind": "passage", "score": 1.0,
                                                            "text": f"words of {thread}"}]))
    store = await SqliteStore.open(home / "liminal.db")
    try:
        await store.write(Batch(threads=[ThreadUpdate(doomed, 1.0, title="doomed", backing_ids=(doomed, moved)),
                                         ThreadUpdate(kept, 1.0, title="kept", backing_ids=(kept, kept_moved))]))
        await store.delete_thread(doomed)
        # Its part of a lesson it shares with the live thread (an older liminal's delete left it).
        for thread in (doomed, kept):
            await lessons.keep(store, thread, [lessons.Learned("The staging port moved to 6543.")], now=1.0)
        await store.write(Batch(threads=[ThreadUpdate(doomed, 2.0, state=DELETED, by_user=True)]))
        await store.write(Batch(session_records=[SessionRecord(
            SessionRecord.make_id(moved, 0), moved, None, 0, None, "last-prompt", None, None, (),
            "the last prompt, written again", b"{}")]))
    finally:
        await store.aclose()
    async with open_cache(settings(tmp_path, cache)) as blobs:
        for session in (doomed, moved, kept):
            await blobs.set(f"recall:{session}:u1:0", b"an output")
    quarantine.set_aside(quarantine.folder(home), "message", MessageRecord(
        "m1", doomed, None, 1.0, "0001", "user", "a refused message"), "test")
    link.leave_slash(home, doomed, "mark", "A")
    history = tmp_path / "claude" / "history.jsonl"
    history.write_bytes(b"".join(orjson.dumps({"display": f"typed in {s}", "pastedContents": {}, "timestamp": 1,
                                               "project": "/w", "sessionId": s}) + b"\n" for s in (doomed, kept, moved)))
    (tmp_path / "codex").mkdir()
    names = tmp_path / "codex" / "session_index.jsonl"
    names.write_bytes(b"".join(orjson.dumps({"id": s, "thread_name": f"name of {s}", "updated_at": "x"}) + b"\n"
                               for s in (doomed, kept)))

    async def delete_line() -> str:
        done = await anyio.run_process([sys.executable, "-m", "liminal", "doctor"], check=False,
                                       env=child_env(tmp_path, **env(tmp_path, cache)))
        return doctor_line(done.stdout.decode(), "delete")

    assert await delete_line() == (
        f"PROBLEM delete 1 deleted thread left 2 records, 3 files, 3 lines in the CLI's logs, 2 cache entries, "
        f"1 record set aside, 1 queued command, 1 journal line, e.g. {doomed}: `liminal threads purge` removes them")
    purged = await liminal(tmp_path, cache, "threads", "purge")
    assert purged == (f"purged deleted thread {doomed}: 2 records, 3 files, 3 lines in the CLI's logs, "
                      "2 cache entries, 1 record set aside, 1 queued command, 1 journal line\n"), purged
    assert [orjson.loads(line)["sessionId"] for line in history.read_bytes().splitlines()] == [kept]
    assert [orjson.loads(line)["id"] for line in names.read_bytes().splitlines()] == [kept]
    assert await delete_line() == "ok delete nothing left of 1 deleted thread"
    assert await liminal(tmp_path, cache, "threads", "purge") == "nothing left of deleted threads\n"
    assert sorted(p.name for p in project.iterdir()) == sorted([f"{kept}.jsonl", f"{kept_moved}.jsonl"])
    assert await held(tmp_path, cache, [doomed, moved, kept]) == {kept: 1}
    assert [r.thread_id for r in journal.records()] == [kept]
    assert quarantine.listing(home) == [] and link.take_slash(home, doomed) == []
    store = await SqliteStore.open(home / "liminal.db", create=False)
    try:
        [tomb] = await store.deleted_threads()
        assert tomb.backing_ids == (doomed, moved)  # what was its, now named
        assert [s.thread.id for s in await store.threads()] == [kept]
        [shared] = await lessons.every(store)  # the live thread's part stays
        assert shared.threads == (kept,)
    finally:
        await store.aclose()
