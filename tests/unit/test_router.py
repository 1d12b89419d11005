"""The router, driven with literal frames: bytes in, lines and events out."""

from __future__ import annotations

import json

import orjson
from hypothesis import example, given, settings
from hypothesis import strategies as st

from liminal.acp import jsonrpc
from liminal.acp.events import Direction, Kind
from liminal.acp.router import Output, Router

THREAD = "11111111-1111-4111-8111-111111111111"
BACKING = "22222222-2222-4222-8222-222222222222"
NOW = 1700000000.0


def make(**kwargs: object) -> Router:
    return Router(max_frame_bytes=kwargs.pop("max_frame_bytes", 1 << 20), connection_id="c1", **kwargs)  # type: ignore[arg-type]


def from_client(router: Router, *lines: bytes) -> Output:
    router.receive_from_client(b"".join(line + b"\n" for line in lines), NOW)
    return router.take()


def from_agent(router: Router, *lines: bytes) -> Output:
    router.receive_from_agent(b"".join(line + b"\n" for line in lines), NOW)
    return router.take()


def new_session(router: Router, session: str = THREAD) -> None:
    from_client(router, b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}')
    from_agent(router, b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"' + session.encode() + b'"}}')


# ---------------------------------------------------------------- byte exactness

ODD_FRAMES = [
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}',
    b'  {"jsonrpc" : "2.0",   "method":"_auth/status_update","params":{"state":"ok"}}  ',
    b'{"jsonrpc":"2.0","method":"_unknown/thing","params":{"_meta":{"x":[1,2,3]}}}',
    b'{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"x/y","params":{"n":1e400}}',
    '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"t":"\u00e9\u4e2d\U0001f600"}}}'.encode(),
    b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"t":"\\u00e9"}}}\r',
    b"this is not json",
    b"[1,2,3]",
    b"",
    b'{"jsonrpc":"2.0","id":"abc","result":{"z":' + b"9" * 5000 + b"}}",
]


def test_frames_without_a_mapping_pass_byte_for_byte_both_ways() -> None:
    router = make()
    out = from_client(router, *ODD_FRAMES)
    assert out.to_agent == ODD_FRAMES
    out = from_agent(router, *ODD_FRAMES)
    assert out.to_client == ODD_FRAMES


def test_every_frame_is_tapped_with_raw_bytes_and_parsed_copy() -> None:
    router = make()
    out = from_agent(router, *ODD_FRAMES)
    assert [e.raw for e in out.events] == ODD_FRAMES
    assert all(e.direction is Direction.AGENT_TO_CLIENT for e in out.events)
    assert out.events[0].kind is Kind.REQUEST and out.events[0].method == "initialize"
    assert out.events[1].kind is Kind.NOTIFICATION and out.events[1].thread_id is None
    assert out.events[6].kind is Kind.INVALID and out.events[6].message is None
    assert out.events[9].kind is Kind.RESPONSE
    assert all(e.connection_id == "c1" and e.time == NOW for e in out.events)


def test_tapping_off_produces_no_events() -> None:
    router = make(tapping=False)
    assert from_client(router, *ODD_FRAMES).events == []


def test_not_json_is_reported_but_forwarded() -> None:
    router = make()
    out = from_client(router, b"garbage")
    assert out.to_agent == [b"garbage"]
    assert out.problems and "not JSON-RPC" in out.problems[0]


# ------------------------------------------------------------- session-id mapping

def test_a_new_session_is_its_own_thread() -> None:
    router = make()
    from_client(router, b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}')
    out = from_agent(router, b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"' + THREAD.encode() + b'"}}')
    assert out.events[0].method == "session/new"
    assert out.events[0].thread_id == out.events[0].backing_id == THREAD
    assert router.backing_of(THREAD) == THREAD


def test_client_frames_are_rewritten_to_the_backing_id() -> None:
    router = make()
    new_session(router)
    router.bind(THREAD, BACKING)
    prompt = (b'{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"' + THREAD.encode()
              + b'","prompt":[{"type":"text","text":"hi ' + THREAD.encode() + b'"}]}}')
    out = from_client(router, prompt)
    assert out.to_agent == [prompt.replace(b'"sessionId":"' + THREAD.encode(), b'"sessionId":"' + BACKING.encode())]
    # the prompt text that merely mentions the id is not touched
    assert THREAD.encode() in out.to_agent[0]
    cancel = b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId" : "' + THREAD.encode() + b'"}}'
    assert from_client(router, cancel).to_agent == [cancel.replace(THREAD.encode(), BACKING.encode())]
    assert out.events[0].thread_id == THREAD and out.events[0].backing_id == BACKING
    assert out.events[0].raw == prompt  # taps see what arrived


def test_agent_frames_are_rewritten_to_the_thread_id() -> None:
    router = make()
    new_session(router)
    router.bind(THREAD, BACKING)
    b, t = BACKING.encode(), THREAD.encode()
    update = (b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"' + b
              + b'","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}},"n":123456789012345678901234567890}}')
    permission = (b'{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"' + b
                  + b'","toolCall":{"toolCallId":"t1"},"options":[]}}')
    read = b'{"jsonrpc":"2.0","id":1,"method":"fs/read_text_file","params":{"sessionId":"' + b + b'","path":"/a"}}'
    out = from_agent(router, update, permission, read)
    assert out.to_client == [update.replace(b, t), permission.replace(b, t), read.replace(b, t)]
    assert b"123456789012345678901234567890" in out.to_client[0]
    assert [e.thread_id for e in out.events] == [THREAD] * 3
    assert [e.backing_id for e in out.events] == [BACKING] * 3


def test_results_carrying_backing_ids_are_rewritten() -> None:
    router = make()
    new_session(router)
    router.bind(THREAD, BACKING)
    from_client(router, b'{"jsonrpc":"2.0","id":5,"method":"session/list","params":{}}')
    listing = b'{"jsonrpc":"2.0","id":5,"result":{"sessions":[{"sessionId":"' + BACKING.encode() + b'","cwd":"/w"}]}}'
    out = from_agent(router, listing)
    assert out.to_client == [listing.replace(BACKING.encode(), THREAD.encode())]


