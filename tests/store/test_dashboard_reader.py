"""The dashboard's reads on each store (``liminal.dashboard.reader``): SQLite opened read-only,
and MongoDB when ``LIMINAL_TEST_MONGO_URL`` names a server. The same three threads
(``tests.support.dashboard_store``), the same answers: the list, a thread's chart and moves, the
recall key of a cut output and its original, search over the threads and the memos, the stamp
that moves when a turn ends."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from liminal.config import load
from liminal.dashboard.reader import NotFound, Reader
from liminal.dashboard.views import Window
from liminal.store.configured import open_store
from liminal.store.records import SUMMARY_THREAD, Batch, ThreadUpdate
from tests.support import dashboard_store as fixture
from tests.support.mongo import KINDS, fresh_database

pytestmark = pytest.mark.anyio


@pytest.fixture(params=KINDS)
async def reader(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Reader]:
    async def made(url: str) -> Reader:
        settings = load({"home": tmp_path, "store.url": url}, env={})
        async with open_store(settings) as store:
            await fixture.write(store)
        return Reader(settings)

    if request.param == "mongodb":
        async with fresh_database() as url:
            found = await made(url)
            yield found
            await found.aclose()
        return
    found = await made(f"sqlite://{tmp_path / 'liminal.db'}")
    yield found
    await found.aclose()


async def test_the_same_answers_from_each_store(reader: Reader) -> None:
    rows = await reader.threads(archived=False)
    assert [r["title"] for r in rows] == ["Tidy the parser", "Flux capacitor relay"]
    assert len(await reader.threads(archived=True)) == 3
    flux = await reader.thread(fixture.FLUX)
    assert [m["at"] for m in flux["moves"]] == [15, 30]
    tools = [m for t in flux["transcript"]["turns"] for m in t["messages"] if m["kind"] == "tool_call"]
    key = f"{fixture.FLUX}:5e1f0000-0000-4000-8000-000000000002:0"
    assert tools[0]["keys"] == [key]
    assert fixture.FACT in (await reader.recall(key))["text"]
    found = await reader.search("gigawatts")
    assert [(h["thread_id"], h["turn"]) for h in found["hits"]] == [(fixture.FLUX, 2)]
    assert [m["text"] for m in (await reader.search("drawer"))["memos"]] == ["The relay's spare is in drawer 4"]
    some = Window(lo=2, hi=5)  # what a page asking for more turns gets: the transcript alone
    assert await reader.turns(fixture.FLUX, some) == (await reader.thread(fixture.FLUX, some))["transcript"]
    with pytest.raises(NotFound):
        await reader.thread("no-such-thread")


async def test_the_stamp_moves_when_a_turn_ends(reader: Reader) -> None:
    before = await reader.stamp(fixture.CODEX)
    assert before == (await reader.thread(fixture.CODEX))["stamp"]
    assert await reader.stamp(fixture.CODEX) == before  # nothing happened: the same
    whole = await reader.stamp(None)
    # The indexer's update at a turn's end (``derive``: the thread's time).
    async with open_store(reader.settings) as store:
        await store.write(Batch(threads=[ThreadUpdate(fixture.CODEX, time.time())]))
    assert await reader.stamp(fixture.CODEX) != before
    assert await reader.stamp(None) != whole


async def test_savings_against_the_clis_ceiling_or_the_setting(tmp_path: Path) -> None:
    """The CLI's own auto-compaction point (the harness's), unless ``swap.ceiling_tokens`` bounds
    the context lower: what the savings estimate compacts past without liminal."""
    async def ceilings(**given: object) -> dict[str, int]:
        settings = load({"home": tmp_path, **given}, env={})
        reader = Reader(settings)
        try:
            rows = await reader.threads(archived=False)
            flux = await reader.thread(fixture.FLUX)
        finally:
            await reader.aclose()
        found = {r["cli"]: r["savings"]["ceiling"] for r in rows}
        assert flux["ceiling"] == found["claude"]
        return found

    async with open_store(load({"home": tmp_path}, env={})) as store:
        await fixture.write(store)
    assert await ceilings() == {"claude": 167_000, "codex": 230_000}
    assert await ceilings(**{"swap.ceiling_tokens": 100_000}) == {"claude": 100_000, "codex": 100_000}


async def test_a_list_reload_reads_only_the_threads_that_changed(reader: Reader) -> None:
    store = await reader.store()
    read: list[str] = []
    messages = store.messages

    async def counted(thread_id: str, kind: str | None = None) -> list:
        read.append(thread_id)
        return await messages(thread_id, kind)

    store.messages = counted  # type: ignore[method-assign]
    first = await reader.threads(archived=False)
    # (And the model's summaries of every thread, once a load that makes a row: their pseudo-thread.)
    assert sorted(set(read)) == sorted([fixture.FLUX, fixture.CODEX, SUMMARY_THREAD])
    read.clear()
    assert await reader.threads(archived=False) == first and read == []
    # A turn ends in the Codex thread: its row is made again, the other one kept.
    codex, _ = fixture.codex_thread()
    codex.turn_of("Codex task 5: one more.", "Done.", 40_000)
    async with open_store(reader.settings) as writer:
        await writer.write(Batch(messages=codex.messages[-4:]))
    rows = await reader.threads(archived=False)
    assert set(read) == {fixture.CODEX, SUMMARY_THREAD}
    assert [r["turns"] for r in rows if r["id"] == fixture.CODEX] == [5]


async def test_the_bands_are_those_a_swap_would_keep_for_the_threads_cache(tmp_path: Path) -> None:
    """The thread page's "a swap now would keep" is the recent band the swap keeps for this
    thread: 10k on an hour's cache, as its session file's records say (before, always 20k)."""
    settings = load({"home": tmp_path, "store.url": f"sqlite://{tmp_path / 'liminal.db'}"}, env={})
    async with open_store(settings) as store:
        await fixture.write(store)
    asked: list[int | None] = []

    class Harness:
        ceiling_tokens = 167_000

        def __init__(self, life: float | None) -> None:
            self.life = life

        def locate(self, backing_id: str, cwd: str | None) -> Path:
            return tmp_path / "session.jsonl"

        def cache_life(self, path: Path) -> float | None:
            return self.life

        def bands(self, path: Path, target_tokens: int, recent_tokens: int | None = None) -> dict[str, dict[str, int]]:
            asked.append(recent_tokens)
            return {"recent": {"turns": 1, "tokens": 2_000}}

    reader = Reader(settings)
    try:
        for life in (3600.0, None):
            reader.harness = lambda cli, life=life: Harness(life)  # type: ignore[method-assign, misc]
            assert (await reader.bands(fixture.FLUX))["bands"] == {"recent": {"turns": 1, "tokens": 2_000}}
    finally:
        await reader.aclose()
    assert asked == [settings.gradient.long_cache_recent_tokens, settings.gradient.recent_tokens]


async def test_the_models_summaries_made_are_paid_in_the_saving(reader: Reader) -> None:
    """The summaries by the model (their pseudo-thread, each naming its thread) reach the
    saving of the list's row and of the thread's page: one made before the first swap, paid at
    the price the swap's record gives it."""
    import dataclasses

    from liminal.store.records import MessageRecord

    writer, _, _, _ = fixture.flux_thread()
    swaps = [dataclasses.replace(m, data={**m.data, "cost": {**(m.data.get("cost") or {}), "summary": 9_000.0}})
             for m in writer.messages if m.kind == "swap"]
    made = swaps[0].time - 5
    async with open_store(reader.settings) as store:
        await store.write(Batch(messages=[*swaps, MessageRecord(
            "summary-1", SUMMARY_THREAD, None, made, f"{made:017.6f}", "summary", "## SUMMARY\nflux",
            data={"thread": fixture.FLUX})]))
    page = await reader.thread(fixture.FLUX)
    [row] = [r for r in await reader.threads(archived=False) if r["id"] == fixture.FLUX]
    assert page["savings"]["summaries"] == row["savings"]["summaries"] == 9_000


