"""liminal killed (SIGKILL) at random points of a swap, 50 times: every thread resumes afterwards,
each is listed once, the original session files are byte-identical, and nothing an unfinished
swap wrote is left.

Each trial runs the real ``liminal acp`` with the real Claude harness and gradient over session
files the scripted agent keeps as Claude Code would (``tests.support.claude_files``), so a swap
(settle, rewrite, resume, commit) takes tens of milliseconds and 50 trials fit in a minute. The
agent takes 50 ms to open a session, as a real adapter takes a while (1-6 s for Claude Code), so
the swap spends most of its window between its ``begin`` and its end in the journal. The kill
comes a random (seeded) time after the turn that triggers the swap: before it starts, while it
rewrites, while it resumes, after it committed. Whatever the point, the next start must find a
consistent world; and what the journal says at the kill must show that a share of the kills
landed inside a swap, with its rewrite on disk: a test that kills only before or after swaps
proves nothing about them (a run on main: 39 committed, 6 before, 5 inside). The same with the
real Claude Code, which writes its turn after answering: ``tests/acceptance/test_swap_kill.py``.
"""

from __future__ import annotations

import json
import os
import random
import signal
from collections import Counter
from pathlib import Path

import anyio
import pytest

from liminal.kernel.journal import SwapJournal
from tests.support.claude_files import session_path
from tests.support.processes import alive
from tests.support.proxy_process import ProxyProcess, run_liminal

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TRIALS = int(os.environ.get("LIMINAL_KILL_TRIALS", "50"))
SEED = 20261124
CWD = "/work/project"
OPEN_SECONDS = 0.05  # the scripted agent's session/resume
SETTINGS = {"LIMINAL_SWAP_HIGH_TOKENS": "100000", "LIMINAL_SWAP_TARGET_TOKENS": "20000",
            "LIMINAL_STORE_INDEX": "false", "AGENT_OPEN_SECONDS": str(OPEN_SECONDS)}


async def prompt(proxy: ProxyProcess, thread: str, text: str, rpc_id: int) -> dict[str, object]:
    return await proxy.request("session/prompt", {"sessionId": thread, "prompt": [
        {"type": "text", "text": text}]}, rpc_id=rpc_id)


def where_killed(home: Path) -> str:
    """Where the kill landed, as the journal and the files say before the next start."""
    journal = SwapJournal(home / "liminal-home" / "swaps.jsonl")
    unfinished = journal.unfinished()
    if not unfinished:
        records = journal.records()
        return "after the commit" if records and records[-1].outcome == "committed" else "before the begin"
    [begun] = unfinished
    assert begun.new_path is not None and begun.new_backing_id is not None
    if not Path(begun.new_path).exists():
        return "inside: before the rewrite was on disk"
    sent = (home / "agent_in.bin").read_bytes()
    if begun.new_backing_id.encode() in sent:
        return "inside: the agent opening the rewrite"
    return "inside: the rewrite on disk"