SWAPPED = "33333333-3333-4333-8333-333333333333"


def listing(*entries: dict[str, object], rpc_id: bytes = b"5") -> bytes:
    return (b'{"jsonrpc":"2.0","id":' + rpc_id + b',"result":{"sessions":'
            + orjson.dumps(list(entries)) + b',"nextCursor":"c2"}}')


def test_a_listing_without_duplicates_is_only_rewritten() -> None:
    router = make()
    new_session(router)
    router.bind(THREAD, BACKING)
    from_client(router, b'{"jsonrpc":"2.0","id":5,"method":"session/list","params":{}}')
    sent = listing({"sessionId": BACKING, "cwd": "/w"}, {"sessionId": "other", "cwd": "/w"})
    assert from_agent(router, sent).to_client == [sent.replace(BACKING.encode(), THREAD.encode())]


def test_an_adopted_backing_id_reaches_the_client_as_its_thread() -> None:
    router = make()
    router.adopt(SWAPPED, THREAD)
    late = (b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"' + SWAPPED.encode()
            + b'","update":{"sessionUpdate":"agent_message_chunk"}}}')
    assert from_agent(router, late).to_client == [late.replace(SWAPPED.encode(), THREAD.encode())]
    assert router.backing_of(THREAD) == THREAD  # adopting does not move the thread


def test_results_are_rewritten_in_one_pass_whatever_the_lineage() -> None:
    router = make()
    for n in range(5000):  # months of swaps, adopted from the journal at start
        router.adopt(f"old-{n}", f"thread-{n % 7}")
    from_client(router, b'{"jsonrpc":"2.0","id":5,"method":"_x/sessions","params":{}}')
    answer = (b'{"jsonrpc":"2.0","id":5,"result":{"a":{"sessionId":"old-12"},"b":{"sessionId" : "old-4999"},'
              b'"c":{"sessionId":"unknown"},"d":{"sessionId":"old\\u002d7"},"text":"sessionId old-12"}}')
    [line] = from_agent(router, answer).to_client
    assert line == (b'{"jsonrpc":"2.0","id":5,"result":{"a":{"sessionId":"thread-5"},"b":{"sessionId" : "thread-1"},'
                    b'"c":{"sessionId":"unknown"},"d":{"sessionId":"thread-0"},"text":"sessionId old-12"}}')


def test_a_note_reaches_only_the_taps() -> None:
    router = make()
    router.bind(THREAD, BACKING)
    router.note("liminal/swap", {"outcome": "committed"}, NOW, thread_id=THREAD)
    out = router.take()
    assert not out.to_client and not out.to_agent
    [event] = out.events
    assert (event.direction, event.kind, event.method, event.thread_id, event.backing_id) == (
        Direction.LIMINAL_NOTE, Kind.NOTIFICATION, "liminal/swap", THREAD, BACKING)
    assert orjson.loads(event.raw)["params"] == {"outcome": "committed"} == event.message["params"]  # type: ignore[index]


def test_fork_result_registers_a_new_thread() -> None:
    router = make()
    new_session(router)
    from_client(router, b'{"jsonrpc":"2.0","id":9,"method":"session/fork","params":{"sessionId":"' + THREAD.encode() + b'","cwd":"/w"}}')
    out = from_agent(router, b'{"jsonrpc":"2.0","id":9,"result":{"sessionId":"forked"}}')
    assert out.to_client == [b'{"jsonrpc":"2.0","id":9,"result":{"sessionId":"forked"}}']
    assert out.events[0].method == "session/fork" and out.events[0].thread_id == "forked"


def test_binding_back_to_the_thread_id_restores_pass_through() -> None:
    router = make()
    router.bind(THREAD, BACKING)
    router.bind(THREAD, THREAD)
    frame = b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"' + THREAD.encode() + b'"}}'
    assert from_client(router, frame).to_agent == [frame]


def test_late_frames_of_an_earlier_backing_session_still_reach_the_thread() -> None:
    router = make()
    router.bind(THREAD, BACKING)
    router.bind(THREAD, "33333333-3333-4333-8333-333333333333")
    old = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"' + BACKING.encode() + b'","update":{}}}'
    assert from_agent(router, old).to_client == [old.replace(BACKING.encode(), THREAD.encode())]


def test_response_to_a_permission_request_is_attributed_to_its_thread() -> None:
    router = make()
    router.bind(THREAD, BACKING)
    from_agent(router, b'{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"' + BACKING.encode() + b'"}}')
    out = from_client(router, b'{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"selected","optionId":"a"}}}')
    assert out.to_agent == [b'{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"selected","optionId":"a"}}}']
    assert out.events[0].method == "session/request_permission"
    assert out.events[0].thread_id == THREAD and out.events[0].backing_id == BACKING


# ------------------------------------------------------------------ own requests

def test_own_requests_and_their_answers_never_reach_the_client() -> None:
    router = make()
    rpc_id = router.send_request("session/load", {"sessionId": BACKING, "cwd": "/w", "mcpServers": []}, NOW,
                                 thread_id=THREAD)
    out = router.take()
    assert rpc_id.startswith("liminal-")
    sent = orjson.loads(out.to_agent[0])
    assert sent == {"jsonrpc": "2.0", "id": rpc_id, "method": "session/load",
                    "params": {"sessionId": BACKING, "cwd": "/w", "mcpServers": []}}
    assert out.events[0].direction is Direction.LIMINAL_TO_AGENT
    answer = b'{"jsonrpc":"2.0","id":"' + rpc_id.encode() + b'","result":{"modes":null}}'
    out = from_agent(router, answer)
    assert out.to_client == []
    assert out.own_responses == [(rpc_id, {"jsonrpc": "2.0", "id": rpc_id, "result": {"modes": None}})]
    assert out.events[0].direction is Direction.AGENT_TO_LIMINAL
    assert out.events[0].method == "session/load"


