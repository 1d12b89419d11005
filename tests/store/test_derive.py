"""Message derivation, driven by literal ACP frames."""

from __future__ import annotations

from typing import Any

from liminal.acp.events import FrameEvent
from liminal.ingest.derive import Derived, Deriver
from liminal.ingest.indexer import to_record
from liminal.store.records import MessageRecord, ThreadUpdate, merge_thread
from tests.store.conftest import REPLAY, chunk, conversation, event, load_of, moved, own_request


def derive(events: list[FrameEvent]) -> tuple[dict[str, MessageRecord], list[ThreadUpdate]]:
    deriver = Deriver()
    messages: dict[str, MessageRecord] = {}
    threads: list[ThreadUpdate] = []
    for seq, e in enumerate(events):
        deriver.feed(to_record(seq, e), e.message)
        if seq % 3 == 0:  # taking part way must not change the result
            out: Derived = deriver.take()
            for m in out.messages:
                messages[m.id] = m
            threads.extend(out.threads)
    out = deriver.take()
    for m in out.messages:
        messages[m.id] = m
    threads.extend(out.threads)
    return messages, threads


def by_kind(messages: dict[str, MessageRecord]) -> list[tuple[str, str]]:
    return [(m.kind, m.text) for m in sorted(messages.values(), key=lambda m: m.order)]


def test_a_turn_becomes_a_readable_conversation() -> None:
    messages, threads = derive(conversation())
    assert by_kind(messages) == [
        ("user", "Refactor the flux capacitor module"),
        ("thought", "Let me think."),
        ("agent", "I will read the file."),
        ("tool_call", 'Read flux.py\n{"path":"flux.py"}\ndef gigawatts(): return 1.21'),
        ("plan", "Rename gigawatts"),
        ("agent", "Done: renamed."),
        ("usage", ""),
        ("turn_end", ""),
    ]
    ordered = sorted(messages.values(), key=lambda m: m.order)
    user, tool, usage, end = ordered[0], ordered[3], ordered[6], ordered[7]
    assert {m.turn_id for m in ordered} == {user.id}
    assert all(m.thread_id == "sess-1" for m in ordered)
    assert (tool.tool_call_id, tool.status, tool.data["kind"]) == ("toolu_01", "completed", "read")
    assert usage.data == {"used": 12345, "size": 200000}
    assert (end.status, end.data) == ("end_turn", {"stopReason": "end_turn"})
    new = next(t for t in threads if t.backing_ids)
    assert (new.id, new.cwd, new.harness, new.state, new.backing_ids) == (
        "sess-1", "/work/demo", "claude-agent-acp", "active", ("sess-1",))
    assert any(t.fallback_title == "Refactor the flux capacitor module" for t in threads)


def test_ids_are_deterministic_and_frames_are_taken_once() -> None:
    events = conversation()
    first, _ = derive(events)
    again, _ = derive(events)
    assert first == again
    deriver = Deriver()
    records = [(to_record(i, e), e.message) for i, e in enumerate(events)]
    for r, m in records:
        deriver.feed(r, m)
    assert deriver.take().messages
    for r, m in records:
        deriver.feed(r, m)
    assert deriver.take() == Derived([], [])


def update(session: str, body: dict[str, Any], t: float = 1000.0) -> FrameEvent:
    return event("a2c", {"jsonrpc": "2.0", "method": "session/update",
                         "params": {"sessionId": session, "update": body}}, time=t)


def test_message_ids_split_agent_text() -> None:
    messages, _ = derive([update("s", chunk("a", "m1")), update("s", chunk("b", "m1")),
                          update("s", chunk("c", "m2"))])
    assert by_kind(messages) == [("agent", "ab"), ("agent", "c")]


