"""Swaps for a client that starts liminal for every prompt: acpx 0.1.15 (``fixtures/harness/
acpx.py``) through ``liminal acp`` on both Claude Code generations and both Codex adapters.

acpx loads its saved session in a new liminal for every prompt, and closes liminal's input as
soon as the answer is in (SIGTERM 0.1 s later, SIGKILL at 1.6 s). Found with thresholds
30k/18k over 8 prompts past the trigger: every swap was abandoned ("stopped during the swap
(CancelledError)"), as the stop cut the swap decided at the turn end short, and the next
process loaded the thread past its trigger without swapping it either; the context grew
without bound. Now a swap decided at the turn end is given ``proxy.stop_grace_seconds`` to
finish, and a thread loaded past its trigger swaps before its first prompt: whichever commits,
each prompt starts under the trigger. With no grace (``proxy.stop_grace_seconds = 0``) every
swap is the load's, which shows that path alone.

Each turn adds about 7k tokens (two reads of ~12 KB), so the context crosses 30k every two or
three prompts; six prompts make two swaps. Each acpx prompt is a process start, a load and a
turn: 4-8 s; a test about a minute per adapter.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fixtures.harness import Acpx, Adapter, Reply, Rig, Scenario, Shell, Text, ToolCall, clients
from fixtures.harness.anthropic import tokens
from liminal.kernel.journal import SwapJournal, SwapRecord
from tests.acceptance.conftest import adapter_fixture
from tests.support import storesize
from tests.support.acp_thread import liminal, liminal_client

adapter = adapter_fixture(["claude-zed", "claude-agent", "codex-zed", "codex-agent"])

HIGH, TARGET = 30_000, 18_000
PROMPTS = [f"turn {n}: BIG read please" for n in range(6)]
TURN = 8_000  # the most a BIG turn adds (two reads of ~12 KB and the answer), with room
EXCEPTION_NAME = re.compile(r"\b[A-Z]\w*(Error|Exception)\b|Cancelled")


def scenario(rig: Rig) -> Scenario:
    """Two reads of about 12 KB a turn. claude-zed, behind a client with a terminal (acpx), offers
    its Bash only through the client's terminal, which acpx 0.1.15 cannot run (it spawns the
    command line without a shell): there the reads are of files, through the client
    (``mcp__acp__Read``, answered by acpx's ``fs/read_text_file``)."""
    if rig.adapter.name != "claude-zed":
        reads: tuple[Shell | ToolCall, ...] = (Shell("seq 10000 12000", "Read a lot"),
                                              Shell("seq 20000 22000", "Read more"))
    else:
        reads = ()
        for name, first in (("a", 10000), ("b", 20000)):
            path = rig.home.project / f"big-{name}.txt"
            path.write_text("".join(f"{n}\n" for n in range(first, first + 2001)))
            reads += (ToolCall("mcp__acp__Read", {"file_path": str(path)}),)
    return Scenario().add("BIG", Reply((Text("Two reads."), *reads)), "read them")


def configure(rig: Rig, *, swaps: bool = True) -> None:
    rig.home.liminal_home.mkdir(parents=True, exist_ok=True)
    (rig.home.liminal_home / "config.toml").write_text(
        f"[swap]\nenabled = {str(swaps).lower()}\nhigh_tokens = {HIGH}\ntarget_tokens = {TARGET}\n"
        "hold_timeout_seconds = 60\n")


@pytest.fixture
def acpx(rig: Rig) -> Iterator[Acpx]:
    reason = clients()["acpx"].missing_reason()
    if reason is not None:
        pytest.skip(f"acpx: {reason}")
    rig.server.script = scenario(rig)
    configure(rig)
    client = Acpx(rig)
    client.new_session()
    yield client
    client.stop()


@dataclass
class Run:
    contexts: list[list[int]]  # each prompt's model calls, in tokens as the fake model counts
    swaps: list[SwapRecord]

    @property
    def committed(self) -> list[SwapRecord]:
        return [s for s in self.swaps if s.outcome == "committed"]

    def said(self) -> str:
        return json.dumps({"contexts": self.contexts, "swaps": [
            (s.outcome, s.tokens_before, s.tokens_after, s.reason) for s in self.swaps]}, indent=1)


def converse(rig: Rig, acpx: Acpx, prompts: list[str], run: Run | None = None) -> Run:
    """Every prompt in a liminal of its own; every prompt answered. Each one's model calls are
    added to ``run``'s, and its swaps are the journal's."""
    run = run or Run([], [])
    for text in prompts:
        seen = len(rig.server.views())
        answer = acpx.prompt(text)
        assert answer.returncode == 0 and answer.stop_reason == "end_turn", answer.said() + rig.stderr_tail()
        assert "read them" in answer.stdout, answer.said()
        run.contexts.append([tokens(len(v.raw)) for v in rig.server.views()[seen:]])
    run.swaps = SwapJournal(rig.home.liminal_home / "swaps.jsonl").records()
    return run


def check_one_thread(rig: Rig, acpx: Acpx, run: Run) -> str:
    """acpx keeps one session, on the thread's id (acpx 0.1.15 never asks ``session/list``
    itself); liminal lists the thread once, to a client and in ``liminal threads``, none of the
    sessions it moved onto. Returns the thread."""
    [record] = acpx.sessions()
    thread = record["acpSessionId"]
    with liminal_client(rig) as client:  # also lets the index worker drain every spool
        client.initialize()
        listed = [s["sessionId"] for s in client.request("session/list", {"cwd": str(rig.home.project)})
                  ["sessions"]]
    assert listed == [thread], (listed, run.said())
    assert {s.thread_id for s in run.swaps} == {thread}, run.said()
    threads = json.loads(liminal(rig, "threads", "--json"))
    assert [t["id"] for t in threads] == [thread], threads
    return thread


def store_size(home: Path) -> dict[str, int]:
    """What the store holds after the run (reported; the store's growth per load is another
    test's to bound)."""
    db = home / "liminal.db"
    with sqlite3.connect(db) as con:
        messages, replayed = con.execute("SELECT count(*), coalesce(sum(replayed), 0) FROM messages").fetchone()
        frames, frame_bytes = con.execute("SELECT count(*), coalesce(sum(size), 0) FROM frames").fetchone()
    files = sum(p.stat().st_size for p in home.glob("liminal.db*"))
    return {"db_bytes": files, "messages": messages, "replayed": replayed, "frames": frames,
            "frame_bytes": frame_bytes}


def test_swaps_commit_for_a_client_that_starts_liminal_for_every_prompt(
        adapter: Adapter, rig: Rig, acpx: Acpx) -> None:
    run = converse(rig, acpx, PROMPTS)
    assert len(run.committed) >= 2, run.said()
    for swap in run.swaps:  # what was not committed says why in words
        assert not EXCEPTION_NAME.search(swap.reason), run.said()
    # No prompt goes past the trigger by more than its own turn: the swap the last turn end
    # decided committed in the stop's grace, or the load swapped the thread before this prompt.
    # Without either the context grew to 47k by the sixth prompt.
    for n, calls in enumerate(run.contexts):
        assert max(calls) <= HIGH + TURN, (n, run.said())
    check_one_thread(rig, acpx, run)
    print(f"{adapter.name}: {len(PROMPTS)} per-prompt turns, store {store_size(rig.home.liminal_home)}")
    # Each process loads the thread, and the agent (or liminal, for a moved thread) replays its
    # history: none of it is stored again (tests/support/storesize.py; the bound against the same
    # turns in one process is tests/acceptance/test_load_store.py's).
    measured = storesize.measure(rig.home.liminal_home / "liminal.db")
    assert measured.replayed == 0 and measured.replayed_messages == 0, measured


def test_a_thread_loaded_past_its_trigger_swaps_before_its_first_prompt(
        adapter: Adapter, rig: Rig, acpx: Acpx) -> None:
    """Three prompts with swaps off carry the thread past its trigger; with swaps on, the next
    process loads it there and swaps it before its first prompt, which waits for the swap and
    goes to the new session. Before, the load did nothing, the prompt went to the whole context,
    and the swap its turn end decided was cut short by the client's exit."""
    configure(rig, swaps=False)
    run = converse(rig, acpx, PROMPTS[:3])
    assert max(run.contexts[-1]) >= HIGH and run.swaps == [], run.said()
    configure(rig, swaps=True)
    run = converse(rig, acpx, PROMPTS[3:4], run)
    [swap] = run.swaps
    assert swap.outcome == "committed" and "when the thread was loaded" in swap.reason, run.said()
    assert swap.tokens_before is not None and swap.tokens_before >= HIGH, run.said()
    assert run.contexts[-1][0] < HIGH, run.said()  # the prompt went to the new session
    check_one_thread(rig, acpx, run)
