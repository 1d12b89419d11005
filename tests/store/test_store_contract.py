"""The contract every store backend passes (SQLite always; MongoDB when its URL is set)."""

from __future__ import annotations

import pytest

from liminal.store.base import Store
from liminal.store.records import (
    DELETED,
    Batch,
    FrameRecord,
    MessageRecord,
    SessionRecord,
    ThreadUpdate,
    frame_id,
)

pytestmark = pytest.mark.anyio


def frame(seq: int, raw: bytes, *, conn: str = "c1", thread: str | None = "t1",
          time: float | None = None, method: str | None = "session/update") -> FrameRecord:
    return FrameRecord(frame_id(conn, seq), conn, seq, 100.0 + seq if time is None else time,
                       "a2c", "notification", thread, thread, method, None, len(raw), raw)


def message(mid: str, text: str, *, thread: str = "t1", kind: str = "agent", turn: str | None = "p1",
            order: str | None = None, replayed: bool = False, time: float = 100.0,
            data: dict[str, object] | None = None, status: str | None = None) -> MessageRecord:
    return MessageRecord(id=mid, thread_id=thread, turn_id=turn, time=time,
                         order=order or f"{time:017.6f}|{mid}", kind=kind, text=text,
                         data=data or {}, replayed=replayed, status=status)


async def test_frames_are_stored_byte_exact_and_only_once(store: Store) -> None:
    raws = [b'{"jsonrpc":"2.0","method":"x"}', b"\xff\xfe not json \x00", "é✓".encode(), b""]
    frames = [frame(i, raw) for i, raw in enumerate(raws)]
    await store.write(Batch(frames))
    await store.write(Batch(frames))  # a replay
    changed = [frame(0, b"something else")]
    await store.write(Batch(changed))  # frames are immutable: the first write wins
    assert await store.frame_count() == 4
    back = await store.frames(connection_id="c1")
    assert [f.raw for f in back] == raws
    assert back == frames


async def test_frames_filter_and_page(store: Store) -> None:
    await store.write(Batch([frame(i, b"a", thread="t1" if i % 2 else "t2") for i in range(10)]
                            + [frame(0, b"b", conn="c2", thread="t1", time=50.0)]))
    page = await store.frames(connection_id="c1", after_seq=3, limit=4)
    assert [f.seq for f in page] == [4, 5, 6, 7]
    by_thread = await store.frames(thread_id="t1")
    assert [(f.connection_id, f.seq) for f in by_thread] == [
        ("c2", 0), ("c1", 1), ("c1", 3), ("c1", 5), ("c1", 7), ("c1", 9)]


async def test_large_frames_and_messages_round_trip(store: Store) -> None:
    big = bytes(range(256)) * (5 * 4096 + 7)  # ~5 MB, every byte value
    text = "x" * (3 * 1024 * 1024) + " needle"
    await store.write(Batch([frame(0, big)], [message("m1", text, data={"big": text[:1000]})]))
    assert (await store.frames(connection_id="c1"))[0].raw == big
    [m] = await store.messages("t1")
    assert m.text == text and m.data == {"big": text[:1000]}


async def test_a_large_message_rewritten_smaller_reads_back_as_rewritten(store: Store) -> None:
    """A message is replaced by id as it changes, and one too large to keep inline may shrink
    (a tool call's streamed output replaced by its final one). Read back, it is the latest
    version, whole, however many pieces the earlier one took."""
    first = "a" * (9 * 1024 * 1024)  # more than two of MongoDB's 4 MB chunks
    second = "b" * (5 * 1024 * 1024)  # two
    await store.write(Batch(messages=[message("m1", first)]))
    await store.write(Batch(messages=[message("m1", second)]))
    [m] = await store.messages("t1")
    assert len(m.text) == len(second) and m.text == second
    await store.write(Batch(messages=[message("m1", "small now")]))
    assert [m.text for m in await store.messages("t1")] == ["small now"]


