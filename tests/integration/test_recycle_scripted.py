"""The recycle on a real proxy: the scripted agent without ``session/close``, one child process per
session (as the older Claude adapter's Claude Code processes), and a fake session harness.

What the real adapter adds (its processes, their memory) is in tests/acceptance/test_recycle.py;
these pin down the move: when it happens, what the new process is told, the switch, and every
failure leaving the conversation on the old process.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from liminal.harness.base import Rewritten
from liminal.kernel import recycle
from liminal.kernel.journal import SwapJournal
from liminal.kernel.recycle import Recycler
from liminal.kernel.swap import SwapManager
from liminal.proxy import Proxy
from tests.integration.test_swap_scripted import FakeHarness, settings, start
from tests.support.inproc import PipeClient, proxy_in_process
from tests.support.processes import alive, group
from tests.support.proxy_process import scripted_agent_argv

pytestmark = pytest.mark.anyio

NO_CLOSE = {"AGENT_NO_CLOSE": "1", "AGENT_CHILD_PER_SESSION": "1"}


def pids(tmp_path: Path) -> list[int]:
    """The scripted agent's processes, in the order they started."""
    return [int(p) for p in (tmp_path / "agent_in.bin.pids").read_text().split()]


def received_by(tmp_path: Path, pid: int) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / f"agent_in.bin.{pid}").read_bytes().splitlines()]


def components(tmp_path: Path, max_stale: int, hold_timeout: float = 10) -> tuple[SwapManager, Recycler]:
    swap_settings = dataclasses.replace(settings(), hold_timeout_seconds=hold_timeout)
    manager = SwapManager(swap_settings, SwapJournal(tmp_path / "swaps.jsonl"), FakeHarness(tmp_path))
    return manager, Recycler(manager.model, manager.mover, manager.harness, manager.settings, max_stale_sessions=max_stale)


async def stopped(proxy: Proxy) -> None:
    """Until the processes the proxy stops in the background (the one a move left) have exited."""
    if proxy.stopping_agents:
        await asyncio.wait(set(proxy.stopping_agents))


async def gone(pgid: int) -> None:
    """Until no process of the group is left (a signal takes a moment to be acted on)."""
    with anyio.fail_after(10):
        while group(pgid):  # noqa: ASYNC110 - /proc has no event to wait on
            await anyio.sleep(0.01)


async def pid_of_agent(client: PipeClient) -> int:
    return int((await client.request("_pid", {}))["result"]["pid"])


async def swap(manager: SwapManager, client: PipeClient, thread: str, done: int) -> None:
    await client.prompt(thread, "used:130000")
    await manager.wait_for_swaps(done)


async def test_past_the_bound_the_live_sessions_move_to_a_fresh_process(tmp_path: Path) -> None:
    manager, recycler = components(tmp_path, max_stale=1)
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager, recycler], **NO_CLOSE) as (proxy,
                                                                                                      client):
        thread = await start(client)
        await client.request("session/set_mode", {"sessionId": thread, "modeId": "plan"})
        first = await pid_of_agent(client)
        await swap(manager, client, thread, 1)
        assert recycler.stale == 1 and recycler.completed == 0  # at the bound, not past it
        assert len(group(first)) == 3  # the agent, the thread's first session, the swap's
        await swap(manager, client, thread, 2)
        # The second swap's end was the quiet moment: the move happened before its release.
        assert recycler.completed == 1 and recycler.stale == 0
        await stopped(proxy)  # the old process group is stopped in the background
        second = await pid_of_agent(client)
        assert second != first and proxy.agent.pid == second
        await gone(first)
        assert not alive(first)
        assert len(group(second)) == 2  # the agent and the one live session
        answer = await client.prompt(thread, "chunks:2")
        assert answer["result"]["stopReason"] == "end_turn"
        backing = proxy.router.backing_of(thread)
    received = received_by(tmp_path, second)
    methods = [(m.get("method"), (m.get("params") or {}).get("sessionId")) for m in received]
    assert methods[:3] == [("initialize", None), ("session/resume", backing), ("session/set_mode", backing)]
    assert received[0]["params"] == {"protocolVersion": 1}  # the client's own initialize
    assert received[1]["params"] == {"sessionId": backing, "cwd": "/work", "mcpServers": []}
    assert ("session/prompt", backing) in methods
    # The client saw none of it: no answer it did not ask for, and only its thread's id.
    asked = {m["id"] for m in client.messages() if "method" not in m}
    assert all(isinstance(i, int) for i in asked)
    sessions = {(m.get("params") or {}).get("sessionId") for m in client.messages() if m.get("method")}
    assert sessions == {thread}