def test_an_own_request_about_a_session_a_thread_left_is_the_threads() -> None:
    """liminal closes the session a swap left without naming a thread: on main the frame named
    none, and the store made the closed session a thread of its own (one per swap)."""
    router = make()
    router.adopt(BACKING, THREAD)  # the thread was on it; it is on another now
    router.send_request("session/close", {"sessionId": BACKING}, NOW)
    router.send_request("session/close", {"sessionId": "unknown"}, NOW)
    tapped = router.take().events
    assert [(e.thread_id, e.backing_id) for e in tapped] == [(THREAD, BACKING), ("unknown", "unknown")]


def test_own_ids_do_not_collide_with_client_ids_that_look_alike() -> None:
    router = make()
    # a client that happens to use the same string: its answer is the client's
    from_client(router, b'{"jsonrpc":"2.0","id":"liminal-1","method":"x","params":{}}')
    out = from_agent(router, b'{"jsonrpc":"2.0","id":"liminal-1","result":{}}')
    assert out.to_client == [b'{"jsonrpc":"2.0","id":"liminal-1","result":{}}']


def test_captured_sessions_are_swallowed_until_released() -> None:
    router = make()
    router.capture(BACKING)
    replay = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"' + BACKING.encode() + b'","update":{"sessionUpdate":"user_message_chunk"}}}'
    out = from_agent(router, replay)
    assert out.to_client == []
    [event] = out.events
    assert event.direction is Direction.AGENT_TO_LIMINAL
    assert event.message is not None and event.message["params"]["update"]["sessionUpdate"] == "user_message_chunk"
    router.uncapture(BACKING)
    # Until a prompt of the session goes to the agent, history it sends is the load's replay
    # still (Gemini CLI streams it after answering): kept from the client; the session's state
    # (its commands) goes through.
    out = from_agent(router, replay)
    assert out.to_client == [] and out.events[0].direction is Direction.AGENT_TO_LIMINAL
    commands = replay.replace(b"user_message_chunk", b"available_commands_update")
    assert from_agent(router, commands).to_client == [commands]
    from_client(router, b'{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"'
                + BACKING.encode() + b'","prompt":[]}}')
    assert from_agent(router, replay).to_client == [replay]


def test_a_replay_the_agent_streams_after_a_moved_threads_load_answer_stays_hidden() -> None:
    """Rule 8 with an agent that answers the load before its replay ends (Gemini CLI): the
    history it sends after the answer is not the client's; the next turn's is."""
    router = make(replay_from_store=True)
    router.bind(THREAD, BACKING)
    from_client(router, b'{"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":"'
                + THREAD.encode() + b'","cwd":"/","mcpServers":[]}}')
    chunk = (b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"' + BACKING.encode()
             + b'","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"old"}}}}')
    assert from_agent(router, chunk).to_client == []
    out = from_agent(router, b'{"jsonrpc":"2.0","id":1,"result":{}}')
    [request] = out.replays
    router.finish_replay(request.token, [], NOW)
    late = router.take()
    assert late.to_client and all(b"old" not in line for line in late.to_client)
    assert from_agent(router, chunk, chunk).to_client == []  # the replay's tail, as a run too
    from_client(router, b'{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"'
                + THREAD.encode() + b'","prompt":[]}}')
    assert from_agent(router, chunk).to_client == [chunk.replace(BACKING.encode(), THREAD.encode())]
    # Without the store's history the client gets the agent's own replay: all of it.
    from_client(router, b'{"jsonrpc":"2.0","id":3,"method":"session/load","params":{"sessionId":"'
                + THREAD.encode() + b'","cwd":"/","mcpServers":[]}}')
    [request] = from_agent(router, b'{"jsonrpc":"2.0","id":3,"result":{}}').replays
    router.finish_replay(request.token, None, NOW)
    router.take()
    assert from_agent(router, chunk).to_client == [chunk.replace(BACKING.encode(), THREAD.encode())]


def test_notify_client_writes_a_notification_of_liminals_own() -> None:
    router = make()
    router.notify_client("session/update", {"sessionId": THREAD, "update": {"sessionUpdate": "agent_thought_chunk"}}, NOW)
    out = router.take()
    assert orjson.loads(out.to_client[0])["params"]["sessionId"] == THREAD
    assert out.events[0].direction is Direction.LIMINAL_TO_CLIENT


# ----------------------------------------------------------------------- holds

def prompt_frame(rpc_id: int, session: str = THREAD) -> bytes:
    return (b'{"jsonrpc":"2.0","id":' + str(rpc_id).encode() + b',"method":"session/prompt","params":{"sessionId":"'
            + session.encode() + b'","prompt":[]}}')


def test_held_prompts_wait_and_are_released_to_the_new_backing_session() -> None:
    router = make()
    new_session(router)
    router.hold(THREAD)
    answer = b'{"jsonrpc":"2.0","id":0,"result":{}}'
    out = from_client(router, prompt_frame(2), b'{"jsonrpc":"2.0","method":"_x","params":{}}', answer)
    assert out.to_agent == [answer]  # answers to the agent are never held
    assert router.held_count(THREAD) == 2  # the sessionless notification waits in order
    assert out.events[0].method == "session/prompt"  # tapped on arrival
    router.bind(THREAD, BACKING)
    assert router.release(THREAD) == 2
    out = router.take()
    assert out.to_agent == [prompt_frame(2, BACKING), b'{"jsonrpc":"2.0","method":"_x","params":{}}']
    assert not router.is_held(THREAD)


def test_cancel_answers_held_prompts_as_cancelled() -> None:
    router = make()
    router.hold(THREAD)
    from_client(router, prompt_frame(3))
    out = from_client(router, b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"' + THREAD.encode() + b'"}}')
    assert out.to_client == [b'{"jsonrpc":"2.0","id":3,"result":{"stopReason":"cancelled"}}']
    assert router.held_count(THREAD) == 0
    assert router.pending_client_requests == 0


def test_prompt_in_flight_and_open_agent_requests_are_visible() -> None:
    router = make()
    from_client(router, prompt_frame(4))
    assert router.prompt_in_flight(THREAD)
    from_agent(router, b'{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"' + THREAD.encode() + b'"}}')
    assert router.agent_request_open(THREAD)
    from_client(router, b'{"jsonrpc":"2.0","id":0,"result":{}}')
    assert not router.agent_request_open(THREAD)
    from_agent(router, b'{"jsonrpc":"2.0","id":4,"result":{"stopReason":"end_turn"}}')
    assert not router.prompt_in_flight(THREAD)


