"""The router's rule 11: a side session of liminal's own (a summary's) is liminal's alone.

None of its frames reaches the client or the taps (the store); the agent's requests in it are
answered by the router, refused (a permission with the agent's reject option, anything else an
error), so no tool of it runs; its notifications are kept for liminal until taken."""

from __future__ import annotations

import orjson

from liminal.acp.router import Router
from liminal.acp.side_sessions import REFUSED, text_of
from tests.unit.test_router import NOW, THREAD, from_agent, from_client, make, new_session

SIDE = "33333333-3333-4333-8333-333333333333"


def chunk(session: str, text: str) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": session, "update": {"sessionUpdate": "agent_message_chunk",
                                         "content": {"type": "text", "text": text}}}})


def open_side(router: Router) -> None:
    rpc_id = router.send_request("session/new", {"cwd": "/home/side/x", "mcpServers": []}, NOW, private=True)
    out = router.take()
    assert out.to_agent and not out.events  # not tapped: the store never sees it
    answer = from_agent(router, orjson.dumps({"jsonrpc": "2.0", "id": rpc_id, "result": {"sessionId": SIDE}}))
    assert answer.own_responses and not answer.events and not answer.to_client


def test_a_side_sessions_frames_reach_neither_the_client_nor_the_taps() -> None:
    router = make()
    new_session(router)
    open_side(router)
    prompt = router.send_request("session/prompt", {"sessionId": SIDE, "prompt": [
        {"type": "text", "text": "the person's turns"}]}, NOW)
    out = router.take()
    assert not out.events  # a request about a side session is private whoever sends it
    out = from_agent(router, chunk(SIDE, "## SUMMARY\n"), chunk(THREAD, "the thread's"),
                     chunk(SIDE, "they fixed the port"))
    assert [orjson.loads(line)["params"]["sessionId"] for line in out.to_client] == [THREAD]
    assert [e.backing_id for e in out.events] == [THREAD]
    out = from_agent(router, orjson.dumps({"jsonrpc": "2.0", "id": prompt, "result": {"stopReason": "end_turn"}}))
    assert not out.to_client and not out.events and out.own_responses
    assert text_of(router.take_side(SIDE)) == "## SUMMARY\nthey fixed the port"
    assert router.take_side(SIDE) == []


def test_the_agents_requests_in_a_side_session_are_refused_by_the_router() -> None:
    router = make()
    new_session(router)
    open_side(router)
    permission = {"jsonrpc": "2.0", "id": 7, "method": "session/request_permission", "params": {
        "sessionId": SIDE, "toolCall": {"toolCallId": "t1", "title": "rm -rf"},
        "options": [{"optionId": "allow", "kind": "allow_once", "name": "Allow"},
                    {"optionId": "no", "kind": "reject_once", "name": "Reject"}]}}
    out = from_agent(router, orjson.dumps(permission))
    assert not out.to_client and not out.events
    assert orjson.loads(out.to_agent[0]) == {"jsonrpc": "2.0", "id": 7, "result": {
        "outcome": {"outcome": "selected", "optionId": "no"}}}
    bare = dict(permission, id=8, params={"sessionId": SIDE, "toolCall": {}, "options": []})
    out = from_agent(router, orjson.dumps(bare))
    assert orjson.loads(out.to_agent[0])["result"] == {"outcome": {"outcome": "cancelled"}}
    out = from_agent(router, orjson.dumps({"jsonrpc": "2.0", "id": 9, "method": "terminal/create",
                                           "params": {"sessionId": SIDE, "command": "make"}}))
    assert not out.to_client
    assert orjson.loads(out.to_agent[0])["error"]["message"] == REFUSED
    assert router.agent_idle()  # nothing is owed to the client for them


def test_the_clients_sessions_are_untouched_and_an_ended_side_sessions_late_frames_go_nowhere() -> None:
    router = make()
    new_session(router)
    open_side(router)
    ask = orjson.dumps({"jsonrpc": "2.0", "id": 5, "method": "session/request_permission",
                        "params": {"sessionId": THREAD, "toolCall": {}, "options": []}})
    out = from_agent(router, ask)
    assert out.to_client == [ask] and not out.to_agent
    router.end_side(SIDE)
    late = chunk(SIDE, "late")  # Codex's usage update after the prompt's answer, say
    out = from_agent(router, late)
    assert not out.to_client and not out.events and router.take_side(SIDE) == []
    out = from_client(router, b'{"jsonrpc":"2.0","id":5,"result":{"outcome":{"outcome":"cancelled"}}}')
    assert out.to_agent


def test_a_side_sessions_chunks_get_no_message_id_and_count_for_no_message() -> None:
    """Rule 10 numbers what the client and the store see; a side session's lines are neither."""
    stamped, plain = make(message_ids=True), make(message_ids=True)
    for router in (stamped, plain):
        new_session(router)
    open_side(stamped)
    out = from_agent(stamped, chunk(SIDE, "## SUMMARY"), chunk(THREAD, "the thread's"))
    assert plain.take_side(SIDE) == [] and stamped.take_side(SIDE) == [chunk(SIDE, "## SUMMARY")]
    mine = from_agent(plain, chunk(THREAD, "the thread's"))
    assert out.to_client == mine.to_client  # the same id: the side chunk took none