async def test_thread_updates_written_at_once_all_merge(store: Store) -> None:
    """Writers that update one thread at the same moment (an index worker recording a swap
    while ``liminal threads rename`` runs, two sidecars on one store) each keep what they said:
    a merge that read the thread before another writer's update must not write over it. On
    every server: FerretDB 1.x, which applies no update atomically, merges one thread at a time
    by a latch (``liminal.store.mongolatch``)."""
    import anyio

    async with anyio.create_task_group() as tg:
        for n in range(8):
            tg.start_soon(store.write, Batch(threads=[ThreadUpdate("t1", 100.0 + n, backing_ids=(f"b{n}",))]))
        tg.start_soon(store.write, Batch(threads=[ThreadUpdate("t1", 50.0, title="Mine", named=True)]))
    t = await store.thread("t1")
    assert t is not None
    assert sorted(t.backing_ids) == [f"b{n}" for n in range(8)]
    assert (t.title, t.named, t.created, t.updated) == ("Mine", True, 50.0, 107.0)


async def test_messages_replace_by_id_and_keep_order(store: Store) -> None:
    await store.write(Batch(messages=[message("m2", "second", time=2), message("m1", "fir", time=1)]))
    await store.write(Batch(messages=[message("m1", "first", time=1)]))
    got = await store.messages("t1")
    assert [(m.id, m.text) for m in got] == [("m1", "first"), ("m2", "second")]
    assert await store.messages("nope") == []
    await store.write(Batch(messages=[message("k2", "B", kind="mark", time=4),
                                      message("k1", "A", kind="mark", time=3)]))
    assert [m.text for m in await store.messages("t1", kind="mark")] == ["A", "B"]
    assert len(await store.messages("t1")) == 4


async def test_thread_updates_merge(store: Store) -> None:
    await store.write(Batch(threads=[
        ThreadUpdate("t1", 10.0, cwd="/a", harness="claude", backing_ids=("b1",), state="active"),
        ThreadUpdate("t1", 12.0, fallback_title="first prompt"),
        ThreadUpdate("t1", 11.0, fallback_title="second prompt"),
    ]))
    t = await store.thread("t1")
    assert t is not None
    assert (t.title, t.cwd, t.harness, t.state, t.backing_ids) == (
        "first prompt", "/a", "claude", "active", ("b1",))
    assert (t.created, t.updated) == (10.0, 12.0)
    again = [ThreadUpdate("t1", 5.0, title="Named", backing_ids=("b1", "b2")),
             ThreadUpdate("t1", 13.0, state="closed")]
    await store.write(Batch(threads=again))
    await store.write(Batch(threads=again))  # merging twice changes nothing
    t = await store.thread("t1")
    assert t is not None
    assert (t.title, t.state, t.backing_ids, t.created, t.updated) == (
        "Named", "closed", ("b1", "b2"), 5.0, 13.0)
    assert await store.thread("missing") is None


async def test_thread_summaries(store: Store) -> None:
    await store.write(Batch(
        threads=[ThreadUpdate("t1", 1.0, backing_ids=("t1", "t1b")), ThreadUpdate("t2", 2.0)],
        messages=[
            message("u1", "hello", kind="user", turn="p1", time=3.0),
            message("u2", "again", kind="user", turn="p2", time=4.0),
            message("use1", "", kind="usage", turn="p2", time=5.0,
                    data={"used": 900, "size": 1000}),
            message("r1", "replayed", kind="user", turn="old", time=0.5, replayed=True),
            message("x", "other", thread="t2", turn="q1", time=1.5),
        ]))
    summaries = await store.threads()
    assert [s.thread.id for s in summaries] == ["t1", "t2"]
    t1 = summaries[0]
    assert (t1.turns, t1.context_used, t1.context_size, t1.swaps, t1.last_activity) == (
        2, 900, 1000, 1, 5.0)
    assert (summaries[1].turns, summaries[1].context_used) == (1, None)


def move(mid: str, outcome: str, time: float, before: int | None, after: int | None) -> MessageRecord:
    """A ``swap`` message as the indexer derives it from liminal's note of a move."""
    return message(mid, f"swap {outcome}", kind="swap", turn=None, time=time, status=outcome,
                   data={"outcome": outcome, "tokens_before": before, "tokens_after": after})


