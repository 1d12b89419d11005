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