def test_the_agent_is_idle_only_when_nothing_is_under_way_at_it() -> None:
    router = make()
    new_session(router)
    assert router.agent_idle()
    from_client(router, prompt_frame(4))
    assert not router.agent_idle()  # a prompt running
    from_agent(router, b'{"jsonrpc":"2.0","id":4,"result":{"stopReason":"end_turn"}}')
    router.hold(THREAD)
    from_client(router, prompt_frame(5))
    assert router.agent_idle()  # a held prompt has not reached the agent
    from_agent(router, b'{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"'
               + THREAD.encode() + b'"}}')
    assert not router.agent_idle()  # the client owes the agent an answer
    from_client(router, b'{"jsonrpc":"2.0","id":0,"result":{}}')
    assert router.agent_idle()
    router.receive_from_agent(b'{"jsonrpc":"2.0","method":"session/upd', NOW)
    assert not router.agent_idle()  # the agent is in the middle of a line
    from_agent(router, b'ate","params":{}}')
    assert router.agent_idle()
    own = router.send_request("session/set_mode", {"sessionId": THREAD, "modeId": "plan"}, NOW)
    assert not router.agent_idle()  # liminal waits for an answer of its own
    from_agent(router, b'{"jsonrpc":"2.0","id":"' + own.encode() + b'","result":{}}')
    assert router.agent_idle()
    router.capture(BACKING)
    assert not router.agent_idle()  # a swap is opening a session
    router.uncapture(BACKING)
    router.release(THREAD)
    assert not router.agent_idle()  # the released prompt reached it


def test_too_many_held_prompts_release_the_hold() -> None:
    router = make(max_held_per_thread=2)
    router.hold(THREAD)
    out = from_client(router, prompt_frame(1), prompt_frame(2), prompt_frame(3))
    assert out.to_agent == [prompt_frame(1), prompt_frame(2), prompt_frame(3)]
    assert not router.is_held(THREAD)


def test_held_frames_are_bounded_in_bytes_too() -> None:
    """64 frames of the longest size were 64 times the cap held; now past max_held_bytes the
    hold is released as past the count."""
    router = make(max_held_bytes=2 * len(prompt_frame(1)))
    router.hold(THREAD)
    assert from_client(router, prompt_frame(1), prompt_frame(2)).to_agent == []
    out = from_client(router, prompt_frame(3))
    assert out.to_agent == [prompt_frame(1), prompt_frame(2), prompt_frame(3)]
    assert not router.is_held(THREAD) and any("releasing them" in p for p in out.problems)


# ------------------------------------------------------------------- bad input

def test_oversized_request_from_client_gets_an_error_and_is_not_forwarded() -> None:
    router = make(max_frame_bytes=200)
    big = b'{"jsonrpc":"2.0","id":17,"method":"session/prompt","params":{"prompt":"' + b"x" * 1000 + b'"}}'
    out = from_client(router, big, b'{"jsonrpc":"2.0","method":"ok"}')
    assert out.to_agent == [b'{"jsonrpc":"2.0","method":"ok"}']
    error = orjson.loads(out.to_client[0])
    assert error["id"] == 17 and error["error"]["code"] == -32600
    assert out.events[0].kind is Kind.OVERSIZED and out.events[0].size == len(big)


def test_oversized_notification_is_dropped_quietly_for_the_peer() -> None:
    router = make(max_frame_bytes=100)
    out = from_client(router, b'{"jsonrpc":"2.0","method":"x","params":"' + b"y" * 500 + b'"}')
    assert out.to_agent == [] and out.to_client == []
    assert out.problems


def test_oversized_answer_from_agent_fails_the_clients_request() -> None:
    router = make(max_frame_bytes=100)
    from_client(router, b'{"jsonrpc":"2.0","id":"q","method":"fs/x","params":{}}')
    out = from_agent(router, b'{"jsonrpc":"2.0","result":{"c":"' + b"z" * 500 + b'"},"id":"q"}')
    assert orjson.loads(out.to_client[0])["id"] == "q"
    assert router.pending_client_requests == 0


def test_oversized_request_from_agent_gets_an_error_back() -> None:
    router = make(max_frame_bytes=100)
    out = from_agent(router, b'{"jsonrpc":"2.0","id":8,"method":"fs/write_text_file","params":{"content":"' + b"z" * 500 + b'"}}')
    assert out.to_client == []
    assert orjson.loads(out.to_agent[0])["id"] == 8


def test_agent_gone_fails_every_pending_client_request() -> None:
    router = make()
    from_client(router, prompt_frame(1), b'{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"x"}')
    router.hold(THREAD)
    from_client(router, prompt_frame(2))
    router.agent_gone(NOW, "exit code 1")
    out = router.take()
    ids = sorted(str(orjson.loads(line.replace(b"123456789012345678901234567890", b'"big"'))["id"]) for line in out.to_client)
    assert ids == ["1", "2", "big"]
    assert all(b"-32603" in line for line in out.to_client)
    assert router.pending_client_requests == 0


def test_a_request_sent_after_the_agent_is_gone_is_answered_until_a_new_one_stands_in() -> None:
    """Rule 7: before, a request sent after the agent's exit went to no one and was never
    answered (a client slower than ``npx -y`` finding no package)."""
    router = make()
    from_client(router, b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}')
    router.agent_gone(NOW, "exit code 1", said="npm error 404 Not Found")
    [owed] = router.take().to_client
    assert orjson.loads(owed)["error"]["message"] == (
        "the agent exited before answering initialize (exit code 1); its stderr last said: npm error 404 Not Found")
    out = from_client(router, b'{"jsonrpc":"2.0","id":{"odd":1},"method":"session/new","params":{}}',
                      b'{"jsonrpc":"2.0","method":"session/cancel","params":{}}')
    [late] = out.to_client
    assert orjson.loads(late) == {"jsonrpc": "2.0", "id": {"odd": 1}, "error": {
        "code": jsonrpc.INTERNAL_ERROR, "message": "the agent exited (exit code 1); its stderr last said: npm error 404 Not Found"}}
    assert router.pending_client_requests == 0
    router.agent_restarted()
    out = from_client(router, b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{}}')
    assert out.to_client == [] and len(out.to_agent) == 1