async def test_a_threads_context_is_the_one_it_has_now(store: Store) -> None:
    """``liminal threads`` showed 22.9k for a thread that ``/context`` said had 15.4k: the last
    usage point was from before the last swap. After a move, until the next model call, the
    context is what the move left."""
    async def context() -> tuple[int | None, int | None]:
        [summary] = await store.threads()
        return summary.context_used, summary.context_size

    await store.write(Batch(threads=[ThreadUpdate("t1", 1.0)], messages=[
        message("u1", "hello", kind="user", turn="p1", time=3.0),
        message("use1", "", kind="usage", turn="p1", time=4.0, data={"used": 22_900, "size": 200_000}),
        move("sw1", "committed", 5.0, 22_900, 15_400),
        move("sw2", "skipped", 6.0, 15_400, 15_000),  # not done: the context stays
        move("sw3", "failed", 6.5, 15_400, None)]))
    assert await context() == (15_400, 200_000)
    await store.write(Batch(messages=[
        message("use2", "", kind="usage", turn="p2", time=7.0, data={"used": 16_100, "size": 200_000})]))
    assert await context() == (16_100, 200_000)
    # /clear: a new, empty session, whose size nothing says until the next call.
    await store.write(Batch(messages=[move("sw4", "committed", 8.0, None, None)]))
    assert await context() == (None, 200_000)


async def test_session_records(store: Store) -> None:
    lines = [b'{"type":"user","uuid":"u1"}', b'{"type":"assistant","uuid":"a1"}']
    records, offset = [], 0
    for i, raw in enumerate(lines):
        records.append(SessionRecord(
            SessionRecord.make_id("b1", offset), "b1", "t1", offset, f"u{i}", "user", None,
            {"input_tokens": 5} if i else None, ("toolu_1",) if i else (),
            f"line {i} zebra", raw))
        offset += len(raw) + 1
    assert await store.session_file_end("b1") == 0
    await store.write(Batch(session_records=records))
    await store.write(Batch(session_records=records))
    got = await store.session_records("b1")
    assert got == records
    assert await store.session_file_end("b1") == offset
    # The lines with a record's uuid: what a recall key names (liminal.lookup.recaller).
    assert await store.session_records("b1", uuid="u1") == [records[1]]
    assert await store.session_records("b1", uuid="nope") == []
    assert await store.session_records("b2", uuid="u1") == []
    assert await store.session_records("b1", limit=1) == records[:1]
    assert await store.session_records("b1", limit=0) == []


async def test_every_line_with_a_uuid_in_file_order(store: Store) -> None:
    """A Codex call and its output share a ``call_id`` (a key's block tells which it names);
    Claude Code may write a record twice. The recaller tries each, the first in the file first."""
    records = [SessionRecord(SessionRecord.make_id("b1", n * 100), "b1", "t1", n * 100, uuid,
                             kind, None, None, (), "", b"{}")
               for n, (uuid, kind) in enumerate([("c1", "response_item:function_call"),
                                                 ("c2", "response_item:function_call"),
                                                 ("c1", "response_item:function_call_output")])]
    await store.write(Batch(session_records=list(reversed(records))))
    assert await store.session_records("b1", uuid="c1") == [records[0], records[2]]
    assert await store.session_records("b1", uuid="c1", limit=1) == [records[0]]


async def test_liminals_own_lines_are_kept_and_never_found(store: Store) -> None:
    """The head of a rewrite is liminal's copy of lines indexed from the older session: it is
    kept (recall keys name it, and the file can be written again) and marked so; search finds
    the older session's line only."""
    said = "tool output: the flux capacitor at 1.21 gigawatts"
    original = SessionRecord("b1@000000000000", "b1", "t1", 0, "u1", "user", None, None, (), said,
                             b'{"uuid":"u1"}')
    copy = SessionRecord("b2@000000000000", "b2", "t1", 0, "u1", "user", None, None, (),
                         said + " (copied)", b'{"uuid":"u1","sessionId":"b2"}', own=True)
    await store.write(Batch(session_records=[original, copy]))
    assert await store.session_records("b2") == [copy]
    assert await store.session_records("b2", uuid="u1") == [copy]
    assert [h.id for h in await store.search("gigawatts")] == [original.id]
    assert [h.id for h in await store.search("copied")] == []
    assert await store.session_file_end("b2") == len(copy.raw) + 1


