"""The WebSocket leg's id bookkeeping when a connection takes over a dropped one's proxy
(``liminal.serve.leg``): the gone client's pending requests are orphans whose answers are
dropped, and a new request that reuses an orphan's id is renamed on its way and back."""

from __future__ import annotations

from typing import Any

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