async def test_a_prompt_sent_during_the_move_waits_and_reaches_the_new_process(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    manager, recycler = components(tmp_path, max_stale=0)
    env = dict(NO_CLOSE, AGENT_LATER="gate session/resume", AGENT_GATE=str(gate))
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager, recycler], **env) as (_, client):
        thread = await start(client)
        await client.prompt(thread, "used:130000")  # swaps, then moves, holding the thread
        async with anyio.create_task_group() as tg:
            answers: list[dict[str, Any]] = []

            async def prompt() -> None:
                answers.append(await client.prompt(thread, "chunks:2"))

            tg.start_soon(prompt)
            # Opening the FIFO returns once the new process waits in its resume.
            await anyio.to_thread.run_sync(lambda: gate.open("wb").close())
        assert answers[0]["result"]["stopReason"] == "end_turn"
        assert recycler.completed == 1
        first, second = pids(tmp_path)
    prompts = [m for m in received_by(tmp_path, first) if m.get("method") == "session/prompt"]
    assert len(prompts) == 1  # only the one before the move
    [moved] = [m for m in received_by(tmp_path, second) if m.get("method") == "session/prompt"]
    assert moved["params"]["prompt"][0]["text"] == "chunks:2"


@pytest.mark.parametrize("later", ["fail session/resume", "hang session/resume", "die initialize",
                                   "fail session/set_mode"])
async def test_a_failed_move_keeps_the_old_process_and_stops_the_new_one(tmp_path: Path, later: str) -> None:
    manager, recycler = components(tmp_path, max_stale=0, hold_timeout=2 if "hang" in later else 10)
    env = dict(NO_CLOSE, AGENT_LATER=later)
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager, recycler], **env) as (proxy, client):
        thread = await start(client)
        await client.request("session/set_mode", {"sessionId": thread, "modeId": "plan"})
        first = await pid_of_agent(client)
        await swap(manager, client, thread, 1)
        assert recycler.failed == 1 and recycler.completed == 0, recycler.last_failure
        await stopped(proxy)
        [_, second] = pids(tmp_path)
        await gone(second)
        assert proxy.agent.pid == first and await pid_of_agent(client) == first
        answer = await client.prompt(thread, "chunks:1")
        assert answer["result"]["stopReason"] == "end_turn"
        assert recycler.failed == 1  # the next attempt waits for two turn ends
        await client.prompt(thread, "used:1000")
        await client.prompt(thread, "used:1000")
        await recycler.wait_for(2)
        assert proxy.agent.pid == first and len(pids(tmp_path)) == 3


class UnsettledAfterRewrite(FakeHarness):
    """A session whose file stops ending with a finished turn once rewritten (as after a turn
    cancelled midway)."""

    settles = True

    def turn_settled(self, path: Path, prompt: str | None) -> bool:
        return self.settles

    def rewrite(self, path: Path, target_tokens: int, new_id: str, *, memos: Any = (), **_: Any) -> Rewritten:
        self.settles = False
        return super().rewrite(path, target_tokens, new_id)


async def test_a_file_without_its_last_turn_fails_the_move_without_holding_for_long(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recycle, "SETTLE_TIMEOUT", 0.2)
    manager = SwapManager(settings(), SwapJournal(tmp_path / "swaps.jsonl"), UnsettledAfterRewrite(tmp_path))
    recycler = Recycler(manager.model, manager.mover, manager.harness, manager.settings, max_stale_sessions=0)
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager, recycler], **NO_CLOSE) as (_, client):
        thread = await start(client)
        first = await pid_of_agent(client)
        with anyio.fail_after(5):  # well inside the hold's 10 s
            await swap(manager, client, thread, 1)
        assert recycler.failed == 1 and "finished turn" in (recycler.last_failure or "")
        assert await pid_of_agent(client) == first
        assert pids(tmp_path) == [first]  # settled before anything was started


