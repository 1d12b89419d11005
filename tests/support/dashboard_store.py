"""A store of three threads, written through the store's own API as the indexer leaves it, for
the dashboard's tests and bench: a long Claude Code thread with swaps, a mark and a ``/clear``
(one tool output holding a fact that a swap cut, with the recall key to it), a short Codex
thread, and an archived one. ``long_thread`` makes a thread of any number of turns (the bench's
1,000-turn thread)."""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from liminal.gradient.recall import RecallKey, marker
from liminal.kernel.journal import SwapRecord
from liminal.store.base import Store
from liminal.store.records import Batch, MessageRecord, SessionRecord, ThreadUpdate
from liminal.store.sqlite import SqliteStore

START = 1_795_000_000.0
FACT = "The flux capacitor needs exactly 1.21 gigawatts, delivered by the Tannhauser relay."
FLUX = "11111111-1111-4111-8111-111111111111"
CODEX = "22222222-2222-4222-8222-222222222222"
OLD = "33333333-3333-4333-8333-333333333333"
CLAUDE = "@agentclientprotocol/claude-agent-acp"
CODEX_ACP = "@zed-industries/codex-acp"


@dataclass
class Writer:
    """One thread's messages, one turn at a time: ids and orders as the deriver makes them."""

    thread: str
    connection: str
    t: float
    seq: int = 0
    messages: list[MessageRecord] = field(default_factory=list)
    turn: str | None = None
    window: int = 200_000  # the model's, as each usage point says it

    def _next(self, step: float = 1.0) -> tuple[str, float, str]:
        self.seq += 1
        self.t += step
        fid = f"{self.connection}:{self.seq:010d}"
        return fid, self.t, f"{self.t:017.6f}|{fid}"

    def add(self, kind: str, text: str = "", *, tool: str | None = None, status: str | None = None,
            data: dict[str, Any] | None = None, turn: bool = True, step: float = 1.0) -> MessageRecord:
        fid, t, order = self._next(step)
        m = MessageRecord(fid, self.thread, self.turn if turn else None, t, order, kind, text, tool,
                          status, data or {}, backing_id=self.thread)
        self.messages.append(m)
        return m

    def prompt(self, text: str) -> MessageRecord:
        fid, t, order = self._next(30.0)
        self.turn = fid
        m = MessageRecord(fid, self.thread, fid, t, order, "user", text, backing_id=self.thread)
        self.messages.append(m)
        return m

    def turn_of(self, prompt: str, answer: str, used: int, *, tool: tuple[str, str, str] | None = None,
                calls: tuple[int, ...] = ()) -> None:
        """A whole turn: the prompt, a usage point per model call (``calls``, then ``used``),
        a tool call (id, title, output), the answer, the turn's end."""
        self.prompt(prompt)
        for c in calls:
            self.add("usage", data={"used": c, "size": self.window})
        if tool is not None:
            self.add("tool_call", tool[1], tool=tool[0], status="completed",
                     data={"title": tool[1], "rawOutput": tool[2]})
        self.add("agent", answer)
        self.add("usage", data={"used": used, "size": self.window})
        self.add("turn_end", status="end_turn")

    def move(self, move: str, before: int | None, after: int | None, new: str, *, old: str,
             reason: str = "", cost: dict[str, Any] | None = None) -> None:
        record = SwapRecord(self.thread, old, new, "committed", reason or move, self.t + 1, 0.42,
                            before, after, cost=cost, move=move, cwd="/home/dev/flux")
        self.add("swap", move, status="committed", data=asdict(record))

    def mark(self, name: str, backing: str, offset: int) -> None:
        _, t, order = self._next()
        self.messages.append(MessageRecord(f"mark:{self.thread}:{name}", self.thread, None, t, order,
                                           "mark", name, data={"backing_id": backing, "offset": offset}))


def claude_tool_result(session: str, record_uuid: str, tool_id: str, text: str) -> bytes:
    """The line Claude Code writes for a tool's result (what a recall key names)."""
    return json.dumps({
        "parentUuid": None, "isSidechain": False, "type": "user", "uuid": record_uuid,
        "sessionId": session, "timestamp": "2026-11-20T10:00:00.000Z",
        "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": tool_id, "content": text}]}},
        separators=(",", ":")).encode()