async def test_liminal_killed_at_random_points_of_a_swap_leaves_a_consistent_world(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    outcomes: Counter[str] = Counter()
    for trial in range(TRIALS):
        home = tmp_path / f"trial-{trial}"
        home.mkdir()
        # The swap begins a few ms after the answer and commits some 60 ms later.
        delay = rng.uniform(0.0, 0.12)
        state: dict[str, object] = {}

        async def swap_then_die(proxy: ProxyProcess, delay: float = delay,
                                state: dict[str, object] = state, home: Path = home) -> None:
            await proxy.request("initialize", {"protocolVersion": 1}, rpc_id=1)
            thread = (await proxy.request("session/new", {"cwd": CWD, "mcpServers": []},
                                          rpc_id=2))["result"]["sessionId"]
            state["thread"] = thread
            await prompt(proxy, thread, "first turn used:5000", 10)
            await prompt(proxy, thread, "the turn that triggers a swap used:130000", 11)
            original = session_path(home / "claude", CWD, thread)
            state["original"] = original.read_bytes()  # the CLI wrote this turn before answering
            await anyio.sleep(delay)  # the random point of the swap
            proxy.process.send_signal(signal.SIGKILL)

        await run_liminal(home, swap_then_die, **SETTINGS)
        outcomes[where_killed(home)] += 1
        thread = str(state["thread"])
        original_path = session_path(home / "claude", CWD, thread)
        # The reaper stops the agent liminal left; wait for it before the next liminal.
        pids = (home / "agent_in.bin.pids").read_text().split()
        with anyio.fail_after(20):
            while any(alive(int(p)) for p in pids):  # noqa: ASYNC110 - not our children
                await anyio.sleep(0.02)

        async def come_back(proxy: ProxyProcess, thread: str = thread) -> None:
            await proxy.request("initialize", {"protocolVersion": 1}, rpc_id=1)
            loaded = await proxy.request("session/load", {"sessionId": thread, "cwd": CWD,
                                                          "mcpServers": []}, rpc_id=2)
            assert "result" in loaded, loaded
            listed = await proxy.request("session/list", {}, rpc_id=3)
            ids = [s["sessionId"] for s in listed["result"]["sessions"]]
            assert ids.count(thread) == 1, ids
            answer = await prompt(proxy, thread, "after the restart used:1000", 4)
            assert answer["result"]["stopReason"] == "end_turn", answer
            await proxy.close_stdin()

        # Where the thread is at the restart: the client's load goes there (a thread the kill left
        # past its trigger swaps after the load, before its first prompt).
        where = ([r.new_backing_id for r in SwapJournal(home / "liminal-home" / "swaps.jsonl").records()
                  if r.outcome == "committed"] or [thread])[-1]
        assert await run_liminal(home, come_back, **SETTINGS) == 0
        journal = SwapJournal(home / "liminal-home" / "swaps.jsonl")
        records = journal.records()
        committed = [r.new_backing_id for r in records if r.outcome == "committed"]
        assert journal.unfinished() == []
        # The original file: what the CLI wrote, untouched by the swap (the turn after the
        # restart went to the thread's current session, which is the original only if no swap
        # committed).
        if not committed:
            assert original_path.read_bytes().startswith(bytes(state["original"]))  # type: ignore[arg-type]
        else:
            assert original_path.read_bytes() == state["original"]
        on_disk = {p.stem for p in original_path.parent.glob("*.jsonl")}
        assert on_disk == {thread, *committed}, (on_disk, records)  # no rewrite left behind
        sent = [json.loads(line) for line in (home / "agent_in.bin").read_bytes().splitlines()]
        loads = [m["params"]["sessionId"] for m in sent if m.get("method") == "session/load"]
        assert loads[-1] == where  # resumed where it is
        assert len(committed) <= 1 or "when the thread was loaded" in records[-1].reason, records
    print("where the kills landed over", TRIALS, "trials:", dict(outcomes))
    inside = sum(n for where, n in outcomes.items() if where.startswith("inside"))
    # A share of the kills inside swaps (between the begin and its end), some with the
    # rewrite on disk for the next start to remove; and some after a commit.
    assert inside >= TRIALS // 5, outcomes
    assert outcomes["inside: the agent opening the rewrite"] + outcomes["inside: the rewrite on disk"] >= TRIALS // 10, outcomes
    assert outcomes["after the commit"] >= 1, outcomes


def opening(home: Path) -> str | None:
    """The rewrite of the swap under way once the agent has been asked to open it."""
    begun = SwapJournal(home / "liminal-home" / "swaps.jsonl").unfinished()
    if not begun or begun[0].new_backing_id is None or begun[0].new_path is None:
        return None
    if begun[0].new_backing_id.encode() not in (home / "agent_in.bin").read_bytes():
        return None
    assert Path(begun[0].new_path).exists()
    return begun[0].new_path


async def test_a_client_that_closes_during_a_swap_and_kills_liminal_a_second_later_leaves_no_rewrite(
        tmp_path: Path) -> None:
    """An editor that quits closes liminal's input and, a second or two later, kills what is
    left. A swap in its resume then (a real adapter takes seconds to open a session) used to
    stay unfinished: liminal stopped the agent first (2 s for one that ignores the end of its
    input, then its kill grace) and only then the swap, so the kill came first and the rewrite
    stayed in the CLI's folder, a second session in its picker until liminal's next start. With
    no grace for swaps (``proxy.stop_grace_seconds = 0``) the swap is abandoned, and its rewrite
    removed, before the agent is stopped."""
    state = await close_during_a_long_resume(tmp_path, grace="0")
    journal = SwapJournal(tmp_path / "liminal-home" / "swaps.jsonl")
    assert journal.unfinished() == [], journal.records(begins=True)
    on_disk = {p.stem for p in session_path(tmp_path / "claude", CWD, state["thread"]).parent.glob("*.jsonl")}
    assert on_disk == {state["thread"]}, on_disk  # the rewrite is gone
    [record] = journal.records()
    assert record.outcome == "abandoned" and record.reason.startswith(
        "the client closed its connection during the swap, and proxy.stop_grace_seconds is 0"), record


async def test_a_kill_during_the_stops_grace_leaves_the_rewrite_to_the_next_start(tmp_path: Path) -> None:
    """With the grace a swap is given to finish when liminal stops (10 s by default: a client that
    starts liminal for every prompt leaves right after the answer, when a swap begins), an
    editor's kill a second after it closed liminal's input can land inside the swap: its rewrite
    is in the CLI's folder until liminal's next start, which removes it and journals why in
    words; the thread loads on the session it was on, and, past its trigger, swaps there before
    its first prompt."""
    state = await close_during_a_long_resume(tmp_path, grace="10")
    journal = SwapJournal(tmp_path / "liminal-home" / "swaps.jsonl")
    [begun] = journal.unfinished()
    assert begun.new_path is not None and exists(begun.new_path)
    thread = state["thread"]
    pids = (tmp_path / "agent_in.bin.pids").read_text().split()
    with anyio.fail_after(20):
        while any(alive(int(p)) for p in pids):  # noqa: ASYNC110 - the reaper stops it
            await anyio.sleep(0.02)

    async def come_back(proxy: ProxyProcess) -> None:
        await proxy.request("initialize", {"protocolVersion": 1}, rpc_id=1)
        loaded = await proxy.request("session/load", {"sessionId": thread, "cwd": CWD, "mcpServers": []},
                                     rpc_id=2)
        assert "result" in loaded, loaded
        answer = await prompt(proxy, thread, "after the restart used:1000", 3)
        assert answer["result"]["stopReason"] == "end_turn", answer
        await proxy.close_stdin()

    assert await run_liminal(tmp_path, come_back, **SETTINGS) == 0
    assert not exists(begun.new_path)
    cleaned, swapped = journal.records()
    assert cleaned.outcome == "abandoned" and cleaned.new_backing_id == begun.new_backing_id
    assert cleaned.reason.startswith("liminal ended during the swap (it was killed"), cleaned
    assert cleaned.move == "swap", cleaned  # shown as the swap it was, not a "move"
    assert swapped.outcome == "committed" and "when the thread was loaded" in swapped.reason, swapped
    on_disk = {p.stem for p in session_path(tmp_path / "claude", CWD, thread).parent.glob("*.jsonl")}
    assert on_disk == {thread, swapped.new_backing_id}, on_disk


def exists(path: str) -> bool:
    return Path(path).exists()


async def close_during_a_long_resume(home: Path, *, grace: str) -> dict[str, str]:
    """A swap whose resume takes 10 s; the client closes liminal's input once the agent is
    opening the rewrite, and kills liminal a second later."""
    state: dict[str, str] = {}

    async def close_during_the_resume(proxy: ProxyProcess) -> None:
        await proxy.request("initialize", {"protocolVersion": 1}, rpc_id=1)
        thread = (await proxy.request("session/new", {"cwd": CWD, "mcpServers": []},
                                      rpc_id=2))["result"]["sessionId"]
        state["thread"] = thread
        await prompt(proxy, thread, "first turn used:5000", 10)
        await prompt(proxy, thread, "the turn that triggers a swap used:130000", 11)
        with anyio.fail_after(30):
            while (rewrite := opening(home)) is None:  # noqa: ASYNC110 - another process writes it
                await anyio.sleep(0.01)
        state["rewrite"] = rewrite
        await proxy.close_stdin()
        await anyio.sleep(1.0)  # the editor's patience
        proxy.process.send_signal(signal.SIGKILL)

    await run_liminal(home, close_during_the_resume, **{**SETTINGS, "AGENT_OPEN_SECONDS": "10",
                                                        "LIMINAL_PROXY_STOP_GRACE_SECONDS": grace})
    return state