class Unwritten(FakeHarness):
    """Sessions the CLI has written no file for (never prompted)."""

    def __init__(self, tmp: Path) -> None:
        super().__init__(tmp)
        self.missing: set[str] = set()

    def locate(self, backing_id: str, cwd: str | None) -> Path | None:
        return None if backing_id in self.missing else super().locate(backing_id, cwd)


async def test_a_thread_never_prompted_holds_the_move_back_until_its_first_turn(tmp_path: Path) -> None:
    harness = Unwritten(tmp_path)
    manager = SwapManager(settings(), SwapJournal(tmp_path / "swaps.jsonl"), harness)
    recycler = Recycler(manager.model, manager.mover, manager.harness, manager.settings, max_stale_sessions=0)
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager, recycler], **NO_CLOSE) as (_, client):
        used = await start(client)
        empty = str((await client.request("session/new", {"cwd": "/work", "mcpServers": []}))["result"]["sessionId"])
        harness.missing.add(empty)
        await swap(manager, client, used, 1)
        # Past the bound, but the empty thread has nothing to resume: no move, no failure.
        assert recycler.stale == 1 and recycler.completed + recycler.failed == 0
        assert pids(tmp_path)[1:] == []
        harness.missing.clear()
        await client.prompt(empty, "used:1000")  # its first turn: the file is there
        await recycler.wait_for(1)
        assert recycler.completed == 1


async def test_a_pending_permission_request_defers_the_move_to_the_next_quiet_turn_end(tmp_path: Path) -> None:
    manager, recycler = components(tmp_path, max_stale=0)
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager, recycler], **NO_CLOSE) as (proxy,
                                                                                                      client):
        asking = await start(client)
        other = str((await client.request("session/new", {"cwd": "/other", "mcpServers": []}))["result"]["sessionId"])
        first = await pid_of_agent(client)
        # One waiter at a time on the client: the prompt is sent, its answer awaited later.
        await client.send(json.dumps({"jsonrpc": "2.0", "id": "asking", "method": "session/prompt", "params": {
            "sessionId": asking, "prompt": [{"type": "text", "text": "ask used:1000"}]}}).encode() + b"\n")
        await client.wait_for(lambda m: m.get("method") == "session/request_permission")
        await swap(manager, client, other, 1)
        # Past the bound, but the agent waits for the client's answer: no move.
        assert recycler.stale == 1 and recycler.completed + recycler.failed == 0
        await client.send(json.dumps({"jsonrpc": "2.0", "id": 900, "result": {
            "outcome": {"outcome": "selected", "optionId": "ok"}}}).encode() + b"\n")
        answer = await client.wait_for(lambda m: m.get("id") == "asking")
        assert answer["result"]["stopReason"] == "end_turn"
        # The asking thread's turn end was the next quiet moment (the swap manager let it by).
        await recycler.wait_for(1)
        assert recycler.completed == 1
        second = await pid_of_agent(client)
        assert second != first
        for thread in (asking, other):
            answer = await client.prompt(thread, "chunks:1")
            assert answer["result"]["stopReason"] == "end_turn"
        backings = {t: proxy.router.backing_of(t) for t in (asking, other)}
    resumed = {(m["params"]["sessionId"], m["params"]["cwd"]) for m in received_by(tmp_path, second)
               if m.get("method") == "session/resume"}
    assert resumed == {(backings[asking], "/work"), (backings[other], "/other")}


async def test_the_new_process_dying_ends_the_proxy_as_the_agent(tmp_path: Path) -> None:
    manager, recycler = components(tmp_path, max_stale=0)
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager, recycler], **NO_CLOSE) as (proxy, client):
        thread = await start(client)
        await swap(manager, client, thread, 1)
        assert recycler.completed == 1
        await stopped(proxy)  # the old process has exited: that was not the agent dying
        answer = await client.prompt(thread, "chunks:1")
        assert answer["result"]["stopReason"] == "end_turn"
        died = await client.request("_die", {"code": 7})
        assert "exit code 7" in died["error"]["message"]
    # The dead agent's transport is closed, not left for the garbage collector to close after
    # the event loop is gone (an "Event loop is closed" error in whatever test runs then).
    transport = proxy.agent._transport
    assert transport is not None and transport.is_closing()