def flux_thread() -> tuple[Writer, list[SessionRecord], ThreadUpdate, list[str]]:
    """The long Claude Code thread: 12 turns, swaps after turns 5 and 10, a mark at turn 3, the
    fact in turn 2's tool output, cut by the first swap (its key in the rewrite's lines)."""
    w = Writer(FLUX, "conn-flux", START)
    backings = [FLUX, str(uuid.UUID(int=0xA1, version=4)), str(uuid.UUID(int=0xA2, version=4))]
    records: list[SessionRecord] = []
    tool_uuid = "5e1f0000-0000-4000-8000-000000000002"
    used = 14_000
    for n in range(1, 13):
        tool = None
        if n == 2:
            tool = ("toolu_fact", "Read docs/flux.md", "# Flux notes\n" + FACT + "\n" + "detail line\n" * 40)
            records.append(SessionRecord(SessionRecord.make_id(FLUX, 5000), FLUX, FLUX, 5000, tool_uuid,
                                         "user", "2026-11-20T10:00:00.000Z", None, ("toolu_fact",),
                                         tool[2], claude_tool_result(FLUX, tool_uuid, "toolu_fact", tool[2])))
        elif n % 3 == 0:
            tool = (f"toolu_{n}", f"Run pytest -k case{n}", f"{n * 7} passed in 1.{n}s")
        calls = (used + 3_000, used + 9_000)
        used += 16_000
        w.turn_of(f"Step {n} of the flux work: make the relay hold at load {n}.",
                  f"Done with step {n}; the relay holds at load {n}.", used, tool=tool, calls=calls)
        if n == 3:
            w.mark("relay-ok", FLUX, 9000)
        if n == 5:
            w.move("swap", used, 38_000, backings[1], old=FLUX,
                   reason=f"context {used} tokens >= 90000: a rebuild pays back in 3 calls",
                   cost={"rebuild": 41_000.0, "saves_per_call": 5_300.0, "payback_calls": 3.2, "idle": False})
            used = 38_000
            key = RecallKey(FLUX, tool_uuid, 0)
            head = {"type": "user", "sessionId": backings[1], "content": "# Flux notes" + marker(2100, key)}
            records.append(SessionRecord(SessionRecord.make_id(backings[1], 0), backings[1], FLUX, 0, None,
                                         "user", None, None, (), "", json.dumps(head).encode(), own=True))
        if n == 10:
            w.move("swap", used, 41_000, backings[2], old=backings[1],
                   reason=f"context {used} tokens >= 90000: a rebuild pays back in 2 calls",
                   cost={"rebuild": 44_000.0, "saves_per_call": 6_100.0, "payback_calls": 2.1, "idle": False})
            used = 41_000
            key = RecallKey(FLUX, tool_uuid, 0)
            head = {"type": "user", "sessionId": backings[2], "content": "# Flux notes" + marker(2100, key)}
            # (At offset 1: the lines of the rewrite itself, ``session_records``, start at 0.)
            records.append(SessionRecord(SessionRecord.make_id(backings[2], 1), backings[2], FLUX, 1, None,
                                         "user", None, None, (), "", json.dumps(head).encode(), own=True))
    update = ThreadUpdate(FLUX, START, title="Flux capacitor relay", cwd="/home/dev/flux",
                          harness=CLAUDE, state="active", backing_ids=tuple(backings))
    return w, records, update, backings


def codex_thread() -> tuple[Writer, ThreadUpdate]:
    w = Writer(CODEX, "conn-codex", START + 50_000, window=258_400)
    used = 11_000
    for n in range(1, 5):
        used += 4_000
        w.turn_of(f"Codex task {n}: tidy the parser.", f"Parser tidied, part {n}.", used, calls=(used - 2_000,))
    return w, ThreadUpdate(CODEX, START + 50_000, title="Tidy the parser", cwd="/home/dev/parser",
                           harness=CODEX_ACP, state="active", backing_ids=(CODEX,))


def old_thread() -> tuple[Writer, ThreadUpdate]:
    w = Writer(OLD, "conn-old", START - 400_000)
    w.turn_of("An old question about the build.", "An old answer.", 13_000)
    return w, ThreadUpdate(OLD, START - 400_000, title="Old build question", cwd="/home/dev/build",
                           harness=CLAUDE, state="archived", backing_ids=(OLD,), by_user=True)


def memo() -> MessageRecord:
    from liminal.lookup.memos import MEMO_THREAD

    return MessageRecord("memo-fixture", MEMO_THREAD, None, START + 10, f"{START + 10:017.6f}", "memo",
                         "The relay's spare is in drawer 4", data={"tags": ["flux"], "thread": FLUX})


async def write(store: Store) -> None:
    """The three threads (and a memo) into ``store``."""
    flux, records, flux_update, _ = flux_thread()
    codex, codex_update = codex_thread()
    old, old_update = old_thread()
    await store.write(Batch(messages=[*flux.messages, *codex.messages, *old.messages, memo()],
                            threads=[flux_update, codex_update, old_update], session_records=records))


async def build(db: Path) -> None:
    """The three threads (and a memo) in a new SQLite store at ``db``."""
    store = await SqliteStore.open(db)
    try:
        await write(store)
    finally:
        await store.aclose()


