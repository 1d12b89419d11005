"""A store an older liminal wrote, with every load's replay stored again, compacted (every backend).

The rows are literal, as the deriver before this change wrote them: every ``session/load``'s
replay became messages marked ``replayed`` (the agent's, the compressed session's that liminal
captured for a moved thread, liminal's own replay of it from the store), and every frame of it
was stored. ``Store.compact`` removes those copies and the frames they came from; what readers
show (``conversation``, search) is the same before and after, and a second run changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from liminal.store import compaction
from liminal.store.base import Store
from liminal.store.records import (
    Batch,
    FrameRecord,
    MessageRecord,
    ThreadUpdate,
    conversation,
    frame_id,
)

pytestmark = pytest.mark.anyio

# (direction, what) per frame: what is a ("load"|"answer"|"prompt"|"end", thread) or an update
# ("user"|"agent"|"commands", text), each update replayed when inside a load.
Step = tuple[str, str, str]
CONNECTIONS: dict[str, tuple[str, float, list[Step]]] = {
    # A thread begun through liminal: a turn live.
    "a": ("t1", 100.0, [("c2a", "prompt", "p1"), ("a2c", "agent", "answer one"), ("a2c", "end", "")]),
    # A process per prompt: the agent's replay of that turn, then a turn live.
    "b": ("t1", 200.0, [("c2a", "load", ""), ("a2c", "user", "p1"), ("a2c", "agent", "answer one"),
                        ("a2c", "commands", ""), ("a2c", "answer", ""),
                        ("c2a", "prompt", "p2"), ("a2c", "agent", "answer two"), ("a2c", "end", "")]),
    # The thread moved: the compressed session's replay captured, liminal's replay from the store.
    "c": ("t1", 300.0, [("c2a", "load", ""), ("a2l", "user", "[compressed] p1 p2"),
                        ("a2l", "agent", "[compressed] answers"),
                        ("l2c", "user", "p1"), ("l2c", "agent", "answer one"),
                        ("l2c", "user", "p2"), ("l2c", "agent", "answer two"),
                        ("l2c", "commands", ""), ("a2c", "answer", ""),
                        ("c2a", "prompt", "p3"), ("a2c", "agent", "answer three"), ("a2c", "end", "")]),
    # A thread from before liminal: its first load's replay is its past.
    "d": ("t2", 400.0, [("c2a", "load", ""), ("a2c", "user", "old question"),
                        ("a2c", "agent", "old answer"), ("a2c", "answer", ""),
                        ("c2a", "prompt", "q2"), ("a2c", "agent", "answer q2"), ("a2c", "end", "")]),
    # And loaded again: all of it replayed once more.
    "e": ("t2", 500.0, [("c2a", "load", ""), ("a2c", "user", "old question"),
                        ("a2c", "agent", "old answer"), ("a2c", "user", "q2"),
                        ("a2c", "agent", "answer q2"), ("a2c", "answer", "")]),
}
REPEATED = ["b:1", "b:2", "c:1", "c:2", "c:3", "c:4", "c:5", "c:6", "e:1", "e:2", "e:3", "e:4"]


def fid(short: str) -> str:
    conn, seq = short.split(":")
    return frame_id(conn, int(seq))


def old_store() -> Iterator[Batch]:
    """Each connection's frames and the messages the older deriver made of them."""
    for conn, (thread, t0, steps) in CONNECTIONS.items():
        frames: list[FrameRecord] = []
        messages: list[MessageRecord] = []
        loading, turn = False, None
        for seq, (direction, what, text) in enumerate(steps):
            time, mid = t0 + seq, frame_id(conn, seq)
            order = f"{time:017.6f}|{mid}"
            body: dict[str, Any]
            kind, method, rpc = "notification", "session/update", None
            if what in ("load", "prompt"):
                kind, method, rpc = "request", f"session/{what}", f'"{conn}{what}"'
                params: dict[str, Any] = {"sessionId": thread}
                if what == "prompt":
                    params["prompt"] = [{"type": "text", "text": text}]
                body = {"jsonrpc": "2.0", "id": f"{conn}{what}", "method": method, "params": params}
            elif what in ("answer", "end"):
                method = "session/load" if what == "answer" else "session/prompt"
                kind, rpc = "response", f'"{conn}{"load" if what == "answer" else "prompt"}"'
                body = {"jsonrpc": "2.0", "id": rpc.strip('"'),
                        "result": {} if what == "answer" else {"stopReason": "end_turn"}}
            else:
                update: dict[str, Any] = (
                    {"sessionUpdate": "available_commands_update", "availableCommands": []}
                    if what == "commands" else
                    {"sessionUpdate": f"{what}_message_chunk", "content": {"type": "text", "text": text},
                     "messageId": mid})
                body = {"jsonrpc": "2.0", "method": method, "params": {"sessionId": thread, "update": update}}
            raw = orjson.dumps(body)
            frames.append(FrameRecord(mid, conn, seq, time, direction, kind, thread, thread, method,
                                      rpc, len(raw), raw))
            if what == "load":
                loading = True
            elif what == "answer":
                loading = False
            elif what == "prompt":
                turn = mid
                messages.append(MessageRecord(mid, thread, turn, time, order, "user", text,
                                              data={"prompt": params["prompt"]}, backing_id=thread))
            elif what == "end":
                messages.append(MessageRecord(mid, thread, turn, time, order, "turn_end",
                                              status="end_turn", backing_id=thread))
                turn = None
            elif what != "commands":
                messages.append(MessageRecord(mid, thread, None if loading else turn, time, order, what,
                                              text, data={"messageId": mid}, replayed=loading,
                                              backing_id=thread))
        yield Batch(frames, messages, [ThreadUpdate(thread, t0, cwd="/w", backing_ids=(thread,))])