def test_liminals_own_chunks_are_never_joined_to_the_agents() -> None:
    """The swap notice liminal sends as a thought at the start of a turn, then the agent's own
    thinking, neither with a messageId (claude-code-acp 0.16 sends none): two messages, so the
    notice stays liminal's (its first frame's direction says so) and search keeps the agent's."""
    def thought(direction: str, text: str) -> FrameEvent:
        return event(direction, {"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": "s", "update": {"sessionUpdate": "agent_thought_chunk",
                                         "content": {"type": "text", "text": text}}}})

    messages, _ = derive([thought("l2c", "Context optimised by liminal: 81k -> 38k tokens.\n"),
                          thought("a2c", "Let me "), thought("a2c", "think.")])
    assert by_kind(messages) == [("thought", "Context optimised by liminal: 81k -> 38k tokens.\n"),
                                 ("thought", "Let me think.")]


def test_session_load_replay_is_marked() -> None:
    events = [
        event("c2a", {"jsonrpc": "2.0", "id": 5, "method": "session/load",
                      "params": {"sessionId": "s", "cwd": "/w", "mcpServers": []}}),
        update("s", {"sessionUpdate": "user_message_chunk",
                     "content": {"type": "text", "text": "old prompt"}}),
        update("s", chunk("old answer")),
        event("a2c", {"jsonrpc": "2.0", "id": 5, "result": {}}, thread="s",
              method="session/load"),
        update("s", chunk("live")),
    ]
    messages, threads = derive(events)
    assert [(m.kind, m.text, m.replayed) for m in messages.values()] == [
        ("user", "old prompt", True), ("agent", "old answer", True), ("agent", "live", False)]
    assert threads[-1].cwd == "/w" and threads[-1].backing_ids == ("s",)


def fed(deriver: Deriver, events: list[FrameEvent], start: int = 0) -> list[bool]:
    """Each frame fed (sequence numbers from ``start``): whether it is to be stored."""
    return [deriver.feed(to_record(start + n, e), e.message) for n, e in enumerate(events)]


def test_a_later_load_of_a_thread_derives_nothing_of_its_history_again() -> None:
    """The thread's conversation was derived here (a live turn): a load's replay of it is not a
    second copy. Its history frames are not to be stored; what describes the session now
    (commands, usage) is, as frames, and derives no message; the note of the load lists what
    the client was shown, by the ids it was given (the agent's, else the frame's)."""
    deriver = Deriver()
    turn = conversation("s")
    fed(deriver, turn)
    before = {m.id for m in deriver.take().messages}
    load = load_of("s", 9, REPLAY)
    kept = fed(deriver, load, start=len(turn))
    assert kept == [True, False, False, False, False, False, True, True, True]
    derived = deriver.take()
    assert not [m for m in derived.messages if m.id not in before and m.kind != "load"]
    [note] = derived.messages
    first = len(turn) + 1
    assert (note.id, note.kind, note.thread_id) == ("load:s", "load", "s")
    assert note.data == {"said": [["user", f"conn1:{first:010d}"], ["agent", f"conn1:{first + 1:010d}"],
                                  ["agent", "m9"]]}
    assert derived.threads[-1].backing_ids == ("s",)  # the load still says where the thread is


def test_a_load_the_store_has_the_history_of_records_only_its_note() -> None:
    """A process of its own for the load (a client that starts liminal per prompt): the deriver
    has seen nothing of the thread, and asks (``to_ask``); the store's word decides."""
    for said_before in (True, False):
        deriver = Deriver()
        load = load_of("s", 1, REPLAY)
        request = to_record(0, load[0])
        assert deriver.to_ask(request, load[0].message) == "s"
        assert deriver.to_ask(to_record(1, load[1]), load[1].message) is None  # not a load
        deriver.told(request.id, said_before)
        kept = fed(deriver, load)
        messages = deriver.take().messages
        if said_before:
            assert kept.count(False) == len(REPLAY)
            assert [m.kind for m in messages] == ["load"]
        else:  # the thread's first load: its past, kept as it was
            assert all(kept)
            assert [(m.kind, m.replayed) for m in sorted(messages, key=lambda m: m.order)] == [
                ("user", True), ("agent", True), ("tool_call", True), ("agent", True), ("usage", True)]
            # Its own conversation now known here, the next load asks nothing.
            again = load_of("s", 2, REPLAY, t=3000.0)
            assert deriver.to_ask(to_record(len(load), again[0]), again[0].message) is None