def long_thread(turns: int, thread: str = "44444444-4444-4444-8444-444444444444") -> tuple[list[MessageRecord], ThreadUpdate]:
    """One thread of ``turns`` turns, a tool call with 40 lines of output in each, a swap every
    25 turns: the bench's 1,000-turn thread."""
    w = Writer(thread, "conn-long", START)
    used = 14_000
    backing = thread
    lineage = [thread]
    for n in range(1, turns + 1):
        used += 3_000
        w.turn_of(f"Turn {n}: change module {n} and run its tests.", f"Module {n} changed; its tests pass.\n" * 3,
                  used, tool=(f"toolu_{n}", f"Run tests for module {n}", f"test line of module {n}\n" * 40),
                  calls=(used - 2_000, used - 1_000))
        if n % 25 == 0:
            new = str(uuid.UUID(int=n, version=4))
            w.move("swap", used, 40_000, new, old=backing, reason="context past the trigger",
                   cost={"rebuild": 40_000.0, "saves_per_call": 4_000.0, "payback_calls": 3.0, "idle": False})
            backing = new
            lineage.append(new)
            used = 40_000
    return w.messages, ThreadUpdate(thread, START, title=f"A thread of {turns} turns", cwd="/home/dev/long",
                                    harness=CLAUDE, state="active", backing_ids=tuple(lineage))


LOW = "88888888-8888-4888-8888-888888888888"
# A first prompt the agent never titled: the thread's title stands in as it, whole.
LOW_TITLE = ("Please go through the relay controller one step at a time and after each step run the "
             "load test again, then tell me what changed\nand keep the notes short")


def low_thresholds_thread(turns: int = 12) -> tuple[Writer, ThreadUpdate]:
    """Swaps every two turns at ``swap.high_tokens`` 30000 / ``swap.target_tokens`` 18000 set by
    hand: two calls a turn, 3k each, so four calls between swaps, each swap repaying its rebuild in
    16 (the model's summary of each cycle priced too); then, with no call since, ``/clear A`` and
    ``/undo`` at the same call, which leave 18k: more than liminal saved it cost."""
    w = Writer(LOW, "conn-low", START)
    backing = LOW
    for n in range(1, turns + 1):
        used = 18_000 + 6_000 * (2 - n % 2)
        w.turn_of(f"Step {n}: tighten relay bolt {n}." if n > 1 else LOW_TITLE, f"Bolt {n} tightened.", used,
                  calls=(used - 3_000,))
        if n == turns - 1:
            w.mark("A", backing, 100)
        if n % 2 == 0 and n < turns:
            new = str(uuid.UUID(int=0xB000 + n, version=4))
            w.move("swap", used, 18_000, new, old=backing, reason="context 30k tokens >= 30k",
                   cost={"rebuild": 19_500.0, "saves_per_call": 1_200.0, "payback_calls": 16.2, "idle": False,
                         "summary": 5_500.0})
            backing = new
    for move, before, after in (("/clear A", 29_500, 22_000), ("/undo", 22_000, 18_000)):
        new = str(uuid.UUID(int=0xC000 + before, version=4))
        w.move(move, before, after, new, old=backing)
        backing = new
    return w, ThreadUpdate(LOW, START, title=LOW_TITLE, cwd="/home/dev/relay", harness=CLAUDE,
                           state="active", backing_ids=(LOW,))


def session_files(claude_dir: Path) -> list[SessionRecord]:
    """The Flux thread's session as the model works from it now, in a Claude Code config folder:
    a real fixture session compressed by liminal's own rewrite under the thread's current
    backing id (a preamble, then 7 turns whole), and its lines as the indexer keeps them (liminal's
    own), to add to the store: the dashboard finds that the model still sees the 7 turns before
    the last swap (turns 4 to 10; 1 to 3 only in the preamble) and the two since, and the bands.
    The words are the fixture's, not the thread's: only the shape counts here."""
    from liminal.config import GradientSettings
    from liminal.harness.known import known_harnesses
    from tests.support import claude_files

    _, _, _, backings = flux_thread()
    harness = known_harnesses(GradientSettings(recent_tokens=2200, summary_tokens=1000),
                              {"CLAUDE_CONFIG_DIR": str(claude_dir)})["claude"]()
    before = claude_files.create(claude_dir, "/home/dev/flux", backings[1])
    written = harness.rewrite(before, 0, backings[2])
    lines, offset = [], 0
    for raw in written.path.read_bytes()[:written.size].splitlines(keepends=True):
        lines.append(SessionRecord(SessionRecord.make_id(backings[2], offset), backings[2], FLUX, offset,
                                   None, None, None, None, (), "", raw.rstrip(b"\n"), own=True))
        offset += len(raw)
    return lines
