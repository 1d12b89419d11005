"""The WebSocket leg (``liminal.serve.leg``): its locks and its bounds in bytes. The id renaming
when a connection takes over a dropped one's proxy is the router's rule 9 now; its tests moved
to ``tests/unit/test_router_takeover.py``."""

from __future__ import annotations

from typing import Any

import anyio
import orjson

from liminal.serve.leg import WebSocketClientLeg


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
    from liminal.serve.waiting import ByteBudget

    async def scenario() -> None:
        budget = ByteBudget(1 << 30)
        leg = WebSocketClientLeg(None, settings=ServeSettings(queue_bytes=100_000), budget=budget)  # type: ignore[arg-type]
        flow: list[bool] = []
        leg.outbox.on_flow = flow.append
        line = b'{"jsonrpc":"2.0","method":"session/update","params":{"x":"' + b"y" * 30_000 + b'"}}\n'
        for _ in range(3):
            leg.write(line)
        assert flow == [] and budget.used == 3 * (len(line) - 1)
        leg.write(line)  # past 100,000 bytes
        assert flow == [True]
        while leg.outbox.bytes > 25_000:  # the client takes them, one by one
            leg.outbox.sent(len(leg.outbox.lines.popleft()))
        assert flow == [True, False]
        for _ in range(4):
            leg.write(line)
        assert flow == [True, False, True]
        leg._lost()  # the client vanished: nothing waits for it, the agent goes on
        assert flow == [True, False, True, False] and not leg.outbox.lines and budget.used == 0
        leg.write(line)  # and nothing more is queued for it
        assert not leg.outbox.lines and budget.used == 0

    anyio.run(scenario)


def test_what_waits_to_reach_the_agent_is_refused_past_its_bounds() -> None:
    from liminal.config import ServeSettings
    from liminal.serve.leg import FULL_CODE
    from liminal.serve.waiting import ByteBudget

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
        assert [len(leg.inbox.messages) for leg in (one, two, three)] == [2, 1, 1]
        refused = [orjson.loads(line) for leg in (one, three) for line in leg.outbox.lines]
        assert [(r["id"], r["error"]["code"]) for r in refused] == [(2, FULL_CODE), (4, FULL_CODE)]
        assert "serve.max_message_bytes" in refused[0]["error"]["message"]
        assert "serve.buffer_bytes" in refused[1]["error"]["message"]

    anyio.run(scenario)