def test_a_replay_the_client_never_saw_is_no_message_and_not_stored() -> None:
    """``a2l``: the compressed session's replay a swap's load or a moved thread's load captured.
    Even in the thread's first load (the store had nothing of it) it is no message: what the
    client sees of that load comes as ``l2c``."""
    deriver = Deriver()
    load = load_of("s", 1, REPLAY, direction="a2l")
    kept = fed(deriver, load)
    assert kept.count(False) == len(REPLAY)
    assert [m.kind for m in deriver.take().messages] == ["usage"]


def test_a_replay_streamed_after_the_loads_answer_is_no_message_either() -> None:
    """Gemini CLI answers a load before its replay ends; the router keeps the rest from the
    client (``a2l``) until the session's next prompt. Those frames, after the answer, are no
    messages and not stored: the thread's prompts were stored four and five times over, one
    copy per swap's load."""
    deriver = Deriver()
    load = load_of("s", 1, [], direction="a2l")
    late = [event("a2l", {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": u}},
                  time=2001.0) for u in REPLAY]
    kept = fed(deriver, [*load, *late])
    assert kept[len(load):] == [False] * len(REPLAY)
    assert [m.kind for m in deriver.take().messages] == ["usage"]


def test_errors_titles_close_and_junk() -> None:
    events = [
        event("c2a", {"jsonrpc": "2.0", "id": "p", "method": "session/prompt",
                      "params": {"sessionId": "s", "prompt": [
                          {"type": "resource_link", "uri": "file:///a.py", "name": "a.py"},
                          {"type": "text", "text": "explain"}]}}),
        update("s", {"sessionUpdate": "session_info_update", "title": "Explaining a.py"}),
        update("s", {"sessionUpdate": "tool_call_update", "toolCallId": "unknown",
                     "status": "failed"}),
        event("a2c", {"jsonrpc": "2.0", "id": "p", "error": {"code": -32800,
                                                             "message": "cancelled"}},
              thread="s", method="session/prompt"),
        event("c2a", {"jsonrpc": "2.0", "id": 9, "method": "session/close",
                      "params": {"sessionId": "s"}}),
        event("a2c", b"not json at all"),
        event("a2c", {"jsonrpc": "2.0", "method": "session/update", "params": "weird"}),
        event("a2c", {"jsonrpc": "2.0", "method": "_auth/status_update", "params": {}}),
    ]
    messages, threads = derive(events)
    kinds = by_kind(messages)
    assert kinds[0] == ("user", "[a.py]\nexplain")
    assert kinds[1][0] == "tool_call"
    end = next(m for m in messages.values() if m.kind == "turn_end")
    assert end.status == "error" and end.data["error"]["code"] == -32800
    assert [t.title for t in threads if t.title] == ["Explaining a.py"]
    assert threads[-1].state == "closed"


def test_a_session_liminal_closes_after_a_move_is_no_thread_and_closes_none() -> None:
    """A move closes the session the thread left (``session/close``, liminal's own request,
    which names the old backing id and no thread). Taken for the client's close, each became a
    thread of its own in ``liminal threads`` (no title, closed), one per swap, and the first
    (the thread's original id) marked the thread itself closed while it went on."""
    events = [
        event("c2a", {"jsonrpc": "2.0", "id": 1, "method": "session/new",
                      "params": {"cwd": "/w", "mcpServers": []}}),
        event("a2c", {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "t"}},
              method="session/new"),
        event("l2a", {"jsonrpc": "2.0", "id": "liminal-x-1", "method": "session/close",
                      "params": {"sessionId": "t"}}, backing="t"),
        event("a2l", {"jsonrpc": "2.0", "id": "liminal-x-1", "result": {}}, method="session/close"),
        event("l2a", {"jsonrpc": "2.0", "id": "liminal-x-2", "method": "session/close",
                      "params": {"sessionId": "b1"}}, backing="b1"),
        event("a2l", {"jsonrpc": "2.0", "id": "liminal-x-2", "result": {}}, method="session/close"),
    ]
    _, threads = derive(events)
    assert {t.id for t in threads} == {"t"}
    assert not [t for t in threads if t.state == "closed"]


