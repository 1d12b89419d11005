from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from liminal.acp.events import Direction, FrameEvent, Kind
from liminal.acp.taps import Gap, TapChannel


def event(n: int) -> FrameEvent:
    return FrameEvent(Direction.AGENT_TO_CLIENT, Kind.NOTIFICATION, float(n), b"{}", {}, "c", None, None,
                      "m", None, 2)


def test_a_subscriber_that_keeps_up_loses_nothing() -> None:
    channel = TapChannel(maxsize=3)
    for i in range(3):
        channel.offer(event(i))
    assert [e.time for e in channel.drain() if isinstance(e, FrameEvent)] == [0.0, 1.0, 2.0]


def test_a_subscriber_that_falls_behind_sees_a_gap() -> None:
    channel = TapChannel(maxsize=2)
    for i in range(5):
        channel.offer(event(i))
    first = channel.drain()
    assert [getattr(e, "time", None) for e in first] == [0.0, 1.0, None]
    assert first[-1] == Gap(3)
    channel.offer(event(9))
    assert channel.drain() == [event(9)]
    assert channel.lost_total == 3


@pytest.mark.anyio
async def test_async_iteration_ends_after_close() -> None:
    channel = TapChannel(maxsize=10)
    got: list[object] = []

    async def consume() -> None:
        async for item in channel:
            got.append(item)

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        for i in range(4):
            channel.offer(event(i))
            await anyio.lowlevel.checkpoint()
        channel.close()
    assert len(got) == 4
