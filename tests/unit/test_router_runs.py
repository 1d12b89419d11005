"""The router's runs (``Router._agent_run``): streamed updates of one session and kind that
arrive in one read are forwarded and tapped whole. Whatever the lines, the client and the taps
get what the router gives them line by line: the same bytes (message ids stamped, session ids
rewritten) and the same events, in the same order."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from liminal.acp.events import FrameEvent, FrameRun
from liminal.acp.router import Router

THREAD = "0c9d5f8e-1111-4222-8333-444455556666"
BACKING = "7a1b2c3d-aaaa-4bbb-8ccc-ddddeeeeffff"
OTHER = "9f8e7d6c-0000-4111-8222-333344445555"


def update(session: str, kind: str, text: str, agent_id: str | None, meta: bool) -> bytes:
    body: dict[str, Any] = {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
    if agent_id is not None:
        body["messageId"] = agent_id
    params: dict[str, Any] = {"sessionId": session, "update": body}
    if meta:  # the session id spelled again further on, as a rewrite must find it
        params["_meta"] = {"origin": {"sessionId": session}}
    return orjson.dumps({"jsonrpc": "2.0", "method": "session/update", "params": params})


lines = st.one_of(
    st.builds(update, st.sampled_from([THREAD, BACKING, OTHER]),
              st.sampled_from(["agent_message_chunk", "agent_thought_chunk", "user_message_chunk",
                               "tool_call", "usage_update", "plan"]),
              st.text(max_size=20), st.one_of(st.none(), st.sampled_from(["m1", "m2"])), st.booleans()),
    st.sampled_from([
        b'{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk"},'
        b'"sessionId":"' + THREAD.encode() + b'"}}',
        b'{"jsonrpc":"2.0","id":5,"method":"fs/read_text_file","params":{"sessionId":"' + BACKING.encode() + b'"}}',
        b"not json",
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"' + THREAD.encode() + b'","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a\\"b"}}}',
    ]),
)


def router(moved: bool, ids: bool, capture: bool) -> Router:
    r = Router(max_frame_bytes=1 << 20, connection_id="conn", message_ids=ids)
    if moved:
        r.bind(THREAD, BACKING)
    if capture:
        r.capture(OTHER)
    return r


def fields(event: FrameEvent) -> dict[str, Any]:
    return {f.name: getattr(event, f.name) for f in dataclasses.fields(FrameEvent)}


@settings(max_examples=300, deadline=None)
@given(st.lists(lines, max_size=40), st.booleans(), st.booleans(), st.booleans(), st.integers(1, 7))
def test_a_read_forwards_and_taps_what_its_lines_one_by_one_would(
        sent: list[bytes], moved: bool, ids: bool, capture: bool, cut: int) -> None:
    whole, single = router(moved, ids, capture), router(moved, ids, capture)
    data = b"".join(line + b"\n" for line in sent)
    for at in range(0, len(data), max(1, len(data) // cut)):  # reads cut anywhere
        whole.receive_from_agent(data[at:at + max(1, len(data) // cut)], 1.0)
    for line in sent:
        single.receive_from_agent(line + b"\n", 1.0)
    a, b = whole.take(), single.take()
    assert a.client_bytes() == b.client_bytes()
    assert a.to_client == b.to_client
    assert [fields(e) for e in a.events] == [fields(e) for e in b.events]


def test_a_read_of_streamed_chunks_is_one_run_for_the_taps() -> None:
    r = router(moved=True, ids=True, capture=False)
    r.receive_from_agent(b"".join(update(BACKING, "agent_message_chunk", str(n), None, False) + b"\n"
                                  for n in range(50)), 1.0)
    out = r.take()
    assert [type(t) for t in out.taps] == [FrameRun]
    forwarded = [orjson.loads(line) for line in out.to_client]
    assert {f["params"]["sessionId"] for f in forwarded} == {THREAD}
    assert {f["params"]["update"]["messageId"] for f in forwarded} == {"conn:0000000000"}
    assert [e.raw for e in out.events] == [update(BACKING, "agent_message_chunk", str(n), None, False)
                                           for n in range(50)]
