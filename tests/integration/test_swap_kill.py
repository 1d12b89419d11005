"""liminal killed (SIGKILL) at random points of a swap, 50 times: every thread resumes afterwards,
each is listed once, the original session files are byte-identical, and nothing an unfinished
swap wrote is left.

Each trial runs the real ``liminal acp`` with the real Claude harness and gradient over session
files the scripted agent keeps as Claude Code would (``tests.support.claude_files``), so a swap
(settle, rewrite, resume, commit) takes tens of milliseconds and 50 trials fit in a minute. The
kill comes a random (seeded) time after the turn that triggers the swap: before it starts, while
it rewrites, while it resumes, after it committed. Whatever the point, the next start must find
a consistent world. (The real CLIs' side of a swap, with failures injected at named points, is
in tests/acceptance/test_swap.py.)
"""

from __future__ import annotations

import json
import random
import signal
from pathlib import Path

import anyio
import pytest

from liminal.kernel.journal import SwapJournal
from tests.support.claude_files import session_path
from tests.support.processes import alive
from tests.support.proxy_process import ProxyProcess, run_liminal

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TRIALS = int(__import__("os").environ.get("LIMINAL_KILL_TRIALS", "50"))
SEED = 20261124
CWD = "/work/project"


async def prompt(proxy: ProxyProcess, thread: str, text: str, rpc_id: int) -> dict[str, object]:
    return await proxy.request("session/prompt", {"sessionId": thread, "prompt": [
        {"type": "text", "text": text}]}, rpc_id=rpc_id)


async def test_liminal_killed_at_random_points_of_a_swap_leaves_a_consistent_world(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    outcomes: dict[str, int] = {}
    for trial in range(TRIALS):
        home = tmp_path / f"trial-{trial}"
        home.mkdir()
        delay = rng.uniform(0.0, 0.06)  # a swap here takes a few tens of milliseconds
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

        await run_liminal(home, swap_then_die, LIMINAL_SWAP_HIGH_TOKENS="100000",
                          LIMINAL_SWAP_TARGET_TOKENS="20000", LIMINAL_STORE_INDEX="false")
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
            assert answer["result"] == {"stopReason": "end_turn"}, answer
            await proxy.close_stdin()

        assert await run_liminal(home, come_back, LIMINAL_SWAP_HIGH_TOKENS="100000",
                                 LIMINAL_SWAP_TARGET_TOKENS="20000", LIMINAL_STORE_INDEX="false") == 0
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
        assert loads[-1] == (committed[-1] if committed else thread)  # resumed where it is
        outcome = records[-1].outcome if records else "no swap began"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    # The seeded delays reach the points that matter: some swaps finished, some were cut.
    print("outcomes over", TRIALS, "trials:", outcomes)
    assert outcomes.get("committed", 0) > 0
    assert sum(n for o, n in outcomes.items() if o != "committed") > 0
