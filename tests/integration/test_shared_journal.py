"""Where a thread is, is in the store when the store is shared (issue 23): a move's commit is
the store's write, through the scripted agent and a real MongoDB-compatible server
(``LIMINAL_TEST_MONGO_URL``; skipped without it, but for the store that does not answer).

A swap with a shared store claims the thread in the store, keeps its rewrite's lines there and
commits there before the local journal; a commit the store refuses (another sidecar moved the
thread) or cannot take (the store down) is no commit: the thread stays on its session, and the
rewrite is removed. A claim a dead sidecar left is taken over and recorded abandoned.
"""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from liminal.kernel.journal import SwapJournal, SwapRecord
from liminal.kernel.storejournal import StoreJournal
from liminal.kernel.swap import SwapManager
from liminal.store.base import Store
from liminal.store.mongo import MongoStore
from tests.integration.test_swap_scripted import FakeHarness, settings, start
from tests.support.inproc import proxy_in_process
from tests.support.mongo import fresh_database, needs_mongo
from tests.support.proxy_process import scripted_agent_argv

pytestmark = pytest.mark.anyio
OTHER = "0f0f0f0f-0000-4000-8000-0000000000ff"


def opener(url: str) -> object:
    @asynccontextmanager
    async def open_store() -> AsyncIterator[Store]:
        store = await MongoStore.open(url, timeout_ms=1000)
        try:
            yield store
        finally:
            await store.aclose()
    return open_store


def sidecar(tmp: Path, url: str) -> tuple[SwapManager, SwapJournal, FakeHarness]:
    harness = FakeHarness(tmp)
    journal = SwapJournal(tmp / "swaps.jsonl")
    shared = StoreJournal(opener(url), 60.0, tmp / "quarantine")  # type: ignore[arg-type]
    return SwapManager(settings(), journal, harness, shared=shared), journal, harness


async def swap_once(manager: SwapManager, client: object, thread: str) -> None:
    await client.prompt(thread, "used:130000 chunks:1")  # type: ignore[attr-defined]
    with anyio.fail_after(20):
        await manager.wait_for_swaps(1)


@pytest.fixture
async def url() -> AsyncIterator[str]:
    async with fresh_database() as name:
        yield name


@needs_mongo
async def test_a_swap_commits_in_the_shared_store_with_its_rewrite_and_its_records(
        tmp_path: Path, url: str) -> None:
    manager, journal, _ = sidecar(tmp_path, url)
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (proxy, client):
        thread = await start(client)
        await swap_once(manager, client, thread)
        new = proxy.router.backing_of(thread)
        assert new != thread
    store = await MongoStore.open(url)
    try:
        assert store.moves is not None
        place = await store.moves.place(thread)
        assert place is not None and place.backing_id == new and place.lineage == (new,)
        assert place.moving is None
        records = await store.moves.records(thread)
        assert [r["outcome"] for r in records] == ["begin", "committed"]
        assert records[1]["new_backing_id"] == new and records[1]["size"] is not None
        # The rewrite's lines, before any index worker: another sidecar can write the session.
        lines = await store.session_records(new)
        assert [line.raw for line in lines] == [b"{}"]
    finally:
        await store.aclose()
    assert [r.outcome for r in journal.records()] == ["committed"]


@needs_mongo
async def test_a_commit_the_store_refuses_is_no_commit_and_leaves_nothing(
        tmp_path: Path, url: str) -> None:
    manager, journal, harness = sidecar(tmp_path, url)
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (proxy, client):
        thread = await start(client)
        # Another sidecar on the same store moved the thread meanwhile.
        store = await MongoStore.open(url)
        try:
            assert store.moves is not None
            assert (await store.moves.claim(thread, thread, OTHER, now=time.time(), stale_before=0))[0]
            assert await store.moves.commit(thread, thread, OTHER)
            await swap_once(manager, client, thread)
            assert proxy.router.backing_of(thread) == thread  # stays where it was
            place = await store.moves.place(thread)
            assert place is not None and place.backing_id == OTHER and place.moving is None
            ends = [r for r in await store.moves.records(thread) if r["outcome"] != "begin"]
        finally:
            await store.aclose()
        answer = await client.prompt(thread, "chunks:1")  # and goes on
        assert answer["result"]["stopReason"] == "end_turn"
    [record] = journal.records()
    assert record.outcome == "failed" and f"it is on session {OTHER}" in record.reason
    assert [r["outcome"] for r in ends] == ["failed"]
    assert harness.rewrites == []  # the claim refused: nothing written


class _Leases:
    """Redis's move leases as the mover uses them, telling when each is let go."""

    def __init__(self, events: list[str]) -> None:
        self.events, self.held = events, set[str]()

    @asynccontextmanager
    async def holding(self, thread_id: str) -> AsyncIterator[bool]:
        self.held.add(thread_id)
        try:
            yield True
        finally:
            self.held.discard(thread_id)
            self.events.append("lease released")

    async def gone(self, thread_id: str) -> bool:
        return thread_id not in self.held