async def test_search_best_first_with_thread_filter(store: Store) -> None:
    await store.write(Batch(messages=[
        message("m1", "the flux capacitor needs plutonium", time=1),
        message("m2", "flux flux flux capacitor capacitor", time=2),
        message("m3", "nothing to see here", time=3),
        message("m4", "flux capacitor in another thread", thread="t2", time=4),
        message("m5", "flux capacitor replayed", replayed=True, time=5),
    ], session_records=[SessionRecord(
        "b1@000000000000", "b1", "t1", 0, "u1", "user", None, None, (),
        "tool output: flux capacitor at 1.21 gigawatts", b"{}")]))
    hits = await store.search("flux capacitor")
    ids = [h.id for h in hits]
    assert set(ids) == {"m1", "m2", "m4", "b1@000000000000"}
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    if store.search_mode != "like":
        assert ids[0] == "m2"  # the most relevant first
    t1 = await store.search("capacitor", thread_id="t1")
    assert {h.id for h in t1} == {"m1", "m2", "b1@000000000000"}
    assert all("capacitor" in h.snippet.lower() for h in t1)
    assert await store.search("gigawatts", thread_id="t1") == [
        h for h in await store.search("gigawatts") if h.thread_id == "t1"]
    assert await store.search("") == []


async def test_the_same_words_found_twice_are_one_hit_with_a_time(store: Store) -> None:
    """The prompt the client showed and the CLI's records of it (Codex keeps a prompt as a
    message and as an event) are one find; it carries the message's time."""
    said = "remember: the launch word is zanzibar-77"
    await store.write(Batch(messages=[message("m1", said, kind="user", time=1000.0)],
                            session_records=[
        SessionRecord(SessionRecord.make_id("b1", n * 100), "b1", "t1", n * 100, None, kind,
                      "2026-11-25T09:40:00.500Z", None, (), said, b"{}")
        for n, kind in enumerate(("response_item:message", "event_msg:user_message"))] + [
        SessionRecord(SessionRecord.make_id("b1", 300), "b1", "t1", 300, None, "tool", "not a time",
                      None, (), "zanzibar-77 was grepped for", b"{}")]))
    hits = await store.search("zanzibar")
    assert len(hits) == 2, hits
    prompt = next(h for h in hits if "launch word" in h.snippet)
    assert prompt.time in (1000.0, 1795599600.5)  # the message's, or the record's if it ranked first
    other = next(h for h in hits if "grepped" in h.snippet)
    assert other.source == "session" and other.time is None


@pytest.mark.parametrize(("query", "found"), [
    ('"', False), ("AND", False), ("NEAR(", False), ("a:b", False), ("'", False),
    ("flux AND", False),  # "and" is a word the text must hold, not an operator
    ("capacitor NOT", False),  # likewise "not": it does not exclude anything
    ('"flux"', True), ("'capacitor'", True), ("flux capacitor", True), ("FLUX", True),
    ("capacitor flux", True),  # words, not a phrase: any order
])
async def test_search_queries_are_words_not_syntax(store: Store, query: str, found: bool) -> None:
    await store.write(Batch(messages=[message("m1", "flux capacitor")]))
    hits = await store.search(query)  # never raises, whatever the query holds
    assert [h.id for h in hits] == (["m1"] if found else [])


async def test_a_deleted_thread_leaves_nothing_behind(store: Store) -> None:
    keep = ThreadUpdate("t2", 100.0, title="keep me", backing_ids=("t2",))
    doomed = ThreadUpdate("t1", 100.0, title="delete me", backing_ids=("t1", "b1"))
    record = SessionRecord(SessionRecord.make_id("b1", 0), "b1", "t1", 0, "u1", "user", None, None, (),
                           "the needle in a session line", b"{}")
    await store.write(Batch([frame(0, b"a"), frame(1, b"b", thread="t2")],
                            [message("m1", "a needle here"), message("m2", "another needle", thread="t2")],
                            [keep, doomed], [record]))
    assert await store.delete_thread("t1") >= 4
    assert await store.thread("t1") is None and await store.messages("t1") == []
    assert await store.session_records("b1") == [] and await store.frames(thread_id="t1") == []
    hits = await store.search("needle")
    assert [h.thread_id for h in hits] == ["t2"]
    assert (await store.thread("t2")) is not None and len(await store.messages("t2")) == 1
    assert await store.delete_thread("t1") == 0  # again: nothing, no error