def test_an_agent_that_never_started_is_named_in_every_answer() -> None:
    router = make()
    why = "liminal could not start the agent `npx -y nope`: no such file or directory"
    router.agent_gone(NOW, "no such file or directory", why=why)
    out = from_client(router, b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}')
    assert [orjson.loads(line)["error"]["message"] for line in out.to_client] == [why]
    assert out.to_agent == []


any_id = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=6,
)


@given(rpc_id=any_id)
@example(rpc_id=[-9223372036854775809])  # an integer past 64 bits in an array: came back a float
@settings(max_examples=150, deadline=None)
def test_agent_gone_answers_a_request_whatever_its_id(rpc_id: object) -> None:
    # An object or array id is not what JSON-RPC allows, but a client that sends one still gets
    # its answer: the error path used to crash on it (and liminal exited with the client hanging).
    router = make()
    id_json = json.dumps(rpc_id).encode()
    from_client(router, b'{"jsonrpc":"2.0","id":' + id_json + b',"method":"session/prompt","params":{}}')
    router.agent_gone(NOW, "exit code 1")
    out = router.take()
    assert len(out.to_client) == 1
    answer = json.loads(out.to_client[0])
    assert answer["id"] == json.loads(id_json)
    assert answer["error"]["code"] == jsonrpc.INTERNAL_ERROR
    assert router.pending_client_requests == 0


# ------------------------------------------------------------------ properties

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10))
frames = st.one_of(
    st.binary(max_size=120).map(lambda b: b.replace(b"\n", b"")),
    st.fixed_dictionaries({
        "jsonrpc": st.just("2.0"),
        "id": st.one_of(st.integers(), st.text(max_size=8)),
        "method": st.sampled_from(["session/prompt", "session/update", "fs/read_text_file", "_x", "session/new"]),
        "params": st.fixed_dictionaries({"sessionId": st.sampled_from([THREAD, BACKING, "other"])},
                                        optional={"x": json_scalars}),
    }).map(lambda m: json.dumps(m).encode()),
    st.fixed_dictionaries({
        "jsonrpc": st.just("2.0"), "id": st.one_of(st.integers(), st.text(max_size=8)),
        "result": st.one_of(json_scalars, st.fixed_dictionaries({"sessionId": st.sampled_from([THREAD, BACKING])})),
    }).map(lambda m: json.dumps(m).encode()),
)


@settings(max_examples=300)
@given(st.lists(frames, max_size=30), st.lists(st.booleans(), max_size=30))
def test_without_a_mapping_the_router_is_a_perfect_relay(lines: list[bytes], directions: list[bool]) -> None:
    router = make()
    for i, line in enumerate(lines):
        to_agent = directions[i] if i < len(directions) else True
        out = from_client(router, line) if to_agent else from_agent(router, line)
        forwarded = out.to_agent if to_agent else out.to_client
        assert forwarded == [line]


@settings(max_examples=200)
@given(st.lists(frames, max_size=30), st.lists(st.booleans(), max_size=30))
def test_with_a_mapping_the_client_never_sees_the_backing_id(lines: list[bytes], directions: list[bool]) -> None:
    router = make()
    router.bind(THREAD, BACKING)
    for i, line in enumerate(lines):
        to_agent = directions[i] if i < len(directions) else True
        if to_agent:  # requests and notifications name the backing session (a response is the
            for sent in from_client(router, line).to_agent:  # client's, about no session)
                message = jsonrpc.parse(sent) or {}
                if "method" in message:
                    assert _session_ids(message.get("params")) <= {BACKING, "other"}, sent
        else:
            for sent in from_agent(router, line).to_client:
                message = jsonrpc.parse(sent) or {}
                found = _session_ids(message.get("params")) | _session_ids(message.get("result"))
                assert BACKING not in found, sent


def _session_ids(part: object) -> set[str]:
    return {part["sessionId"]} if isinstance(part, dict) and "sessionId" in part else set()


def test_canonical_session_updates_are_routed_from_their_bytes() -> None:
    router = make()
    router.bind(THREAD, BACKING)
    line = (b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"' + BACKING.encode()
            + b'","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}}')
    out = from_agent(router, line)
    assert out.to_client == [line.replace(BACKING.encode(), THREAD.encode())]
    [event] = out.events
    assert (event.kind, event.method, event.thread_id, event.backing_id) == (
        Kind.NOTIFICATION, "session/update", THREAD, BACKING)
    assert event.message == orjson.loads(line)
    # cut short: forwarded untouched like any unparsable line; its parsed copy is None
    out = from_agent(router, line[:-3])
    assert out.to_client == [line[:-3].replace(BACKING.encode(), THREAD.encode())]
    assert out.events[0].message is None
    # a captured session's updates are swallowed, and tapped as liminal's own
    router.capture(BACKING)
    out = from_agent(router, line)
    assert out.to_client == []
    assert out.events[0].direction is Direction.AGENT_TO_LIMINAL and out.events[0].thread_id == THREAD


def test_an_escaped_session_id_takes_the_parsed_path() -> None:
    router = make()
    line = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"a\\u0062c","update":{}}}'
    out = from_agent(router, line)
    assert out.to_client == [line]
    assert out.events[0].backing_id == "abc"


def test_everything_about_a_held_thread_waits_in_order() -> None:
    router = make()
    new_session(router)
    router.hold(THREAD)
    mode = b'{"jsonrpc":"2.0","id":7,"method":"session/set_mode","params":{"sessionId":"' + THREAD.encode() + b'","modeId":"plan"}}'
    other = b'{"jsonrpc":"2.0","id":8,"method":"session/prompt","params":{"sessionId":"other","prompt":[]}}'
    out = from_client(router, prompt_frame(2), mode, other)
    assert out.to_agent == [other]  # another thread is not held
    out = from_client(router, b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"' + THREAD.encode() + b'"}}')
    assert out.to_client == [b'{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}']
    assert len(out.to_agent) == 1  # the cancel itself still goes to the agent
    router.bind(THREAD, BACKING)
    router.release(THREAD)
    assert router.take().to_agent == [mode.replace(THREAD.encode(), BACKING.encode())]