@needs_mongo
async def test_a_failed_move_ends_in_the_store_before_its_lease_is_let_go(tmp_path: Path, url: str) -> None:
    """The review of the merge: the lease went first, and a load on another sidecar in between
    found the lease gone and the claim still there, and recorded this live sidecar's move
    abandoned ("its liminal stopped during the move")."""
    events: list[str] = []
    manager, _, _ = sidecar(tmp_path, url)
    manager.mover.leases = _Leases(events)  # type: ignore[assignment]
    shared = manager.mover.shared
    assert shared is not None
    ended = shared.ended

    async def ending(record: SwapRecord) -> None:
        events.append(f"ended {record.outcome}")
        await ended(record)

    shared.ended = ending  # type: ignore[method-assign]
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (_, client):
        thread = await start(client)
        store = await MongoStore.open(url)
        try:
            assert store.moves is not None  # another sidecar moved it: this one's commit is refused
            assert (await store.moves.claim(thread, thread, OTHER, now=time.time(), stale_before=0))[0]
            assert await store.moves.commit(thread, thread, OTHER)
            await swap_once(manager, client, thread)
        finally:
            await store.aclose()
    assert events[:2] == ["ended failed", "lease released"], events


async def test_a_shared_store_that_does_not_answer_moves_nothing(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    manager, journal, harness = sidecar(tmp_path, f"mongodb://127.0.0.1:{port}/liminal")
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (proxy, client):
        thread = await start(client)
        await swap_once(manager, client, thread)
        assert proxy.router.backing_of(thread) == thread
        answer = await client.prompt(thread, "chunks:1")
        assert answer["result"]["stopReason"] == "end_turn"
    [record] = journal.records()
    assert record.outcome == "failed" and "the shared store could not be reached" in record.reason
    assert harness.rewrites == []


@needs_mongo
async def test_a_claim_a_dead_sidecar_left_is_recorded_abandoned_and_taken_over(
        tmp_path: Path, url: str) -> None:
    manager, _, _ = sidecar(tmp_path, url)
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (proxy, client):
        thread = await start(client)
        store = await MongoStore.open(url)
        try:
            assert store.moves is not None
            # A sidecar began a move of the thread 10 minutes ago and died before its commit.
            assert (await store.moves.claim(thread, thread, OTHER, now=time.time() - 600,
                                            stale_before=0))[0]
            await swap_once(manager, client, thread)
            new = proxy.router.backing_of(thread)
            assert new != thread
            place = await store.moves.place(thread)
            assert place is not None and place.backing_id == new and place.moving is None
            assert not await store.moves.commit(thread, thread, OTHER)  # too late for it
            outcomes = [(r["new_backing_id"], r["outcome"]) for r in await store.moves.records(thread)]
        finally:
            await store.aclose()
    assert sorted(outcomes) == sorted([(OTHER, "abandoned"), (new, "begin"), (new, "committed")])


@needs_mongo
async def test_liminal_swaps_on_another_sidecar_shows_the_moves_it_did_not_make(
        tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from liminal.cli import main

    manager, _, _ = sidecar(tmp_path, url)
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (proxy, client):
        thread = await start(client)
        await swap_once(manager, client, thread)
        new = proxy.router.backing_of(thread)
    other = tmp_path / "other-home"  # another machine's home: an empty journal, the same store
    other.mkdir()
    (other / "config.toml").write_text(f'[store]\nurl = "{url}"\n')
    monkeypatch.setenv("LIMINAL_HOME", str(other))
    capsys.readouterr()
    assert await anyio.to_thread.run_sync(main, ["swaps", "--json"]) == 0
    shown = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["thread_id"], r["new_backing_id"], r["outcome"]) for r in shown] == [(thread, new, "committed")]
    # The store down: this machine's journal (empty), and one line saying so.
    (other / "config.toml").write_text('[store]\nurl = "mongodb://127.0.0.1:1/liminal?serverSelectionTimeoutMS=500"\n')
    assert await anyio.to_thread.run_sync(main, ["swaps"]) == 0
    said = capsys.readouterr()
    assert "no moves yet" in said.out and "the shared store could not be read" in said.err