def test_fork_creates_a_new_thread() -> None:
    events = [
        event("c2a", {"jsonrpc": "2.0", "id": 3, "method": "session/fork",
                      "params": {"sessionId": "s", "cwd": "/w"}}),
        event("a2c", {"jsonrpc": "2.0", "id": 3, "result": {"sessionId": "s2"}},
              method="session/fork", thread="s"),
    ]
    _, threads = derive(events)
    assert (threads[-1].id, threads[-1].backing_ids) == ("s2", ("s2",))


def test_a_swap_note_becomes_a_swap_message_between_turns() -> None:
    record = {"thread_id": "sess-1", "old_backing_id": "sess-1", "new_backing_id": "b2",
              "outcome": "committed", "reason": "context 130000 tokens >= 120000",
              "started_at": 1001.0, "duration_s": 0.4, "tokens_before": 130000,
              "tokens_after": 80000, "harness": "claude", "cwd": "/work/demo"}
    failed = dict(record, outcome="failed", new_backing_id=None, tokens_after=None,
                  reason="OwnRequestError: session/resume: boom")
    # A command's move that failed says which command, and why in words (it said "context
    # swap failed SwapError: ..." of an /undo).
    undo = dict(record, outcome="failed", tokens_before=None, tokens_after=None, move="/undo",
                reason="the last turn is not on disk yet")
    notes = [event("note", {"jsonrpc": "2.0", "method": "liminal/swap", "params": r},
                   thread="sess-1", backing="b2", time=1001.5 + n) for n, r in enumerate((record, failed, undo))]
    messages, _ = derive([*conversation(), *notes])
    swaps = [m for m in sorted(messages.values(), key=lambda m: m.order) if m.kind == "swap"]
    assert [(m.status, m.text) for m in swaps] == [
        ("committed", "swap compressed the model's context (130k -> 80k tokens)"),
        ("failed", "move failed, at 130k tokens: session/resume: boom"),  # an old record: no class name
        ("failed", "/undo failed: the last turn is not on disk yet")]
    assert all(m.turn_id is None and m.data["duration_s"] == 0.4 for m in swaps)  # between turns
    # The same notification from the agent or the client is not liminal's: no swap message.
    forged = event("a2c", {"jsonrpc": "2.0", "method": "liminal/swap", "params": record})
    assert not [m for m in derive([forged])[0].values() if m.kind == "swap"]


def test_a_usage_note_is_a_usage_point_of_the_turn_that_ended() -> None:
    """A CLI that sends no usage_update (Gemini CLI): the context liminal read from its session
    file at a turn's end is a usage point of that turn; the same size again (a command's turn,
    no model call) is none."""
    notes = [event("note", {"jsonrpc": "2.0", "method": "liminal/usage", "params": {"used": used}},
                   thread="sess-1", backing="sess-1", time=1002.0 + n) for n, used in enumerate((5000, 5000, 7000))]
    # The last one read while the next prompt was under way: still the ended turn's.
    following = event("c2a", {"jsonrpc": "2.0", "id": 7, "method": "session/prompt", "params": {
        "sessionId": "sess-1", "prompt": [{"type": "text", "text": "next"}]}}, time=1002.5)
    messages, _ = derive([*conversation(), *notes[:2], following, notes[2]])
    [ended] = [m for m in messages.values() if m.kind == "turn_end"]
    noted = sorted((m for m in messages.values() if m.kind == "usage" and "size" not in m.data), key=lambda m: m.order)
    assert [(m.data, m.turn_id) for m in noted] == [({"used": 5000}, ended.turn_id), ({"used": 7000}, ended.turn_id)]
    forged = event("a2c", {"jsonrpc": "2.0", "method": "liminal/usage", "params": {"used": 1}}, thread="sess-1")
    assert not [m for m in derive([forged])[0].values() if m.kind == "usage"]