# ------------------------------------------------------- loads of moved threads (rule 8)

def load_frame(rpc_id: int, session: str = THREAD) -> bytes:
    return (b'{"jsonrpc":"2.0","id":' + str(rpc_id).encode() + b',"method":"session/load","params":{"sessionId":"'
            + session.encode() + b'","cwd":"/w","mcpServers":[]}}')


def update_frame(session: str, kind: str, text: str = "") -> bytes:
    body: dict[str, object] = {"sessionUpdate": kind}
    if kind.endswith("_chunk"):
        body["content"] = {"type": "text", "text": text}
    return orjson.dumps({"jsonrpc": "2.0", "method": "session/update",
                         "params": {"sessionId": session, "update": body}})


HISTORY = [{"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "the first prompt"}},
           {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "its answer"}}]


def moved(**kwargs: object) -> Router:
    router = make(replay_from_store=True, **kwargs)
    router.bind(THREAD, BACKING)
    return router


def test_loading_a_moved_thread_parks_the_answer_and_replays_the_given_history() -> None:
    router = moved()
    out = from_client(router, load_frame(7))
    assert out.to_agent == [load_frame(7, BACKING)]
    compressed = update_frame(BACKING, "user_message_chunk", "[summary] of everything")
    commands = update_frame(BACKING, "available_commands_update")
    out = from_agent(router, compressed, commands)
    assert out.to_client == []  # the compressed replay is captured
    assert [e.direction for e in out.events] == [Direction.AGENT_TO_LIMINAL] * 2
    answer = b'{"jsonrpc":"2.0","id":7,"result":{"modes":{"currentModeId":"default"}}}'
    out = from_agent(router, answer)
    assert out.to_client == [] and out.events == []  # parked, tapped when it is sent
    [request] = out.replays
    assert (request.thread_id, request.backing_id, request.agent_lines) == (THREAD, BACKING, (compressed, commands))
    assert router.replays_waiting == 1
    assert router.finish_replay(request.token, HISTORY, NOW + 1)
    out = router.take()
    sent = [orjson.loads(line) for line in out.to_client]
    assert [m["params"]["update"] for m in sent[:2]] == HISTORY
    assert all(m["params"]["sessionId"] == THREAD for m in sent[:3])
    assert sent[2]["params"]["update"]["sessionUpdate"] == "available_commands_update"  # current state, kept
    assert out.to_client[3] == answer
    assert [(e.direction, e.kind) for e in out.events] == [
        (Direction.LIMINAL_TO_CLIENT, Kind.NOTIFICATION)] * 3 + [(Direction.AGENT_TO_CLIENT, Kind.RESPONSE)]
    assert out.events[3].raw == answer and out.events[3].method == "session/load"
    assert out.events[3].thread_id == THREAD and out.events[3].backing_id == BACKING
    assert not router.finish_replay(request.token, HISTORY, NOW)  # once only
    assert router.pending_client_requests == 0 and router.replays_waiting == 0
    # no longer captured: the session's next turn reaches the client
    live = update_frame(BACKING, "agent_message_chunk", "live")
    from_client(router, b'{"jsonrpc":"2.0","id":8,"method":"session/prompt","params":{"sessionId":"'
                + THREAD.encode() + b'","prompt":[]}}')
    assert from_agent(router, live).to_client == [live.replace(BACKING.encode(), THREAD.encode())]


def test_without_history_the_agents_own_replay_reaches_the_client() -> None:
    router = moved()
    from_client(router, load_frame(7))
    replayed = [update_frame(BACKING, "user_message_chunk", "[summary]"), update_frame(BACKING, "usage_update")]
    from_agent(router, *replayed)
    [request] = from_agent(router, b'{"jsonrpc":"2.0","id":7,"result":{}}').replays
    router.finish_replay(request.token, None, NOW)
    out = router.take()
    assert out.to_client == [*(r.replace(BACKING.encode(), THREAD.encode()) for r in replayed),
                             b'{"jsonrpc":"2.0","id":7,"result":{}}']


def test_a_failed_load_is_answered_at_once() -> None:
    router = moved()
    from_client(router, load_frame(7))
    from_agent(router, update_frame(BACKING, "user_message_chunk", "partial"))
    error = b'{"jsonrpc":"2.0","id":7,"error":{"code":-32002,"message":"no such session"}}'
    out = from_agent(router, error)
    assert out.to_client == [error] and out.replays == []
    assert router.replays_waiting == 0
    late = update_frame(BACKING, "agent_message_chunk", "late")
    assert from_agent(router, late).to_client == []  # the failed load's replay, till a prompt
    commands = update_frame(BACKING, "available_commands_update")
    assert from_agent(router, commands).to_client == [commands.replace(BACKING.encode(), THREAD.encode())]


def test_a_thread_that_never_moved_loads_as_before() -> None:
    router = make(replay_from_store=True)
    from_client(router, load_frame(7))
    replay = update_frame(THREAD, "user_message_chunk", "hello")
    assert from_agent(router, replay).to_client == [replay]
    out = from_agent(router, b'{"jsonrpc":"2.0","id":7,"result":{}}')
    assert out.to_client == [b'{"jsonrpc":"2.0","id":7,"result":{}}'] and out.replays == []


def test_without_a_replayer_the_compressed_replay_passes() -> None:
    router = make()  # replay_from_store off: nobody would answer
    router.bind(THREAD, BACKING)
    from_client(router, load_frame(7))
    replay = update_frame(BACKING, "user_message_chunk", "[summary]")
    assert from_agent(router, replay).to_client == [replay.replace(BACKING.encode(), THREAD.encode())]
    assert from_agent(router, b'{"jsonrpc":"2.0","id":7,"result":{}}').replays == []


