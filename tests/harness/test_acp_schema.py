"""The schema check judges each side by the ACP version its ``initialize`` settled
(``fixtures.harness.acp_schema.negotiated``): a v2 answer by the v2 schema, a v1 one by v1's."""

from __future__ import annotations

import json

import pytest

from fixtures.harness import acp_schema

ASK_V2 = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
          "params": {"protocolVersion": 2, "info": {"name": "c", "version": "1"}, "capabilities": {}}}
V1_ANSWER = {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}}
V2_ANSWER = {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 2, "info": {"name": "a", "version": "1"},
                                                     "capabilities": {}}}


def lines(*frames: dict[str, object]) -> list[bytes]:
    return [json.dumps(f).encode() for f in frames]


def test_a_side_is_judged_by_the_version_it_negotiated() -> None:
    assert acp_schema.negotiated(lines(ASK_V2), lines(V1_ANSWER)) == 1
    assert acp_schema.negotiated(lines(ASK_V2), lines(V2_ANSWER)) == 2
    assert acp_schema.negotiated([], []) == 1
    v1, v2 = acp_schema.checker("v1"), acp_schema.checker("v2")
    if v1 is None or v2 is None:
        pytest.skip("the ACP schema is not installed (scripts/install-harness acp-sdk)")
    assert acp_schema.frames_problems(v1, lines(ASK_V2), lines(V1_ANSWER)) == []
    assert acp_schema.frames_problems(v2, lines(ASK_V2), lines(V2_ANSWER)) == []
    assert acp_schema.frames_problems(v1, lines(ASK_V2), lines(V2_ANSWER))  # v2's fields are no v1's
    acp_schema.assert_conforms([(lines(ASK_V2), lines(V2_ANSWER), [])])
    with pytest.raises(AssertionError):
        acp_schema.assert_conforms([(lines(ASK_V2), lines({**V2_ANSWER, "result": {
            **V2_ANSWER["result"], "agentCapabilities": {}}}), [])])  # type: ignore[dict-item]


# liminal's stdio in a conductor's chain, as ``tee.py`` records it around the component (shaped
# like tests/acceptance/test_conductor.py's: the conductor's ids are UUIDs, liminal's envelopes
# ``liminal-successor-N``): what it read, and what it wrote.
UPDATE = {"sessionId": "s1", "update": {"sessionUpdate": "agent_message_chunk",
                                        "content": {"type": "text", "text": "hi"}}}
PERMISSION = {"sessionId": "s1", "toolCall": {"toolCallId": "t1"},
              "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"}]}
CHOSEN = {"outcome": {"outcome": "selected", "optionId": "allow"}}


def envelope(method: str, params: dict[str, object], rpc_id: str | None = None,
             spelling: str = "proxy/successor") -> dict[str, object]:
    frame: dict[str, object] = {"jsonrpc": "2.0", "method": spelling, "params": {"method": method, "params": params}}
    return frame if rpc_id is None else {**frame, "id": rpc_id}


def chain_transcript(spelling: str = "proxy/successor") -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    hello = {"protocolVersion": 1, "clientCapabilities": {}}
    read: list[dict[str, object]] = [
        {"jsonrpc": "2.0", "id": "c-1", "method": spelling.replace("successor", "initialize"), "params": hello},
        {"jsonrpc": "2.0", "id": "liminal-successor-1", "result": V1_ANSWER["result"]},
        {"jsonrpc": "2.0", "id": "c-2", "method": "session/new", "params": {"cwd": "/p", "mcpServers": []}},
        {"jsonrpc": "2.0", "id": "liminal-successor-2", "result": {"sessionId": "s1"}},
        envelope("session/update", UPDATE, spelling=spelling),
        envelope("session/request_permission", PERMISSION, "u-1", spelling),
        {"jsonrpc": "2.0", "id": "u-1", "result": CHOSEN},  # the predecessor's answer, forwarded to it
    ]
    written: list[dict[str, object]] = [
        envelope("initialize", hello, "liminal-successor-1", spelling),
        {"jsonrpc": "2.0", "id": "c-1", "result": {**V1_ANSWER["result"], "_meta": {"rewindSession": {}}}},
        envelope("session/new", {"cwd": "/p", "mcpServers": [{"name": "liminal", "command": "python",
                                                              "args": [], "env": []}]},
                 "liminal-successor-2", spelling),
        {"jsonrpc": "2.0", "id": "c-2", "result": {"sessionId": "s1"}},
        {"jsonrpc": "2.0", "method": "session/update", "params": UPDATE},
        {"jsonrpc": "2.0", "id": "u-1", "method": "session/request_permission", "params": PERMISSION},
        {"jsonrpc": "2.0", "id": "u-1", "result": CHOSEN},  # liminal's answer to the successor
    ]
    return read, written


def chain_problems(read: list[dict[str, object]], written: list[dict[str, object]]) -> str:
    with pytest.raises(AssertionError) as caught:
        acp_schema.assert_conforms([], [(lines(*read), lines(*written))])
    return str(caught.value)


@pytest.mark.parametrize("spelling", ["proxy/successor", "_proxy/successor"])
def test_a_chain_transcript_is_split_into_its_two_connections_and_judged(spelling: str) -> None:
    """liminal as a conductor's component: the predecessor's frames and the successor's (out of
    their envelopes) judged apart, the envelopes too; a made-up member anywhere liminal wrote
    is caught and said where."""
    if acp_schema.checker("v1") is None:
        pytest.skip("the ACP schema is not installed (scripts/install-harness acp-sdk)")
    read, written = chain_transcript(spelling)
    client, successor = acp_schema.chain_sides(lines(*read), lines(*written))
    methods = [[json.loads(f).get("method") for f in side] for side in (*client[:2], *successor[:2])]
    assert methods == [
        [spelling.replace("successor", "initialize"), "session/new", None],  # the predecessor's
        [None, None, "session/update", "session/request_permission"],  # liminal's to it
        [None, None, "session/update", "session/request_permission"],  # the successor's
        ["initialize", "session/new", None],  # liminal's to it
    ]
    acp_schema.assert_conforms([], [(lines(*read), lines(*written))])

    # An envelope with a member of its own (the wrapped request's id, say).
    bad = [dict(f) for f in written]
    bad[0] = {**bad[0], "params": {**bad[0]["params"], "id": 1}}  # type: ignore[dict-item]
    if spelling == "proxy/successor":  # an ``_``-method is an extension: its envelope passes
        assert "in a chain: request proxy/successor" in chain_problems(read, bad)
    # A request liminal sends the successor with a member no schema has.
    bad = [dict(f) for f in written]
    bad[2] = envelope("session/new", {"cwd": "/p", "mcpServers": [], "threadId": "t"}, "liminal-successor-2",
                      spelling)
    assert "to its successor: request session/new" in chain_problems(read, bad)
    # liminal's answer to the predecessor's prompt-like request carrying a made-up member.
    bad = [dict(f) for f in written]
    bad[3] = {"jsonrpc": "2.0", "id": "c-2", "result": {"sessionId": "s1", "userMessageId": "m"}}
    assert "to its predecessor: result of session/new" in chain_problems(read, bad)
    # liminal's answer to the successor's request (under the conductor's envelope id).
    bad = [dict(f) for f in written]
    bad[6] = {"jsonrpc": "2.0", "id": "u-1", "result": {**CHOSEN, "approved": True}}
    assert "to its successor: result of session/request_permission" in chain_problems(read, bad)
