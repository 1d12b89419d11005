"""Rule 8's bookkeeping on its own (``liminal.acp.moved_loads``), with literal lines: a load of a
moved thread starts, the agent's replay is kept, its answer is parked, the load is finished.
The router's use of it (captures, what reaches the client) is in ``tests/unit/test_router.py``."""

from __future__ import annotations

import orjson

from liminal.acp.moved_loads import MovedLoads

THREAD, BACKING = "thread-1", "backing-1"


def update(kind: str, session: str = BACKING) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "method": "session/update",
                         "params": {"sessionId": session, "update": {"sessionUpdate": kind}}})


ANSWER = b'{"jsonrpc":"2.0","id":7,"result":{}}'


def test_a_load_keeps_its_replay_parks_its_answer_and_finishes_once() -> None:
    loads = MovedLoads()
    loads.start(7, THREAD, BACKING)
    replay = [update("user_message_chunk"), update("available_commands_update"), update("tool_call"),
              b"not json", update("usage_update")]
    for line in replay:
        loads.keep(BACKING, line)
    loads.keep("other", update("user_message_chunk", "other"))  # no load of it: not kept
    assert loads.under_way() and loads.parked == []
    load = loads.answered(7)
    assert load is not None and loads.answered(8) is None
    assert loads.end(load)  # the last load of the backing: the router uncaptures it
    request = loads.park(load, ANSWER, ANSWER, orjson.loads(ANSWER), 7)
    assert (request.thread_id, request.backing_id, request.agent_lines) == (THREAD, BACKING, tuple(replay))
    assert loads.parked == [request.token] and loads.under_way()
    done = loads.finish(request.token, with_history=True)
    assert done is not None and done.load.answer == ANSWER
    # With a history given, the agent's replayed lines that are not history: its state now.
    assert done.lines == (replay[1], b"not json", replay[4])
    assert loads.finish(request.token, with_history=True) is None  # once only
    assert not loads.under_way()


def test_without_history_every_replayed_line_is_passed_on() -> None:
    loads = MovedLoads()
    loads.start("a", THREAD, BACKING)
    loads.keep(BACKING, update("agent_message_chunk"))
    load = loads.answered("a")
    assert load is not None
    loads.end(load)
    token = loads.park(load, ANSWER, ANSWER, {}, "a").token
    done = loads.finish(token, with_history=False)
    assert done is not None and done.lines == (update("agent_message_chunk"),)


def test_two_loads_of_one_session_are_answered_in_order() -> None:
    """An agent answers one load at a time: what comes for the session is the oldest's."""
    loads = MovedLoads()
    loads.start(1, THREAD, BACKING)
    loads.start(2, THREAD, BACKING)
    loads.keep(BACKING, update("user_message_chunk"))
    first = loads.answered(1)
    assert first is not None and not loads.end(first)  # another load still captures it
    loads.keep(BACKING, update("plan"))
    second = loads.answered(2)
    assert second is not None and loads.end(second)
    assert first.captured == [update("user_message_chunk")] and second.captured == [update("plan")]


def test_a_new_agent_forgets_unanswered_loads_but_not_parked_ones() -> None:
    loads = MovedLoads()
    loads.start(1, THREAD, BACKING)
    loads.start(2, "thread-2", "backing-2")
    answered = loads.answered(1)
    assert answered is not None
    loads.end(answered)
    token = loads.park(answered, ANSWER, ANSWER, {}, 1).token
    assert [load.key for load in loads.unanswered()] == [2]
    loads.forget_unanswered()
    assert loads.unanswered() == [] and loads.answered(2) is None
    assert loads.parked == [token]