def test_other_traffic_flows_while_a_load_is_parked() -> None:
    router = moved()
    from_client(router, load_frame(7))
    [request] = from_agent(router, b'{"jsonrpc":"2.0","id":7,"result":{}}').replays
    other = prompt_frame(8, "other")
    assert from_client(router, other).to_agent == [other]
    answer = b'{"jsonrpc":"2.0","id":8,"result":{"stopReason":"end_turn"}}'
    assert from_agent(router, answer).to_client == [answer]
    # after the agent's answer the session is live again: its notifications are not held back
    commands = update_frame(BACKING, "available_commands_update")
    assert from_agent(router, commands).to_client == [commands.replace(BACKING.encode(), THREAD.encode())]
    router.finish_replay(request.token, HISTORY, NOW)
    assert router.take().to_client[-1] == b'{"jsonrpc":"2.0","id":7,"result":{}}'


def test_a_load_held_during_a_swap_replays_from_the_new_session() -> None:
    router = make(replay_from_store=True)
    router.hold(THREAD)
    assert from_client(router, load_frame(7)).to_agent == []
    router.bind(THREAD, BACKING)  # the swap commits
    router.release(THREAD)
    assert router.take().to_agent == [load_frame(7, BACKING)]
    assert from_agent(router, update_frame(BACKING, "user_message_chunk", "[summary]")).to_client == []
    [request] = from_agent(router, b'{"jsonrpc":"2.0","id":7,"result":{}}').replays
    assert request.backing_id == BACKING


def test_the_agent_gone_answers_loading_and_parked_loads() -> None:
    router = moved()
    router.bind("t2", "b2")
    from_client(router, load_frame(7), load_frame(8, "t2"))
    from_agent(router, update_frame(BACKING, "user_message_chunk", "[summary]"))
    from_agent(router, b'{"jsonrpc":"2.0","id":7,"result":{}}')  # parked
    router.agent_gone(NOW, "exit code 1")
    out = router.take()
    error, replayed, answer = out.to_client
    assert orjson.loads(error)["id"] == 8 and b"-32603" in error  # still loading: failed
    assert b"[summary]" in replayed and THREAD.encode() in replayed  # answered: the agent's replay
    assert answer == b'{"jsonrpc":"2.0","id":7,"result":{}}'
    assert router.replays_waiting == 0


agent_updates = st.lists(st.tuples(
    st.sampled_from(["user_message_chunk", "agent_message_chunk", "tool_call", "plan",
                     "available_commands_update", "usage_update", "current_mode_update"]),
    st.sampled_from([BACKING, "other"]),
), max_size=20)


@settings(max_examples=200)
@given(agent_updates, st.booleans(), st.sampled_from([1, 7, 123456789012345678901234567890]))
def test_a_moved_threads_load_shows_the_given_history_and_the_agents_state_only(
        updates: list[tuple[str, str]], fallback: bool, rpc_id: int) -> None:
    router = moved()
    from_client(router, load_frame(rpc_id))
    lines = [update_frame(session, kind, f"text {n}") for n, (kind, session) in enumerate(updates)]
    seen_early = from_agent(router, *lines).to_client if lines else []
    # the other session's frames pass at once; none of the captured backing's do
    assert seen_early == [line for line, (_, session) in zip(lines, updates, strict=True) if session == "other"]
    answer = b'{"jsonrpc":"2.0","id":' + str(rpc_id).encode() + b',"result":{}}'
    [request] = from_agent(router, answer).replays
    router.finish_replay(request.token, None if fallback else HISTORY, NOW)
    sent = router.take().to_client
    assert sent[-1] == answer
    captured = [line.replace(BACKING.encode(), THREAD.encode())
                for line, (kind, session) in zip(lines, updates, strict=True) if session == BACKING
                and (fallback or kind not in {"user_message_chunk", "agent_message_chunk", "tool_call", "plan"})]
    history = [] if fallback else [orjson.dumps({"jsonrpc": "2.0", "method": "session/update",
                                                 "params": {"sessionId": THREAD, "update": u}}) for u in HISTORY]
    assert sent[:-1] == history + captured
    assert all(BACKING.encode() not in line for line in sent)


def test_a_big_integer_id_after_a_huge_value_is_echoed_exactly() -> None:
    """The id's exact bytes come from the ends of the line (the walk over it is per byte)."""
    router = make(max_frame_bytes=1 << 24)
    big = b"123456789012345678901234567890"
    from_client(router, b'{"jsonrpc":"2.0","method":"_x/y","params":{"pad":"' + b"p" * 3_000_000
                + b'"},"id":' + big + b"}")
    router.agent_gone(NOW, "exit code 1")
    [error] = router.take().to_client
    assert error.startswith(b'{"jsonrpc":"2.0","id":' + big + b",")


def test_a_hooked_request_is_answered_locally_once_and_never_reaches_the_agent() -> None:
    from liminal.acp.router import LOCAL

    router = make()
    new_session(router)
    seen: list[str] = []

    def hook(method: str, message: dict[str, object], thread: str | None) -> object:
        seen.append(method)
        params = message.get("params")
        text = json.dumps(params)
        return LOCAL if "/mark" in text else None

    router.add_request_hook(("session/prompt",), hook)  # type: ignore[arg-type]
    prompt = jsonrpc.request_frame(7, "session/prompt", {"sessionId": THREAD, "prompt": [
        {"type": "text", "text": "/mark A"}]})
    out = from_client(router, prompt)
    assert out.to_agent == [] and [r.key for r in out.local] == [7]
    # The store sees it; nothing that watches the agent's traffic takes it for the agent's.
    assert [e.direction for e in out.events] == [Direction.CLIENT_TO_LIMINAL]
    assert router.answer_local(7, {"stopReason": "end_turn"})
    assert not router.answer_local(7, {"stopReason": "end_turn"})  # once
    answer = router.take().to_client
    assert [json.loads(line) for line in answer] == [{"jsonrpc": "2.0", "id": 7, "result": {"stopReason": "end_turn"}}]
    # Anything else passes as sent, and the hook saw only the method it asked for.
    other = jsonrpc.request_frame(8, "session/prompt", {"sessionId": THREAD, "prompt": []})
    assert from_client(router, other).to_agent == [other]
    assert seen == ["session/prompt", "session/prompt"]