async def test_the_ceiling_is_the_clis_compaction_on_the_models_window(tmp_path: Path) -> None:
    """A thread on a 1M-token model: Claude Code compacts past 967k there, not 167k (the page
    said "of 1000k" beside "auto-compact, at 167k"); its saving is priced against that."""
    settings = load({"home": tmp_path}, env={})
    big = fixture.Writer("55555555-5555-4555-8555-555555555555", "conn-big", fixture.START, window=1_000_000)
    for n in range(1, 4):
        big.turn_of(f"Step {n}", "ok", 20_000 * n)
    async with open_store(settings) as store:
        await store.write(Batch(messages=big.messages, threads=[ThreadUpdate(
            big.thread, fixture.START, title="A big window", harness=fixture.CLAUDE, backing_ids=(big.thread,))]))
    reader = Reader(settings)
    try:
        page = await reader.thread(big.thread)
        [row] = await reader.threads(archived=False)
    finally:
        await reader.aclose()
    assert page["ceiling"] == page["savings"]["ceiling"] == row["savings"]["ceiling"] == 967_000
    assert page["context_now"]["size"] == 1_000_000


async def test_a_forks_context_is_read_from_its_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``/fork`` records a thread whose session holds the context it was forked with, and no
    model call yet: the page and the list said "?"; now its session file says, or the page says
    why it cannot."""
    from tests.support import claude_files

    claude = tmp_path / "claude"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude))
    fork, gone = "66666666-6666-4666-8666-666666666666", "77777777-7777-4777-8777-777777777777"
    path = claude_files.create(claude, "/home/dev/flux", fork)
    settings = load({"home": tmp_path}, env={})
    async with open_store(settings) as store:
        await store.write(Batch(threads=[
            ThreadUpdate(t, fixture.START, title=title, cwd="/home/dev/flux", harness=fixture.CLAUDE,
                         backing_ids=(t,)) for t, title in ((fork, "Fork of Flux"), (gone, "Fork elsewhere"))]))
    reader = Reader(settings)
    try:
        page, elsewhere = await reader.thread(fork), await reader.thread(gone)
    finally:
        await reader.aclose()
    from liminal.harness.claude import tail

    assert page["context_now"]["used"] == tail.context_tokens(path) and page["context_now"]["used"] > 0
    assert page["context_now"]["from_file"] is True
    assert elsewhere["context_now"]["used"] is None
    assert "no session file of it on this machine" in elsewhere["context_now"]["why"]


async def test_swaps_that_lose_money_are_said_with_the_settings_to_change(tmp_path: Path) -> None:
    """Swaps every two turns at 30000/18000 set by hand: each repaid its rebuild in 16 calls,
    the next came after 4; the saving is negative, and the page and the list say why."""
    settings = load({"home": tmp_path, "swap.high_tokens": 30_000, "swap.target_tokens": 18_000}, env={})
    w, update = fixture.low_thresholds_thread()
    async with open_store(settings) as store:
        await store.write(Batch(messages=w.messages, threads=[update]))
    reader = Reader(settings)
    try:
        page = await reader.thread(fixture.LOW)
        [row] = await reader.threads(archived=False)
    finally:
        await reader.aclose()
    assert page["savings"]["saved"] < 0
    # Four calls between swaps (two turns of two calls), counted from the usage points; the last
    # swap, followed by /clear A, is not measured.
    assert page["payback"]["swaps"] == 4 and page["payback"]["between"] == 4 and page["payback"]["losing"] == 4
    said = page["payback"]["warning"]
    assert said[0].startswith("Swaps lose money on this thread: the last 4 swaps repaid their cache rebuild "
                              "in a median 16 calls, but the next swap came after 4 calls"), said
    assert said[1].startswith("Raise swap.high_tokens (30,000 now; about ")
    assert row["payback"] == page["payback"]
    # The heading is the title's first line, cut at a word.
    assert page["thread"]["heading"] == row["heading"] == (
        "Please go through the relay controller one step at a time and after each step run the…")


async def test_an_address_may_name_a_thread_by_a_prefix_as_the_commands_do(reader: Reader) -> None:
    """Before, ``#/thread/11111111`` (the id ``liminal threads`` shows) was "no thread"."""
    whole = await reader.thread(fixture.FLUX)
    assert (await reader.thread(fixture.FLUX[:8]))["stamp"] == whole["stamp"]
    assert await reader.stamp(fixture.FLUX[:8]) == await reader.stamp(fixture.FLUX)
    with pytest.raises(NotFound, match="no such thread: 4444"):
        await reader.thread("4444")