async def shown(store: Store) -> dict[str, list[tuple[str, str]]]:
    return {t: [(m.kind, m.text) for m in conversation(await store.messages(t))] for t in ("t1", "t2")}


async def frame_ids(store: Store) -> set[str]:
    return {f.id for f in await store.frames(limit=1000)}


async def test_a_store_an_older_liminal_wrote_loses_its_loads_copies_and_nothing_shown(
        store: Store) -> None:
    for batch in old_store():
        await store.write(batch)
    before, frames_before = await shown(store), await frame_ids(store)
    assert before["t1"] == [("user", "p1"), ("agent", "answer one"), ("turn_end", ""),
                            ("user", "p2"), ("agent", "answer two"), ("turn_end", ""),
                            ("user", "p3"), ("agent", "answer three"), ("turn_end", "")]
    assert before["t2"][:2] == [("user", "old question"), ("agent", "old answer")]
    census = await store.census()
    assert (census.threads, census.repeated) == (2, len(REPEATED))
    messages = census.messages

    gone = await store.compact()

    assert gone == 2 * len(REPEATED)  # each copy's message and its frame
    assert await shown(store) == before
    left = {m.id for t in ("t1", "t2") for m in await store.messages(t)}
    assert not left & {fid(r) for r in REPEATED}
    assert {fid("d:1"), fid("d:2")} <= left  # the past of the thread from before liminal
    assert await frame_ids(store) == frames_before - {fid(r) for r in REPEATED}
    after = await store.census()
    assert (after.messages, after.repeated) == (messages - len(REPEATED), 0)
    hits = await store.search("answer")
    assert {h.id for h in hits} == {fid(x) for x in ("a:1", "b:6", "c:10", "d:5")}
    assert await store.compact() == 0  # once a store


async def test_a_compaction_cut_short_is_finished_by_the_next(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    for batch in old_store():
        await store.write(batch)
    before, frames_before = await shown(store), await frame_ids(store)
    read = compaction.history_update
    calls = 0

    def failing(raw: bytes) -> bool:  # the store goes away a few frames in
        nonlocal calls
        calls += 1
        if calls == 5:
            raise RuntimeError("the store went away")
        return read(raw)

    monkeypatch.setattr(compaction, "history_update", failing)
    with pytest.raises(Exception, match="went away"):
        await store.compact()
    assert await shown(store) == before  # whatever was done of it, nothing shown changed
    monkeypatch.setattr(compaction, "history_update", read)
    await store.compact()
    assert await shown(store) == before
    assert await frame_ids(store) == frames_before - {fid(r) for r in REPEATED}
    assert (await store.census()).repeated == 0


async def test_said_before_is_another_connection_or_earlier_on_its_own(store: Store) -> None:
    """What a load asks the store: a message of the thread's history a frame before the load
    started, on another connection (whichever way its id sorts) or earlier on the load's own."""
    def said(mid: str, kind: str = "agent", thread: str = "t1") -> MessageRecord:
        return MessageRecord(mid, thread, None, 1.0, f"1|{mid}", kind, "x")

    await store.write(Batch(messages=[said(frame_id("m", 5)), said(frame_id("m", 9), "usage"),
                                      said(frame_id("a", 1), thread="t2"), said(frame_id("zz", 1), thread="t3"),
                                      said(frame_id("m", 7), "tool_call", thread="t4")]))
    assert await store.said_before("t1", frame_id("m", 6))
    assert not await store.said_before("t1", frame_id("m", 5))  # its own, and later: this load's
    assert not await store.said_before("t1", frame_id("m", 3))
    assert await store.said_before("t2", frame_id("b", 0))  # another connection, sorting before
    assert await store.said_before("t3", frame_id("z", 0))  # another, sorting after
    assert not await store.said_before("t4", frame_id("m", 2))
    assert await store.said_before("t4", frame_id("m", 8))
    assert not await store.said_before("nothing", frame_id("m", 8))