async def test_a_deleted_threads_summaries_by_the_model_go_with_it(store: Store) -> None:
    """The model's summaries of a thread's turns (issue 24, on by default) are kept under a
    pseudo-thread of their own, each naming its thread: they are that thread's record and go
    with it, and one still being written when it was deleted is not taken. Found making
    ``swap.summaries`` the default: ``liminal search --all`` still showed a deleted thread's
    summary. Memos, kept the same way, outlive the thread they were written in."""
    summary_thread, memo_thread = "liminal-summaries", "liminal-memos"
    await store.write(Batch(
        messages=[message("m1", "a needle here"), message("m2", "another needle", thread="t2"),
                  message("s1", "SUMMARY: the needle was found", thread=summary_thread, kind="summary",
                          turn=None, data={"thread": "t1", "keys": ["k1"]}),
                  message("s2", "SUMMARY: the other needle", thread=summary_thread, kind="summary",
                          turn=None, data={"thread": "t2", "keys": ["k2"]}),
                  message("n1", "a memo about the needle", thread=memo_thread, kind="memo", turn=None,
                          data={"tags": [], "thread": "t1"})],
        threads=[ThreadUpdate("t1", 100.0, title="delete me", backing_ids=("t1",)),
                 ThreadUpdate("t2", 100.0, title="keep me", backing_ids=("t2",))]))
    assert await store.delete_thread("t1") >= 3
    assert [m.id for m in await store.messages(summary_thread, "summary")] == ["s2"]
    assert [m.id for m in await store.messages(memo_thread)] == ["n1"]
    assert sorted(h.id for h in await store.search("needle")) == ["m2", "n1", "s2"]
    await store.write(Batch(threads=[ThreadUpdate("t1", 101.0, state=DELETED, by_user=True)]))
    await store.write(Batch(messages=[
        message("s3", "SUMMARY: a late needle", thread=summary_thread, kind="summary", turn=None,
                data={"thread": "t1", "keys": ["k3"]})]))
    assert [m.id for m in await store.messages(summary_thread, "summary")] == ["s2"]


async def test_a_thread_the_client_deleted_takes_no_more_records(store: Store) -> None:
    """``session/delete`` leaves a tombstone (``DELETED``): the frames and session lines of the
    thread still on their way to the store when it was deleted do not bring it back, in no
    listing and in no search, and nothing revives it (issue 25)."""
    await store.write(Batch([frame(0, b"a")], [message("m1", "a needle here")],
                            [ThreadUpdate("t1", 100.0, title="delete me", backing_ids=("t1", "b1"))]))
    await store.write(Batch(threads=[ThreadUpdate("t2", 100.0, title="keep me", backing_ids=("t2",))]))
    await store.delete_thread("t1")
    await store.write(Batch(threads=[ThreadUpdate("t1", 101.0, state=DELETED, by_user=True)]))
    late = SessionRecord(SessionRecord.make_id("b1", 0), "b1", "t1", 0, "u1", "user", None, None, (),
                         "the needle in a late line", b"{}")
    await store.write(Batch([frame(1, b"late")], [message("m2", "a late needle")],
                            [ThreadUpdate("t1", 102.0, title="back?", state="active", backing_ids=("b2",)),
                             ThreadUpdate("t1", 103.0, state="active", by_user=True)], [late]))
    await store.write(Batch(messages=[message("m3", "a needle kept", thread="t2")]))
    assert [s.thread.id for s in await store.threads(empty=True)] == ["t2"]
    assert await store.messages("t1") == [] and await store.frames(thread_id="t1") == []
    assert await store.session_records("b1") == []
    assert [h.thread_id for h in await store.search("needle")] == ["t2"]
    thread = await store.thread("t1")
    assert thread is not None and thread.state == DELETED


