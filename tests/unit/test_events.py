from __future__ import annotations

import dataclasses
from typing import Any

import orjson
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


def test_a_lazy_event_parses_on_demand_and_equals_the_eager_one() -> None:
    from liminal.acp.events import LazyFrameEvent, make_lazy_event

    raw = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","n":123456789012345678901}}'
    eager = make_event(Direction.AGENT_TO_CLIENT, Kind.NOTIFICATION, 1.0, raw, orjson.loads(raw), "c", "t", "s",
                       "session/update", None, len(raw))
    lazy = make_lazy_event(Direction.AGENT_TO_CLIENT, Kind.NOTIFICATION, 1.0, raw, "c", "t", "s",
                           "session/update", len(raw))
    assert isinstance(lazy, FrameEvent) and type(lazy) is LazyFrameEvent
    assert lazy.message is not None and lazy.message["params"]["sessionId"] == "s"
    assert lazy.message is lazy.message  # parsed once
    assert dataclasses.astuple(lazy) == dataclasses.astuple(eager)
    with pytest.raises(dataclasses.FrozenInstanceError):
        lazy.message = None  # type: ignore[misc]
    assert dataclasses.replace(lazy, size=1).message == lazy.message
    broken = make_lazy_event(Direction.AGENT_TO_CLIENT, Kind.NOTIFICATION, 1.0, raw[:-5], "c", "t", "s",
                             "session/update", 5)
    assert broken.message is None


def test_a_lazy_event_tells_its_update_kind_from_the_bytes() -> None:
    from liminal.acp.events import kind_markers, make_lazy_event

    def lazy(raw: bytes) -> Any:
        return make_lazy_event(Direction.AGENT_TO_CLIENT, Kind.NOTIFICATION, 1.0, raw, "c", "t", "sess-1",
                               "session/update", len(raw))

    head = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1"'
    watched = kind_markers("usage_update", "tool_call")
    assert lazy(head + b',"update":{"sessionUpdate":"usage_update","used":5}}}').update_kind_in(watched) is True
    assert lazy(head + b',"update":{"sessionUpdate":"tool_call","toolCallId":"1"}}}').update_kind_in(watched) is True
    # A kind that only starts like a watched one is not it.
    assert lazy(head + b',"update":{"sessionUpdate":"tool_call_update"}}}').update_kind_in(watched) is False
    assert lazy(head + b',"update":{"sessionUpdate":"agent_message_chunk"}}}').update_kind_in(watched) is False
    # The update elsewhere in params: the bytes cannot tell, the parsed copy can.
    other = lazy(head + b',"_meta":{},"update":{"sessionUpdate":"usage_update"}}}')
    assert other.update_kind_in(watched) is None
    assert other.message["params"]["update"]["sessionUpdate"] == "usage_update"
