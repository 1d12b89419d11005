from __future__ import annotations

import dataclasses

import pytest

from liminal.acp.events import Direction, FrameEvent, Kind, make_event

ARGS = (Direction.AGENT_TO_CLIENT, Kind.NOTIFICATION, 1.5, b'{"a":1}', {"a": 1}, "conn", "t", "b",
        "session/update", None, 7)


def test_make_event_builds_the_same_frozen_event_as_the_constructor() -> None:
    fast = make_event(*ARGS)
    assert type(fast) is FrameEvent
    assert fast == FrameEvent(*ARGS)
    assert repr(fast) == repr(FrameEvent(*ARGS))
    assert dataclasses.astuple(fast) == ARGS
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.kind = Kind.REQUEST  # type: ignore[misc]
    assert dataclasses.replace(fast, size=8).size == 8