async def test_the_deleted_threads_are_their_tombstones_and_keep_their_sessions(store: Store) -> None:
    """A deleted thread's tombstone keeps the ids of the sessions that were its (and no title:
    that is its text), so what is left of them can be found later (``liminal doctor``, ``liminal
    threads purge``: ``liminal.kernel.owned``); it is in no listing, and hides no other thread."""
    await store.write(Batch(threads=[ThreadUpdate("t1", 100.0, title="delete me", backing_ids=("t1", "b1")),
                                     ThreadUpdate("t2", 100.0, title="keep me", backing_ids=("t2",))]))
    assert await store.deleted_threads() == []
    # The tombstone first, then the rest (``liminal.kernel.owned``): the delete keeps it.
    await store.write(Batch(threads=[ThreadUpdate("t1", 101.0, cwd="/w", harness="claude", state=DELETED,
                                                  backing_ids=("t1", "b1", "b2"), by_user=True)]))
    await store.delete_thread("t1")
    [tomb] = await store.deleted_threads()
    assert (tomb.id, tomb.title, tomb.backing_ids, tomb.cwd, tomb.harness) == (
        "t1", "", ("t1", "b1", "b2"), "/w", "claude")
    assert [s.thread.id for s in await store.threads(empty=True)] == ["t2"]
    # A line of a session the tombstone does not name, stored under no thread (a tombstone an
    # older liminal wrote without all its sessions): a delete given them takes the line too
    # (``purge``), and the tombstone names that session from then on.
    stray = SessionRecord(SessionRecord.make_id("b3", 0), "b3", None, 0, "u0", "last-prompt", None, None, (),
                          "the needle in a stray line", b"{}")
    await store.write(Batch(session_records=[stray]))
    assert await store.session_records("b3") != []
    await store.write(Batch(threads=[ThreadUpdate("t1", 102.0, state=DELETED, backing_ids=(*tomb.backing_ids, "b3"),
                                                  by_user=True)]))
    await store.delete_thread("t1", ("t1", "b1", "b2", "b3"))
    assert await store.session_records("b3") == []
    assert [t.backing_ids for t in await store.deleted_threads()] == [("t1", "b1", "b2", "b3")]
    # Nothing of the thread comes back after it: not a late line of one of its sessions (the CLI
    # wrote the file again as its process ended), nor a title.
    late = SessionRecord(SessionRecord.make_id("b2", 0), "b2", None, 0, "u1", "last-prompt", None, None, (),
                         "the needle in a late line", b"{}")
    await store.write(Batch(session_records=[late], threads=[ThreadUpdate("t1", 103.0, title="back?")]))
    assert await store.session_records("b2") == [] and (await store.deleted_threads())[0].title == ""


async def test_a_title_the_user_gave_outlives_the_agents_titles(store: Store) -> None:
    await store.write(Batch(threads=[ThreadUpdate("t1", 100.0, title="agent's first title")]))
    await store.write(Batch(threads=[ThreadUpdate("t1", 101.0, title="Mine", named=True)]))
    await store.write(Batch(threads=[ThreadUpdate("t1", 102.0, title="agent's next title")]))
    thread = await store.thread("t1")
    assert thread is not None and thread.title == "Mine" and thread.named
    await store.write(Batch(threads=[ThreadUpdate("t1", 103.0, title="Mine again", named=True)]))
    [summary] = await store.threads(empty=True)
    assert summary.thread.title == "Mine again"


async def test_a_thread_keeps_its_first_title(store: Store) -> None:
    """The first prompt's words stand in until the agent titles the thread; then the agent's
    later titles (Claude Code titles each session after its latest prompt when it cannot
    generate one) and the titles of the sessions the thread moved onto change nothing. On main
    every title replaced the last: 'alpha topic first prompt' -> 'gamma after clear' ->
    'delta after undo'."""
    await store.write(Batch(threads=[ThreadUpdate("t1", 100.0, fallback_title="alpha topic first")]))
    await store.write(Batch(threads=[ThreadUpdate("t1", 101.0, title="Alpha topic")]))
    thread = await store.thread("t1")
    assert thread is not None and (thread.title, thread.titled, thread.named) == ("Alpha topic", True, False)
    for n, later in enumerate(["turn 8: BIG read please", "gamma after clear"]):
        await store.write(Batch(threads=[ThreadUpdate("t1", 102.0 + n, title=later)]))
    await store.write(Batch(threads=[ThreadUpdate("t1", 104.0, fallback_title="delta after undo")]))
    thread = await store.thread("t1")
    assert thread is not None and thread.title == "Alpha topic"
    await store.write(Batch(threads=[ThreadUpdate("t1", 105.0, title="Mine", named=True)]))
    await store.write(Batch(threads=[ThreadUpdate("t1", 106.0, title="agent again")]))
    thread = await store.thread("t1")
    assert thread is not None and (thread.title, thread.named) == ("Mine", True)
    # A thread the agent never titles keeps its first prompt's words.
    await store.write(Batch(threads=[ThreadUpdate("t2", 100.0, fallback_title="first words"),
                                     ThreadUpdate("t2", 101.0, fallback_title="a moved-to session")]))
    thread = await store.thread("t2")
    assert thread is not None and (thread.title, thread.titled) == ("first words", False)


