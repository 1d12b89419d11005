"""A client that starts liminal for every prompt (acpx, a headless script, an editor that
restarts) loads the thread each time, and the agent replays its whole history: the store
records what is new of each load, never the history again. On a real ``liminal acp`` with its
index worker and the scripted agent, which replays every turn it was given, as a real adapter
replays a session (``$AGENT_REPLAY_ALL``): the store after N turns in N processes within the
bound ``tests.support.storesize`` states of the store after the same turns in one process.
The real CLIs' side is tests/acceptance/test_load_store.py.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest

from liminal.config import load
from liminal.dashboard.reader import Reader
from liminal.store.records import conversation
from liminal.store.sqlite import SqliteStore
from tests.integration.test_commands_scripted import opened, run_liminal, said
from tests.support.proxy_process import REPO, ProxyProcess
from tests.support.storesize import measure

pytestmark = pytest.mark.anyio
TURNS = 6


def prompt(n: int) -> str:
    return f"turn {n} chunks:4 size:1500 used:{1000 * n}"


async def one_process(home: Path) -> str:
    threads: list[str] = []

    async def body(proxy: ProxyProcess) -> None:
        threads.append(await opened(proxy))
        for n in range(1, TURNS + 1):
            await said(proxy, threads[0], prompt(n))

    await run_liminal(home, body, AGENT_REPLAY_ALL="1")
    return threads[0]


async def per_prompt(home: Path) -> str:
    threads: list[str] = []
    for n in range(1, TURNS + 1):
        async def body(proxy: ProxyProcess, n: int = n) -> None:
            threads.append(await opened(proxy, threads[0] if threads else None))
            await said(proxy, threads[0], prompt(n))

        await run_liminal(home, body, AGENT_REPLAY_ALL="1")
    return threads[0]


async def test_a_process_per_prompt_stores_no_more_than_one_process_and_its_loads_own_frames(
        tmp_path: Path) -> None:
    alone, each = tmp_path / "one", tmp_path / "each"
    thread_alone, thread = await one_process(alone), await per_prompt(each)

    stores = {}
    for name, home, tid in (("one", alone, thread_alone), ("each", each, thread)):
        store = await SqliteStore.open(home / "liminal-home" / "liminal.db", readonly=True)
        try:
            stores[name] = (await store.census(), await store.messages(tid))
        finally:
            await store.aclose()
    (census_one, messages_one), (census_each, messages_each) = stores["one"], stores["each"]

    # Each turn once, as in one process; nothing replayed kept, nothing repeated.
    said_each = [(m.kind, m.text) for m in conversation(messages_each) if m.kind in ("user", "agent")]
    assert said_each == [(m.kind, m.text) for m in conversation(messages_one) if m.kind in ("user", "agent")]
    assert [text for kind, text in said_each if kind == "user"] == [prompt(n) for n in range(1, TURNS + 1)]
    assert not [m for m in messages_each if m.replayed]
    assert census_each.repeated == census_one.repeated == 0
    assert census_each.messages == census_one.messages + 1  # the note of the last load
    # Nothing of a replay stored, and the bound (tests.support.storesize).
    one = measure(alone / "liminal-home" / "liminal.db")
    several = measure(each / "liminal-home" / "liminal.db")
    assert (several.replayed, several.replayed_messages) == (0, 0)
    assert several.stored <= one.stored + several.state + several.note, (several, one)

    # The dashboard's transcript and search: each turn once, numbered as it was said.
    reader = Reader(load({"home": each / "liminal-home"}, env={}))
    try:
        turns = (await reader.thread(thread))["transcript"]["turns"]
        assert [t["n"] for t in turns] == list(range(1, TURNS + 1))
        hits = (await reader.search("turn 3 chunks"))["hits"]
        assert [h["turn"] for h in hits if h["turn"] is not None] == [3], hits
    finally:
        await reader.aclose()

    env = {**os.environ, "LIMINAL_HOME": str(each / "liminal-home"),
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with anyio.fail_after(120):
        done = await anyio.run_process([sys.executable, "-m", "liminal", "history", thread], env=env)
    history = done.stdout.decode()
    for n in range(1, TURNS + 1):
        assert history.count(f"> {prompt(n)}\n") == 1, history