# ------------------------------------------------ the agent speaks of a session before it answers

def commands(session: str) -> bytes:
    """What codex-zed sends for a new session, in the canonical form, before its answer to the
    ``session/new`` (seen once in test_thresholds: the client saw a session it never opened)."""
    return (b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"' + session.encode()
            + b'","update":{"sessionUpdate":"available_commands_update","availableCommands":[]}}}')


def test_what_the_agent_says_of_a_side_session_before_answering_its_creation_is_still_liminals() -> None:
    router = make(message_ids=True)
    new_session(router)
    rpc_id = router.send_request("session/new", {"cwd": "/home/side/x", "mcpServers": []}, NOW, private=True)
    router.take()
    ask = orjson.dumps({"jsonrpc": "2.0", "id": 40, "method": "session/request_permission", "params": {
        "sessionId": SIDE, "toolCall": {}, "options": [{"optionId": "no", "kind": "reject_once", "name": "No"}]}})
    out = from_agent(router, commands(SIDE), ask)
    assert not out.to_client and not out.events and not out.to_agent
    # The person's thread is not held meanwhile, and its chunks get their message ids.
    out = from_agent(router, chunk(THREAD, "the thread's"))
    assert [orjson.loads(line)["params"]["sessionId"] for line in out.to_client] == [THREAD]
    assert orjson.loads(out.to_client[0])["params"]["update"]["messageId"]
    out = from_agent(router, orjson.dumps({"jsonrpc": "2.0", "id": rpc_id, "result": {"sessionId": SIDE}}))
    assert not out.to_client and not out.events and out.own_responses
    assert orjson.loads(out.to_agent[0])["result"] == {"outcome": {"outcome": "selected", "optionId": "no"}}
    assert router.take_side(SIDE) == [commands(SIDE)]  # kept for liminal, unstamped
    assert router.agent_idle()


def test_what_the_agent_says_of_the_clients_new_session_meanwhile_reaches_it_first_and_in_order() -> None:
    router = make()
    new_session(router)
    rpc_id = router.send_request("session/new", {"cwd": "/home/side/x", "mcpServers": []}, NOW, private=True)
    router.take()
    other = "44444444-4444-4444-8444-444444444444"
    from_client(router, b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}')
    out = from_agent(router, commands(other), chunk(other, "hello"))
    assert not out.to_client
    answer = b'{"jsonrpc":"2.0","id":2,"result":{"sessionId":"' + other.encode() + b'"}}'
    out = from_agent(router, answer)
    assert out.to_client == [commands(other), chunk(other, "hello"), answer]
    assert [e.backing_id for e in out.events] == [other, other, other]
    out = from_agent(router, orjson.dumps({"jsonrpc": "2.0", "id": rpc_id, "result": {"sessionId": SIDE}}))
    assert not out.to_client


def test_lines_of_a_session_the_private_creation_did_not_make_go_on_once_it_is_answered() -> None:
    router = make()
    new_session(router)
    rpc_id = router.send_request("session/new", {"cwd": "/home/side/x", "mcpServers": []}, NOW, private=True)
    router.take()
    stray = "55555555-5555-4555-8555-555555555555"
    out = from_agent(router, commands(stray))
    assert not out.to_client
    out = from_agent(router, orjson.dumps({"jsonrpc": "2.0", "id": rpc_id, "result": {"sessionId": SIDE}}))
    assert out.to_client == [commands(stray)]


def test_a_line_no_answer_places_waits_no_longer_than_its_bound() -> None:
    router = make()
    new_session(router)
    router.send_request("session/new", {"cwd": "/home/side/x", "mcpServers": []}, NOW, private=True)
    router.take()
    stray = "55555555-5555-4555-8555-555555555555"
    router.receive_from_agent(commands(stray) + b"\n", NOW)
    assert not router.take().to_client
    router.receive_from_agent(chunk(THREAD, "later") + b"\n", NOW + router.max_unplaced_seconds + 1)
    out = router.take()
    assert out.to_client[-1] == commands(stray) and out.problems


def test_a_given_up_creations_late_answer_still_makes_its_session_liminals() -> None:
    router = make()
    new_session(router)
    rpc_id = router.send_request("session/new", {"cwd": "/home/side/x", "mcpServers": []}, NOW, private=True)
    router.take()
    router.cancel_own(rpc_id)  # the port's timeout
    out = from_agent(router, commands(SIDE), orjson.dumps({"jsonrpc": "2.0", "id": rpc_id,
                                                           "result": {"sessionId": SIDE}}), chunk(SIDE, "late"))
    assert not out.to_client and not out.events