async def test_each_thread_is_listed_once_and_empty_ones_on_request(store: Store) -> None:
    """Records kept under a backing session's id (liminal's close of the session a swap left
    made one per swap on main: a row of dashes with 0 turns) are the thread's, not threads; an
    empty thread (no title, nothing said: opened, never prompted) is listed only when asked
    for. A fork (named, nothing said through liminal yet) is a thread to open."""
    await store.write(Batch(
        threads=[ThreadUpdate("t1", 1.0, fallback_title="alpha", backing_ids=("t1", "b1", "b2")),
                 ThreadUpdate("b1", 2.0, state="closed"), ThreadUpdate("b2", 3.0, state="closed"),
                 ThreadUpdate("t2", 4.0, cwd="/p", backing_ids=("t2",)),
                 ThreadUpdate("t3", 0.5, backing_ids=("t3",)),
                 # /fork: a session file liminal wrote, named; nothing said in it through liminal yet
                 ThreadUpdate("f1", 0.4, title="Fork of alpha", backing_ids=("f1",))],
        messages=[message("u1", "alpha", kind="user", turn="p1", time=1.5),
                  message("a3", "old answer", kind="agent", thread="t3", turn=None, replayed=True,
                          time=0.6),  # a thread seen through a load: its history is its own
                  message("use2", "", kind="usage", thread="t2", turn=None, time=4.5,
                          data={"used": 10, "size": 100})]))
    listed = await store.threads()
    assert [(s.thread.id, s.thread.title, s.empty) for s in listed] == [
        ("t1", "alpha", False), ("t3", "", False), ("f1", "Fork of alpha", False)]
    everything = await store.threads(empty=True)
    assert [(s.thread.id, s.empty) for s in everything] == [
        ("t2", True), ("t1", False), ("t3", False), ("f1", False)]
    assert [s.thread.id for s in await store.threads(limit=1, empty=True)] == ["t2"]
    # Deleting the thread takes the records under its sessions' ids too.
    await store.delete_thread("t1")
    assert await store.thread("b1") is None and await store.thread("b2") is None
    assert [s.thread.id for s in await store.threads(empty=True)] == ["t2", "t3", "f1"]


@pytest.mark.parametrize(("query", "expected"), [
    ("a_b", ["m1"]),  # not "axb": an underscore is not a wildcard
    ("100%", ["m3"]),  # not "1000 apples": a percent sign is not one either
    ("x\\y", ["m5"]),
])
async def test_search_words_hold_no_wildcards(store: Store, query: str, expected: list[str]) -> None:
    await store.write(Batch(messages=[
        message("m1", "snake a_b case"), message("m2", "file axb here"),
        message("m3", "100% sure"), message("m4", "1000 apples"),
        message("m5", "path x\\y here"), message("m6", "path xy here")]))
    hits = await store.search(query)
    assert sorted(h.id for h in hits) == expected


async def test_frames_are_read_back_a_bounded_number_of_bytes_at_a_time(store: Store) -> None:
    """Deriving a connection again pages through its frames: a page bounded by count alone held
    a streamed 1.5 GB answer whole. With ``max_bytes`` a page holds what fits, at least one."""
    await store.write(Batch([frame(n, b"x" * 1000) for n in range(10)]))
    assert [f.seq for f in await store.frames(connection_id="c1", max_bytes=3500)] == [0, 1, 2]
    assert [f.seq for f in await store.frames(connection_id="c1", after_seq=7,
                                              max_bytes=3500)] == [8, 9]
    assert [f.seq for f in await store.frames(connection_id="c1", max_bytes=10)] == [0]
    assert len(await store.frames(connection_id="c1", max_bytes=10**9)) == 10
    assert await store.frames(connection_id="c1", after_seq=9, max_bytes=10) == []
