"""The scratchpad and search dumps with the real CLIs (docs/memory.md).

One thread per adapter: ``/scratchpad TEXT`` is answered by liminal and never reaches the model;
the model appends to it with its ``scratchpad`` tool and ``/scratchpad`` shows both; the swap
after (``/optimise``) puts it at the head of the preamble, which every request of the model then
holds; a ``search_history`` answer past ``memory.dump_chars`` comes as a dump whose parts
``recall`` returns; liminal restarted and the thread loaded, the first request still holds the
scratchpad; ``session/delete`` through liminal takes it from the store, and the dump resolves
no more. (``liminal threads delete``: ``tests/store/test_memory_commands.py``.)
"""

from __future__ import annotations

import json
import re
import time

import anyio

from fixtures.harness import (
    AcpClient,
    AcpError,
    Adapter,
    ModelRequest,
    Rig,
    Scenario,
    Shell,
    Text,
    ToolCall,
)
from liminal.gradient.recall import RecallError
from liminal.gradient.summarize import scratchpad_section
from liminal.lookup import dumps, scratchpad
from liminal.store.sqlite import SqliteStore
from tests.acceptance.conftest import adapter_fixture
from tests.acceptance.test_model_tools import tool_answer
from tests.support import acp_thread
from tests.support.acp_thread import liminal_client, records, said

adapter = adapter_fixture(["claude-agent", "claude-zed", "codex-agent", "codex-zed"])
CODENAME = "the release codename is PLOVER-8812"
PORT = "staging port moved to 6543"
PAD = f"{CODENAME}\n{PORT}"
DUMP = re.compile(r"dump:[0-9a-f-]{36}:[0-9a-f]{12}")
# Said in each BIG turn's prompt and answer: a search for "read" finds seven lines of 200
# characters or so (what each CLI adds, its tool calls' records, varies), past the dump's 1000.
READ = "every number from 10000 to 12000, each line of the output whole, none missing, " * 3


def read_dump(request: ModelRequest) -> ToolCall | Text:
    """Recall the dump the last search answered with, from where the last part ended."""
    text = json.dumps(request.body)
    found = DUMP.findall(text)
    if not found:
        return Text("NO DUMP")
    more = re.findall(r"call recall with start=(\d+)", text)
    start = int(more[-1]) if more and request.tool_results else 0
    return ToolCall("mcp__liminal__recall", {"key": found[-1], "start": start})


def scenario() -> Scenario:
    return (
        Scenario()
        .add("BIG", Shell("seq 10000 12000", "Read a lot"), "read it: " + READ)
        .add("NOTE", ToolCall("mcp__liminal__scratchpad", {"action": "append", "text": PORT}), "noted")
        .add("SEARCH", ToolCall("mcp__liminal__search_history", {"query": "read", "limit": 50}), "searched")
        .add("PAGE", read_dump, read_dump, "paged")
    )


def configure(rig: Rig) -> None:
    """No automatic swap: ``/optimise``'s is the one, to a target each BIG turn is past (the
    rewrite keeps the last turn whole and summarises the rest); dumps past 1000 characters."""
    acp_thread.configure(rig, high=100_000, target=4_000)
    with (rig.home.liminal_home / "config.toml").open("a") as config:
        config.write("[memory]\ndump_chars = 1000\n")


def deleted(client: AcpClient, thread: str, timeout: float = 60) -> None:
    """``session/delete``, asked again while liminal says the thread is held: the swap manager
    holds a thread while it reads the session file at a turn's end (an adapter that sends no
    usage), and a delete then is refused "try again in a moment"."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            assert client.request("session/delete", {"sessionId": thread}, timeout=120) == {}
            return
        except AcpError as exc:
            if "try again in a moment" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def last_request(rig: Rig) -> str:
    return json.dumps(rig.server.views()[-1].body)


def test_the_scratchpad_rides_the_swap_and_the_load_and_goes_with_the_thread(adapter: Adapter, rig: Rig) -> None:
    rig.server.script = scenario()
    configure(rig)
    held = json.dumps(scratchpad_section(PAD))[1:-1]  # as the request's JSON holds it
    with liminal_client(rig) as client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        said(client, thread, "first prompt alpha")
        answer = said(client, thread, f"/scratchpad {CODENAME}")
        assert answer.startswith("Scratchpad written (35 of at most 4000 characters)"), answer
        assert not [r for r in rig.server.requests if b"PLOVER-8812" in r.raw], "a prompt to the model"
        said(client, thread, "NOTE the port for later")
        text, failed = tool_answer(rig)
        assert not failed and text.startswith("Added.") and text.endswith(PAD), text
        shown = said(client, thread, "/scratchpad")
        assert shown.startswith("Scratchpad (62 of at most 4000 characters, last written by the model at ")
        assert shown.endswith(f"; the head of the model's context after every swap):\n{PAD}"), shown
        for n in range(3):
            said(client, thread, f"turn {n} BIG read please: {READ}")
        assert held not in last_request(rig)  # no swap yet: no preamble
        assert "Context optimised" in said(client, thread, "/optimise"), records(rig)
        said(client, thread, "after the swap zulu")
        assert held in last_request(rig), last_request(rig)[-3000:]
        context = said(client, thread, "/context")
        assert f"Scratchpad (the head of every swap's preamble; /scratchpad changes it):\n{PAD}" in context

        said(client, thread, "SEARCH for what was read")
        text, failed = tool_answer(rig)
        assert not failed and "too long to give whole" in text and DUMP.search(text), text
        dump_id = DUMP.findall(text)[0]
        said(client, thread, "PAGE through the dump")
        parts = [r.tool_results[-1].text for r in rig.server.views()[-2:]]
        assert all(not r.tool_results[-1].is_error for r in rig.server.views()[-2:]), parts
        assert "call recall with start=" in parts[0] and "read please" in "".join(parts), parts
        client.settle()

    with liminal_client(rig) as client:  # liminal restarted: the thread loaded from its rewrite
        client.initialize()
        client.load_session(thread, rig.home.project)
        before = len(rig.server.views())
        said(client, thread, "after the restart yankee")
        assert held in json.dumps(rig.server.views()[before].body)
        client.settle()
        deleted(client, thread)

    async def gone() -> None:
        store = await SqliteStore.open(rig.home.liminal_home / "liminal.db")
        try:
            assert await scratchpad.read(store, thread) is None
            try:
                await dumps.resolve(store, None, dump_id)
            except RecallError as exc:
                assert "no such dump" in str(exc)
            else:
                raise AssertionError("a deleted thread's dump resolved")
        finally:
            await store.aclose()

    anyio.run(gone)