@needs_mongo
async def test_a_start_after_dying_past_the_stores_commit_keeps_the_move(tmp_path: Path, url: str) -> None:
    # liminal died between the shared store's commit and its own journal's (``swap.committed``):
    # the next start keeps the rewrite, journals the commit, and opens the thread on it.
    thread, new = "22222222-2222-4222-8222-222222222222", "33333333-3333-4333-8333-333333333333"
    manager, journal, harness = sidecar(tmp_path, url)
    rewrite = tmp_path / f"{new}.jsonl"
    rewrite.write_text("{}\n")
    journal.append(SwapRecord(thread_id=thread, old_backing_id=thread, new_backing_id=new,
                              outcome="begin", reason="r", started_at=time.time(), duration_s=0.0,
                              tokens_before=None, tokens_after=None, harness="fake",
                              new_path=str(rewrite)))
    store = await MongoStore.open(url)
    try:
        assert store.moves is not None
        assert (await store.moves.claim(thread, thread, new, now=time.time(), stale_before=0))[0]
        assert await store.moves.commit(thread, thread, new)
    finally:
        await store.aclose()
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (proxy, client):
        await client.request("initialize", {"protocolVersion": 1})  # after the start's clean-up
        assert proxy.router.backing_of(thread) == new
    assert rewrite.exists() and harness.discarded == []
    assert [(r.new_backing_id, r.outcome) for r in journal.records()] == [(new, "committed")]
    assert journal.unfinished() == []


@needs_mongo
async def test_another_sidecar_records_a_dead_move_abandoned_and_opens_a_committed_one(
        url: str, tmp_path: Path) -> None:
    from liminal.kernel import whereabouts

    thread, new = "44444444-4444-4444-8444-444444444444", "55555555-5555-4555-8555-555555555555"
    shared = StoreJournal(opener(url), 60.0, tmp_path)  # type: ignore[arg-type]
    try:
        store = await shared.store()
        moves = await shared.log()
        # A sidecar began a move a moment ago and died: its lease (Redis) is gone.
        assert (await moves.claim(thread, thread, OTHER, now=time.time(), stale_before=0))[0]
        await shared.abandon_dead(thread)  # not known dead yet: alive, maybe
        assert (await moves.place(thread)).moving == OTHER  # type: ignore[union-attr]
        await shared.abandon_dead(thread, lease_gone=True)
        place = await moves.place(thread)
        assert place is not None and place.moving is None and place.backing_id == thread
        assert [(r.new_backing_id, r.outcome) for r in await shared.records(thread)] == [(OTHER, "abandoned")]

        class Port:  # what ``whereabouts.bind_further`` asks of the router
            def __init__(self) -> None:
                self.bound: dict[str, str] = {}
                self.adopted: list[str] = []

            def backing_of(self, t: str) -> str:
                return self.bound.get(t, t)

            def adopt(self, backing: str, t: str) -> None:
                self.adopted.append(backing)

            def bind(self, t: str, backing: str) -> None:
                self.bound[t] = backing

        port = Port()
        assert whereabouts.bind_further(port, thread, await whereabouts.store_lineage(store, thread)) is None  # on its own session
        # Then a sidecar committed a move and died before anyone heard of it (no index yet).
        assert (await moves.claim(thread, thread, new, now=time.time(), stale_before=0))[0]
        assert await moves.commit(thread, thread, new)
        assert whereabouts.bind_further(port, thread, await whereabouts.store_lineage(store, thread)) == new  # type: ignore[arg-type]
        assert port.backing_of(thread) == new
    finally:
        await shared.aclose()


@needs_mongo
async def test_a_thread_another_sidecar_cleared_opens_on_an_empty_session_here(tmp_path: Path, url: str) -> None:
    # /clear on A puts the thread on a session the CLI writes only at its first turn: B, on the
    # same store, has no file of it and no line in the store; its load reopens the thread empty
    # (as A's own restart would), where it went to the agent, which cannot find that session.
    from tests.integration.test_commands_scripted import opened, run_liminal, said

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    found: dict[str, str] = {}

    async def on_a(proxy: object) -> None:
        thread = found["thread"] = await opened(proxy)  # type: ignore[arg-type]
        await said(proxy, thread, "turn alpha used:5000")  # type: ignore[arg-type]
        assert "Context cleared" in await said(proxy, thread, "/clear")  # type: ignore[arg-type]

    async def on_b(proxy: object) -> None:
        thread = await opened(proxy, found["thread"])  # type: ignore[arg-type]
        await said(proxy, thread, "turn bravo used:3000")  # type: ignore[arg-type]

    # The agent writes a session's file at its first turn, and loads only a session with one,
    # as Claude Code does.
    await run_liminal(a, on_a, LIMINAL_STORE_URL=url, AGENT_CLAUDE_NEW_EMPTY="1")
    await run_liminal(b, on_b, LIMINAL_STORE_URL=url, AGENT_CLAUDE_NEW_EMPTY="1", AGENT_LOAD_NEEDS_FILE="1")
    store = await MongoStore.open(url)
    try:
        assert store.moves is not None
        ends = [(r["move"], r["opened"], r["outcome"]) for r in await store.moves.records(found["thread"])
                if r["outcome"] != "begin"]
    finally:
        await store.aclose()
    assert ends == [("/clear", "empty", "committed"), ("reopen", "empty", "committed")]
