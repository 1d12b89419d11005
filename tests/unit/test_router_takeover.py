"""Rule 9 of the router, driven with literal lines: a new client takes over (``liminal serve``,
a connection takes over the proxy of one that dropped mid-turn). The old client's pending
requests are orphans whose answers are dropped, and a new request that reuses an orphan's id is
renamed on its way and back. These two first tests were ``tests/unit/test_serve_leg.py``'s, when
the renaming lived in ``liminal.serve.leg``."""

from __future__ import annotations

import orjson

from liminal.acp.events import Direction
from liminal.acp.router import LOCAL, Router
from tests.unit.test_router import BACKING, NOW, THREAD, from_agent, from_client, load_frame, make


def prompt(rpc_id: object, method: str = "session/prompt") -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": {}})


def answer(rpc_id: object, result: object = None) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rpc_id, "result": result or {}})


def taken_over(*ids: object) -> Router:
    """A router whose client sent requests with these ids, then left; a new client goes on."""
    router = make()
    from_client(router, *(prompt(i) for i in ids))
    router.client_replaced()
    return router


def test_a_reused_id_is_renamed_both_ways_and_an_orphans_answer_is_dropped() -> None:
    router = taken_over(5, "abc")
    [sent] = from_client(router, prompt(5)).to_agent
    ours = orjson.loads(sent)["id"]
    assert ours != 5 and isinstance(ours, str)
    # Its answer goes back under the client's id; the orphan's own answer goes nowhere.
    [back] = from_agent(router, answer(ours)).to_client
    assert orjson.loads(back)["id"] == 5
    out = from_agent(router, b'{"jsonrpc":"2.0","id":5,"result":{"stopReason":"end_turn"}}')
    assert out.to_client == []
    assert [e.direction for e in out.events] == [Direction.AGENT_TO_CLIENT]  # the store still keeps it
    # Once answered, the orphan is gone: the next request under that id is the client's own.
    fresh = prompt(5)
    assert from_client(router, fresh).to_agent == [fresh]
    later = answer(5)
    assert from_agent(router, later).to_client == [later]
    # Ids no orphan has, and notifications, pass untouched.
    other = prompt(6)
    assert from_client(router, other).to_agent == [other]
    cancel = b'{"jsonrpc":"2.0","method":"session/cancel","params":{}}'
    assert from_client(router, cancel).to_agent == [cancel]
    [renamed] = from_client(router, prompt("abc", "x")).to_agent
    assert orjson.loads(renamed)["id"] != "abc"


def test_a_renamed_id_is_never_handed_out_twice() -> None:
    """Two orphans, both ids reused; the first answered; the second reused again: each renamed
    request gets an id no other open one has (a count of the open ones gave one out twice)."""
    router = taken_over(2, 3)
    first = orjson.loads(from_client(router, prompt(2, "x")).to_agent[0])["id"]
    second = orjson.loads(from_client(router, prompt(3, "y")).to_agent[0])["id"]
    from_agent(router, answer(first))
    third = orjson.loads(from_client(router, prompt(2, "z")).to_agent[0])["id"]
    assert len({first, second, third}) == 3
    # An answer whose result holds the text "method" is still renamed back.
    [back] = from_agent(router, answer(second, {"note": '"method"'})).to_client
    assert orjson.loads(back) == {"jsonrpc": "2.0", "id": 3, "result": {"note": '"method"'}}


def test_a_renamed_id_is_one_of_the_routers_own_ids() -> None:
    """One id namespace towards the agent: a renamed request gets an id as liminal's own
    requests do (``liminal-<random per router>-N``, one count). On main it was ``liminal-re-N``,
    a namespace of its own that a client's own ids could hold: the agent then had two requests
    open under ``liminal-re-1``, and the second answer went to the wrong one."""
    router = taken_over(5)
    clients = prompt("liminal-re-1")  # a client's own id, never an orphan's
    assert from_client(router, clients).to_agent == [clients]
    [sent] = from_client(router, prompt(5)).to_agent
    ours = orjson.loads(sent)["id"]
    own = router.send_request("session/close", {"sessionId": BACKING}, NOW)
    router.take()
    assert ours != "liminal-re-1" and ours != own
    assert ours.rsplit("-", 1)[0] == own.rsplit("-", 1)[0]  # the router's prefix
    assert int(own.rsplit("-", 1)[1]) == int(ours.rsplit("-", 1)[1]) + 1  # and its count
    [back] = from_agent(router, answer(ours)).to_client
    assert orjson.loads(back)["id"] == 5
    [theirs] = from_agent(router, answer("liminal-re-1")).to_client
    assert orjson.loads(theirs)["id"] == "liminal-re-1"
    assert from_agent(router, answer(own)).own_responses[0][0] == own


def test_a_big_integer_id_comes_back_byte_for_byte() -> None:
    big = b"123456789012345678901234567890"
    router = make()
    from_client(router, b'{"jsonrpc":"2.0","id":' + big + b',"method":"session/prompt","params":{}}')
    router.client_replaced()
    [sent] = from_client(router, b'{"jsonrpc":"2.0","id":' + big + b',"method":"x","params":{}}').to_agent
    [back] = from_agent(router, answer(orjson.loads(sent)["id"])).to_client
    assert back.startswith(b'{"id":' + big + b",")


def test_what_liminal_answers_follows_the_rule_too() -> None:
    """Answers liminal writes itself (a hook's request it answers, the agent gone) are dropped for
    orphans and renamed back for the new client, as the agent's are."""
    router = make()
    router.add_request_hook(("_liminal/x",), lambda method, message, thread: LOCAL)
    from_client(router, prompt(1, "_liminal/x"), prompt(2))
    router.client_replaced()
    [kept] = from_client(router, prompt(1, "_liminal/x")).local
    assert kept.key != 1
    router.answer_local(1, {"old": True})  # the gone client's: dropped
    router.answer_local(kept.key, {"new": True})
    assert [orjson.loads(line) for line in router.take().to_client] == [
        {"jsonrpc": "2.0", "id": 1, "result": {"new": True}}]
    from_client(router, prompt(2))  # renamed: the orphan 2 is still owed
    router.agent_gone(NOW, "exit code 1")
    [error] = [orjson.loads(line) for line in router.take().to_client]
    assert error["id"] == 2 and error["error"]["code"] == -32603


def test_a_renamed_load_of_a_moved_thread_is_answered_under_the_clients_id() -> None:
    router = make(replay_from_store=True)
    router.bind(THREAD, BACKING)
    from_client(router, load_frame(7))
    router.client_replaced()
    [sent] = from_client(router, load_frame(7)).to_agent
    ours = orjson.loads(sent)["id"]
    from_agent(router, answer(7))  # the orphan's load: nothing for the new client
    [request] = from_agent(router, answer(ours)).replays
    router.finish_replay(request.token, [], NOW)
    assert router.take().to_client == [b'{"id":7,"jsonrpc":"2.0","result":{}}']


def test_before_a_take_over_nothing_is_renamed() -> None:
    router = make()
    from_client(router, prompt(5))
    again = prompt(5)
    assert from_client(router, again).to_agent == [again]
