"""The WebSocket leg's id bookkeeping when a connection takes over a dropped one's proxy
(``liminal.serve.leg``): the gone client's pending requests are orphans whose answers are
dropped, and a new request that reuses an orphan's id is renamed on its way and back."""

from __future__ import annotations

from typing import Any

import anyio
import orjson

from liminal.serve.leg import WebSocketClientLeg


def leg_with_orphans(*ids: Any) -> WebSocketClientLeg:
    leg = WebSocketClientLeg(None)  # type: ignore[arg-type]  # no socket is touched here
    leg._orphans = set(ids)
    return leg


def test_a_reused_id_is_renamed_both_ways_and_an_orphans_answer_is_dropped() -> None:
    leg = leg_with_orphans(5, "abc")
    sent = leg._renamed_in(b'{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{}}')
    ours = orjson.loads(sent)["id"]
    assert ours != 5 and isinstance(ours, str)
    # Its answer goes back under the client's id; the orphan's own answer goes nowhere.
    back = leg._renamed_out(orjson.dumps({"jsonrpc": "2.0", "id": ours, "result": {}}))
    assert orjson.loads(back)["id"] == 5
    assert leg._renamed_out(b'{"jsonrpc":"2.0","id":5,"result":{"stopReason":"end_turn"}}') == b""
    # Once answered, the orphan is gone: a later answer with that id is the client's own.
    later = b'{"jsonrpc":"2.0","id":5,"result":{}}'
    assert leg._renamed_out(later) == later
    # Ids no orphan has, and notifications, pass untouched.
    fresh = b'{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{}}'
    assert leg._renamed_in(fresh) == fresh
    assert leg._renamed_in(b'{"jsonrpc":"2.0","method":"session/cancel","params":{}}').startswith(b'{"jsonrpc"')
    assert orjson.loads(leg._renamed_in(b'{"jsonrpc":"2.0","id":"abc","method":"x"}'))["id"] != "abc"


def test_a_renamed_id_is_never_handed_out_twice() -> None:
    """Two orphans, both ids reused; the first answered; the second reused again: each renamed
    request gets an id no other open one has (a count of the open ones gave one out twice)."""
    leg = leg_with_orphans(2, 3)
    first = orjson.loads(leg._renamed_in(b'{"jsonrpc":"2.0","id":2,"method":"x"}'))["id"]
    second = orjson.loads(leg._renamed_in(b'{"jsonrpc":"2.0","id":3,"method":"y"}'))["id"]
    leg._renamed_out(orjson.dumps({"jsonrpc": "2.0", "id": first, "result": {}}))
    third = orjson.loads(leg._renamed_in(b'{"jsonrpc":"2.0","id":2,"method":"z"}'))["id"]
    assert len({first, second, third}) == 3
    # An answer whose result holds the text "method" is still renamed back.
    back = leg._renamed_out(orjson.dumps({"jsonrpc": "2.0", "id": second, "result": {"note": '"method"'}}))
    assert orjson.loads(back)["id"] == 3


def test_locks_released_for_good_take_nothing_more(tmp_path: Any) -> None:
    """A connection's locks are released as it ends; a take that comes after (its reader still
    winding down) must not hold a lock that nobody frees any more."""
    import anyio

    from liminal.serve.locks import ThreadLocks

    async def scenario() -> None:
        mine, other = ThreadLocks(tmp_path), ThreadLocks(tmp_path)
        assert await mine.try_take("t1")
        await mine.release_all()
        assert not await mine.try_take("t2") and not mine.holds("t2")
        assert await other.try_take("t1") and await other.try_take("t2")
        await other.release_all()

    anyio.run(scenario)


def test_what_waits_for_a_slow_client_is_bounded_in_bytes_and_freed_when_it_leaves() -> None:
    """The agent was paused past 1,024 queued frames whatever their size, and stayed paused
    when the client left. Now: paused past serve.queue_bytes, let go at a quarter of it, and at
    once when the socket is gone; what was queued leaves the server's budget."""
    from liminal.config import ServeSettings
    from liminal.serve.leg import ByteBudget

    async def scenario() -> None:
        budget = ByteBudget(1 << 30)
        leg = WebSocketClientLeg(None, settings=ServeSettings(queue_bytes=100_000), budget=budget)  # type: ignore[arg-type]
        flow: list[bool] = []
        leg._on_flow = flow.append
        line = b'{"jsonrpc":"2.0","method":"session/update","params":{"x":"' + b"y" * 30_000 + b'"}}\n'
        for _ in range(3):
            leg.write(line)
        assert flow == [] and budget.used == 3 * (len(line) - 1)
        leg.write(line)  # past 100,000 bytes
        assert flow == [True]
        while leg._out_bytes > 25_000:  # the client takes them, one by one
            leg._sent(len(leg._out.popleft()))
        assert flow == [True, False]
        for _ in range(4):
            leg.write(line)
        assert flow == [True, False, True]
        leg._lost()  # the client vanished: nothing waits for it, the agent goes on
        assert flow == [True, False, True, False] and not leg._out and budget.used == 0
        leg.write(line)  # and nothing more is queued for it
        assert not leg._out and budget.used == 0

    anyio.run(scenario)


def test_what_waits_to_reach_the_agent_is_refused_past_its_bounds() -> None:
    from liminal.config import ServeSettings
    from liminal.serve.leg import FULL_CODE, ByteBudget

    async def scenario() -> None:
        budget = ByteBudget(3_000_000)
        settings = ServeSettings(max_message_bytes=1_500_000)
        one = WebSocketClientLeg(None, settings=settings, budget=budget)  # type: ignore[arg-type]
        two = WebSocketClientLeg(None, settings=settings, budget=budget)  # type: ignore[arg-type]
        big = b'{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"t":"' + b"z" * 1_000_000 + b'"}}'
        one._take_in(big % 1)
        one._take_in(big % 2)  # this connection has a message waiting: no room for another
        two._take_in(big % 3)
        three = WebSocketClientLeg(None, settings=settings, budget=budget)  # type: ignore[arg-type]
        three._take_in(big % 4)  # the server has 2 MB waiting: no room in 3 MB
        three._take_in(b'{"jsonrpc":"2.0","id":5,"method":"_echo","params":{}}')  # a small one: room
        cancel = b'{"jsonrpc":"2.0","method":"session/cancel","params":{}}'
        one._take_in(cancel)  # behind its large message, a small one still has room
        assert [len(leg._inbound) for leg in (one, two, three)] == [2, 1, 1]
        refused = [orjson.loads(line) for leg in (one, three) for line in leg._out]
        assert [(r["id"], r["error"]["code"]) for r in refused] == [(2, FULL_CODE), (4, FULL_CODE)]
        assert "serve.max_message_bytes" in refused[0]["error"]["message"]
        assert "serve.buffer_bytes" in refused[1]["error"]["message"]

    anyio.run(scenario)
