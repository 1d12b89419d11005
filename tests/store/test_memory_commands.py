"""The scratchpad and dumps as the person and the model reach them (docs/memory.md), on every
store: ``/scratchpad`` through the router's hook (answered by liminal, never the agent's),
``liminal mcp``'s ``scratchpad`` tool, and a ``search_history`` answer past
``memory.dump_chars`` given as a dump that ``recall`` pages. (With the real CLIs:
``tests/acceptance/test_scratchpad.py``.)"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from liminal.config import MemorySettings
from liminal.gradient.zone import Candidate
from liminal.kernel.memory import Memory
from liminal.kernel.zone import ZoneSource
from liminal.lookup import dumps, lessons, scratchpad
from liminal.lookup.lessons import Learned
from liminal.mcp.protocol import ToolError
from liminal.mcp.tools import LiminalTools
from liminal.store.base import Store
from liminal.store.records import Batch, ThreadUpdate
from liminal.store.sqlite import SqliteStore
from tests.store.test_store_contract import message
from tests.store.test_typed_commands import ONE, TWO, typist

pytestmark = pytest.mark.anyio
THREE = "33333333-0000-4000-8000-000000000003"


async def test_the_person_shows_writes_adds_to_and_clears_the_scratchpad(store: Store) -> None:
    async with typist(store, memory=lambda opened: Memory(MemorySettings(scratchpad_chars=60), opened)) as typing:
        assert (await typing.type(ONE, "/scratchpad")).startswith("The scratchpad is empty.")
        said = await typing.type(ONE, "/scratchpad the codename is PLOVER-8812")
        assert said.startswith("Scratchpad written (27 of at most 60 characters): the model's context "
                               "holds it from the next swap on"), said
        assert (await typing.type(ONE, "/scratchpad + staging port 6543")).startswith("Scratchpad added to (45 ")
        shown = await typing.type(ONE, "/scratchpad")
        assert shown.startswith("Scratchpad (45 of at most 60 characters, last written by you at ")
        assert shown.endswith("):\nthe codename is PLOVER-8812\nstaging port 6543"), shown
        # Too long: said with the limit and its setting; nothing changed.
        assert await typing.type(ONE, "/scratchpad + " + "x" * 20) == (
            "the scratchpad would be 66 characters, over its limit of 60 (memory.scratchpad_chars) "
            "(nothing changed)")
        assert await typing.type(ONE, "/scratchpad +") == (
            "/scratchpad + TEXT adds TEXT on a line of its own (nothing changed)")
        assert (await scratchpad.read(store, ONE)).text.endswith("6543")  # type: ignore[union-attr]
        assert (await typing.type(TWO, "/scratchpad")).startswith("The scratchpad is empty.")  # its own
        assert await typing.type(ONE, "/scratchpad --clear") == (
            "Scratchpad emptied: the next swap's preamble holds none.")
        assert await scratchpad.read(store, ONE) is None


def tools_home(tmp_path: Path, dump_chars: int = 1000) -> Path:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text(f"[memory]\nscratchpad_chars = 100\ndump_chars = {dump_chars}\n")
    return home


def test_the_models_tool_reads_replaces_and_appends(tmp_path: Path) -> None:
    home = tools_home(tmp_path)

    async def run() -> None:
        tools = LiminalTools(home, thread=ONE)
        try:
            [said] = await tools.scratchpad({"action": "read"})
            assert said == "The scratchpad is empty (at most 100 characters)."
            [said] = await tools.scratchpad({"action": "replace", "text": "the codename is PLOVER-8812"})
            assert said.startswith("Scratchpad replaced. The scratchpad (27 of at most 100 characters")
            [said] = await tools.scratchpad({"action": "append", "text": "staging port 6543"})
            assert said.endswith(":\nthe codename is PLOVER-8812\nstaging port 6543"), said
            with pytest.raises(ToolError, match=r"over its limit of 100 .*nothing changed"):
                await tools.scratchpad({"action": "append", "text": "y" * 80})
            with pytest.raises(ToolError, match="append needs a text"):
                await tools.scratchpad({"action": "append", "text": " "})
            with pytest.raises(ToolError, match="no action 'erase'"):
                await tools.scratchpad({"action": "erase"})
            found = await scratchpad.read(await tools.store(), ONE)
            assert found is not None and found.by == "model"
        finally:
            await tools.aclose()

    anyio.run(run)


def test_a_long_search_answer_is_a_dump_the_model_reads_in_parts(tmp_path: Path) -> None:
    home = tools_home(tmp_path)

    async def run() -> None:
        store = await SqliteStore.open(home / "liminal.db")
        try:
            await store.write(Batch(
                messages=[message(f"c1:{n:010d}", f"turn {n}: the staging port needle {n} " + "word " * 20,
                                  thread=ONE, kind="user", turn=f"c1:{n:010d}", order=f"c1:{n:010d}",
                                  time=1_790_000_000.0 + n) for n in range(30)],
                threads=[ThreadUpdate(ONE, 100.0, title="one", backing_ids=(ONE,))]))
        finally:
            await store.aclose()
        tools = LiminalTools(home, thread=ONE)
        try:
            [short] = await tools.search_history({"query": "needle", "limit": 3})
            assert short.count("\n") == 2 and "dump:" not in short  # under the bound: whole
            [said] = await tools.search_history({"query": "needle", "limit": 30})
            assert said.startswith("30 finds for 'needle', ") and "too long to give whole" in said
            dump_id = next(m.group(0) for m in dumps.DUMP_ID.finditer(said))
            assert dump_id.startswith(f"dump:{ONE}:") and f"key {dump_id} (" in said
            text, start = "", 0
            while True:
                parts = await tools.recall({"key": dump_id, "start": start})
                assert len(parts[0]) <= 1000
                text += parts[0]
                if len(parts) == 1:
                    break
                start = int(parts[1].rsplit("start=", 1)[1].rstrip("]"))
            assert text.count("\n") == 29 and all(f"needle {n} " in text for n in range(30))
            await (await tools.store()).delete_thread(ONE)
            with pytest.raises(ToolError, match="no such dump"):
                await tools.recall({"key": dump_id})
        finally:
            await tools.aclose()

    anyio.run(run)


def test_liminal_threads_delete_takes_the_scratchpad_and_leaves_no_dump_to_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The other door (``session/delete`` through the proxy: ``tests/acceptance/test_scratchpad.py``
    and ``test_lessons.py``): the person's command removes the thread's scratchpad, and its dumps
    resolve no more, though the cache still holds their text; its lessons go (a lesson it shares
    keeps the other thread's part), so the other thread's zone is offered nothing of it; another
    thread's stay."""
    from liminal import cli

    home = tools_home(tmp_path)
    monkeypatch.setenv("LIMINAL_HOME", str(home))
    for var in ("LIMINAL_STORE_URL", "LIMINAL_CACHE_URL"):
        monkeypatch.delenv(var, raising=False)

    async def made() -> list[str]:
        store = await SqliteStore.open(home / "liminal.db")
        try:
            await store.write(Batch(
                messages=[message(f"{t}:{n:010d}", f"the staging port needle {n} " + "word " * 30, thread=t,
                                  kind="user", turn=f"{t}:{n:010d}", order=f"{t}:{n:010d}")
                          for t in (ONE, TWO) for n in range(20)],
                threads=[ThreadUpdate(t, 100.0, title=t[-1], backing_ids=(t,)) for t in (ONE, TWO)]))
        finally:
            await store.aclose()
        ids = []
        store = await SqliteStore.open(home / "liminal.db")
        try:
            keys = [*await lessons.keep(store, ONE, [Learned("The vault combination is 31-4-15."),
                                                     Learned("The staging port moved to 6543.")]),
                    *await lessons.keep(store, TWO, [Learned("The staging port moved to 6543.")])]
            assert keys[1] == keys[2]  # one lesson, a part of each
            assert {c.key for c in await offered(store) if ONE in c.origin} == set(keys)
        finally:
            await store.aclose()
        for thread in (ONE, TWO):
            tools = LiminalTools(home, thread=thread)
            try:
                await tools.scratchpad({"action": "replace", "text": f"the pad of {thread}"})
                [said] = await tools.search_history({"query": "needle", "limit": 20})
                ids.append(next(m.group(0) for m in dumps.DUMP_ID.finditer(said)))
                assert (await tools.recall({"key": ids[-1]}))[0].startswith("- [")
            finally:
                await tools.aclose()
        return [*ids, *keys[:2]]

    doomed, kept, alone, shared = anyio.run(made)
    assert cli.main(["threads", "delete", ONE, "--yes"]) == 0
    assert f"deleted thread {ONE}" in capsys.readouterr().out
    assert any((home / "cache").rglob("*")), "the cache still holds the dumps' text"

    async def after() -> None:
        tools = LiminalTools(home, thread=TWO)
        try:
            store = await tools.store()
            assert await scratchpad.read(store, ONE) is None
            assert (await scratchpad.read(store, TWO)) is not None
            with pytest.raises(ToolError, match="no such dump"):
                await tools.recall({"key": doomed})
            assert (await tools.recall({"key": kept}))[0].startswith("- [")
            assert [(lesson.key, lesson.threads) for lesson in await lessons.every(store)] == [(shared, (TWO,))]
            with pytest.raises(ToolError, match="no such lesson"):
                await tools.recall({"key": alone})
            assert "vault" not in (await tools.recall({"key": shared}))[0]
            assert not [c for c in await offered(store) if ONE in c.origin or "31-4-15" in c.shown]
        finally:
            await tools.aclose()

    anyio.run(after)


async def offered(store: Store) -> list[Candidate]:
    """What a third conversation's zone is offered of the others (every folder's)."""

    @asynccontextmanager
    async def opened() -> AsyncIterator[Store]:
        yield store

    return await ZoneSource(opened, MemorySettings(reach="all")).pool(THREE, None)