def test_a_command_liminal_answered_and_a_mark_are_kept_with_the_conversation() -> None:
    prompt = {"jsonrpc": "2.0", "id": 9, "method": "session/prompt",
              "params": {"sessionId": "sess-1", "prompt": [{"type": "text", "text": "/mark A"}]}}
    said = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "sess-1", "update": {
        "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Mark A set here."}}}}
    mark = {"jsonrpc": "2.0", "method": "liminal/mark",
            "params": {"thread_id": "sess-1", "name": "A", "backing_id": "sess-1", "offset": 1234}}
    answer = {"jsonrpc": "2.0", "id": 9, "result": {"stopReason": "end_turn"}}
    frames = [event("c2l", prompt, time=5000.0), event("l2c", said, time=5000.1),
              event("note", mark, thread="sess-1", backing="sess-1", time=5000.2),
              event("l2c", answer, thread="sess-1", method="session/prompt", time=5000.3)]
    messages, _ = derive([*conversation(), *frames])
    ordered = [m for m in sorted(messages.values(), key=lambda m: m.order) if m.time >= 5000.0]
    assert [(m.kind, m.text) for m in ordered] == [
        ("user", "/mark A"), ("agent", "Mark A set here."), ("mark", "A"), ("turn_end", "")]
    assert ordered[2].data == {"backing_id": "sess-1", "offset": 1234}


def test_a_thread_moved_three_times_stays_one_thread_with_its_first_title() -> None:
    """What liminal's moves look like on the wire (a swap's session/resume of its rewrite, the
    session/close of the session it left, the agent's titles for each new session, a /clear's
    session/new) yield updates of the one thread: no thread under a backing id, never closed,
    its lineage from the swap notes, and the agent's titles for the new sessions only standing
    in. On main each close made a thread of the closed session (or closed the thread itself),
    and each new session's title replaced the thread's."""
    frames = [*conversation("t"), *moved("t", ["b1", "b2", "b3"], t0=2000.0)]
    # A move that failed after the agent opened its session leaves the lineage as it was.
    frames += own_request("t", "b3", "liminal-x-9", "session/resume",
                          {"sessionId": "b9", "cwd": "/work/demo"}, {}, 3000.0)
    _, threads = derive(frames)
    assert {u.id for u in threads} == {"t"}
    thread = None
    for u in threads:
        thread = merge_thread(thread, u)
    assert thread is not None
    assert (thread.title, thread.state, thread.backing_ids) == (
        "Flux work", "active", ("t", "b1", "b2", "b3"))
    # The client's own close closes the thread.
    closed = [event("c2a", {"jsonrpc": "2.0", "id": 77, "method": "session/close",
                            "params": {"sessionId": "t"}}, thread="t", backing="b3", time=3001.0)]
    _, more = derive([*frames, *closed])
    assert more[-1].state == "closed"


def test_a_command_liminal_answered_gives_the_thread_no_title() -> None:
    """A new thread whose first words were ``/memo the staging port is 8443`` was listed and
    headed by them (found trying the README as a new user): liminal's command is no prompt of the
    conversation, so the first prompt that reached the agent names the thread."""
    memo = {"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
            "params": {"sessionId": "new-1", "prompt": [{"type": "text", "text": "/memo port 8443"}]}}
    hello = {"jsonrpc": "2.0", "id": 4, "method": "session/prompt",
             "params": {"sessionId": "new-1", "prompt": [{"type": "text", "text": "hello there"}]}}
    _, threads = derive([event("c2l", memo, time=10.0), event("c2a", hello, time=11.0)])
    assert [t.fallback_title for t in threads if t.fallback_title] == ["hello there"]


def test_a_frame_of_a_shape_no_rule_expected_is_said_in_words() -> None:
    """The problem note ``liminal history`` shows read ``not derived: TypeError: 'int' object is
    not iterable``: what happened, without the exception's class (``liminal.errors``)."""
    events = [*conversation(), event("c2a", {"jsonrpc": "2.0", "id": 9, "method": "session/prompt",
                                             "params": {"sessionId": "sess-1", "prompt": 5}}, time=1100.0)]
    messages, _ = derive(events)
    [problem] = [m for m in messages.values() if m.kind == "problem"]
    assert problem.text == "not derived, a shape liminal did not expect: 'int' object is not iterable"