def test_a_hook_may_amend_a_request_before_it_is_forwarded() -> None:
    router = make()

    def amend(method: str, message: dict[str, object], thread: str | None) -> dict[str, object]:
        params = dict(message["params"])  # type: ignore[call-overload]
        params["mcpServers"] = [{"name": "liminal"}]
        return {**message, "params": params}

    router.add_request_hook(("session/new",), amend)  # type: ignore[arg-type]
    out = from_client(router, jsonrpc.request_frame(1, "session/new", {"cwd": "/w", "mcpServers": []}))
    assert [json.loads(line)["params"]["mcpServers"] for line in out.to_agent] == [[{"name": "liminal"}]]


def test_hooks_see_each_others_amendments_and_a_kept_request_carries_them() -> None:
    # A load liminal answers itself (a thread whose session has no file) must still carry the
    # MCP server another component adds to every load, whichever component was added first.
    from liminal.acp.router import LOCAL

    for keep_first in (True, False):
        router = make()
        new_session(router)
        seen: list[object] = []

        def amend(method: str, message: dict[str, object], thread: str | None) -> dict[str, object]:
            params = dict(message["params"])  # type: ignore[call-overload]
            params["mcpServers"] = [{"name": "liminal"}]
            return {**message, "params": params}

        def keep(method: str, message: dict[str, object], thread: str | None,
                 seen: list[object] = seen) -> object:
            seen.append(message["params"])
            return LOCAL

        hooks = [keep, amend] if keep_first else [amend, keep]
        for hook in hooks:
            router.add_request_hook(("session/load",), hook)  # type: ignore[arg-type]
        out = from_client(router, jsonrpc.request_frame(3, "session/load", {
            "sessionId": THREAD, "cwd": "/w", "mcpServers": []}))
        assert out.to_agent == []
        [kept] = out.local
        assert kept.message["params"]["mcpServers"] == [{"name": "liminal"}]
        assert seen == [{"sessionId": THREAD, "cwd": "/w", "mcpServers": [] if keep_first else [{"name": "liminal"}]}]


def test_an_update_hook_amends_what_the_client_gets_and_the_taps_keep_what_the_agent_sent() -> None:
    router = make()
    new_session(router)
    router.add_update_hook(("available_commands_update",),
                           lambda thread, update: {**update, "availableCommands": [{"name": thread}]})
    line = (b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"' + THREAD.encode()
            + b'","update":{"sessionUpdate":"available_commands_update","availableCommands":[]}}}')
    out = from_agent(router, line)
    [sent] = out.to_client
    assert json.loads(sent)["params"]["update"]["availableCommands"] == [{"name": THREAD}]
    assert [e.raw for e in out.events] == [line]
    chunk = (b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"' + THREAD.encode()
             + b'","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}}')
    assert from_agent(router, chunk).to_client == [chunk]  # other kinds take the fast path untouched


def test_an_update_hook_sees_its_kind_whatever_the_order_of_the_params() -> None:
    """A line that starts canonically but puts something between the session id and the update
    cannot tell its kind from the bytes: it takes the parsed path, and the hook sees it (it went
    by on the fast path untouched, liminal's commands missing from that listing)."""
    router = make()
    new_session(router)
    router.add_update_hook(("available_commands_update",),
                           lambda thread, update: {**update, "availableCommands": [{"name": "ours"}]})
    line = (b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"' + THREAD.encode()
            + b'","_meta":{"x":1},"update":{"sessionUpdate":"available_commands_update","availableCommands":[]}}}')
    [sent] = from_agent(router, line).to_client
    assert json.loads(sent)["params"]["update"]["availableCommands"] == [{"name": "ours"}]
    other = line.replace(b"available_commands_update", b"agent_message_chunk")
    assert from_agent(router, other).to_client == [other]  # parsed, not a hooked kind: as sent


def test_a_failing_hook_never_stops_a_frame() -> None:
    router = make()
    new_session(router)

    def broken(*args: object) -> None:
        raise RuntimeError("component bug")

    router.add_request_hook(("session/prompt",), broken)  # type: ignore[arg-type]
    router.add_update_hook(("available_commands_update",), broken)  # type: ignore[arg-type]
    prompt = jsonrpc.request_frame(5, "session/prompt", {"sessionId": THREAD, "prompt": []})
    out = from_client(router, prompt)
    assert out.to_agent == [prompt] and out.problems
    line = (b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"' + THREAD.encode()
            + b'","update":{"sessionUpdate":"available_commands_update","availableCommands":[]}}}')
    out = from_agent(router, line)
    assert out.to_client == [line] and out.problems


def test_an_amended_request_json_cannot_carry_goes_as_sent() -> None:
    router = make()
    router.add_request_hook(("session/new",), lambda method, message, thread: {**message, "x": 1})
    line = b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[],"n":123456789012345678901234567890}}'
    out = from_client(router, line)
    assert out.to_agent == [line] and "cannot be encoded" in out.problems[0]


def test_an_own_request_never_shares_an_id_with_a_client_request_under_way() -> None:
    # A client whose ids look like liminal's: another liminal in front of this one (its own
    # requests are this one's client requests), both counting from 1. Whichever came first,
    # each answer must reach the one that asked: a client's prompt answer taken for liminal's
    # would leave the client waiting forever, and liminal would take it for a resume's.
    prompt = (b'{"jsonrpc":"2.0","id":"liminal-1","method":"session/prompt","params":{"sessionId":"'
              + THREAD.encode() + b'","prompt":[]}}')
    answer = b'{"jsonrpc":"2.0","id":"liminal-1","result":{"stopReason":"end_turn"}}'
    for client_first in (True, False):
        router = make()
        if client_first:
            from_client(router, prompt)
        own = router.send_request("session/set_mode", {"sessionId": THREAD, "modeId": "plan"}, NOW)
        if not client_first:
            from_client(router, prompt)
        router.take()
        out = from_agent(router, answer)
        assert out.to_client == [answer] and out.own_responses == []
        out = from_agent(router, b'{"jsonrpc":"2.0","id":"' + own.encode() + b'","result":{}}')
        assert out.to_client == [] and [rpc_id for rpc_id, _ in out.own_responses] == [own]
