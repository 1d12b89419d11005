"""Normalising transcripts: ids, timestamps and paths vary; everything else must match."""

from __future__ import annotations

from fixtures.harness import first_difference, normalize
from fixtures.harness.transcript import settled_tool_calls

A = "3f2b8a4e-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
B = "01a20176-408b-7662-8a56-0be38a908b46"


def test_ids_are_numbered_by_first_appearance_and_stay_consistent() -> None:
    left = normalize([f'{{"sessionId":"{A}"}}'.encode(), f'{{"id":"{A}","x":"{B}"}}'.encode()])
    right = normalize([f'{{"sessionId":"{B}"}}'.encode(), f'{{"id":"{B}","x":"{A}"}}'.encode()])
    assert left == right == [b'{"sessionId":"<uuid-1>"}', b'{"id":"<uuid-1>","x":"<uuid-2>"}']


def test_inconsistent_ids_still_differ() -> None:
    left = normalize([f'"{A}"'.encode(), f'"{A}"'.encode()])
    right = normalize([f'"{A}"'.encode(), f'"{B}"'.encode()])
    assert left != right


def test_timestamps_and_paths() -> None:
    frames = [b'{"t":"2026-11-22T04:14:11.697Z","cwd":"/tmp/run-a/project"}']
    other = [b'{"t":"2025-01-01T00:00:00Z","cwd":"/tmp/run-b/project"}']
    assert normalize(frames, ["/tmp/run-a"]) == normalize(other, ["/tmp/run-b"])


def test_byte_differences_survive_normalisation() -> None:
    assert normalize([b'{"a":1}']) != normalize([b'{"a": 1}'])
    report = first_difference([b'{"a":1}'], [b'{"a": 1}'])
    assert report is not None and "frame 0 differs at byte 5" in report
    assert first_difference([b"x"], [b"x", b"y"]) is not None
    assert first_difference([b"x"], [b"x"]) is None


def test_float_sums_in_different_orders_are_equal() -> None:
    left = normalize([b'{"cost":{"amount":0.144676,"currency":"USD"}}'])
    right = normalize([b'{"cost":{"amount":0.14467599999999997,"currency":"USD"}}'])
    assert left == right
    assert normalize([b'{"amount":0.1447}']) != normalize([b'{"amount":0.1448}'])


def test_volatile_fields_and_codex_output_headers() -> None:
    one = normalize([b'{"process_id":"31658","duration":{"secs":0,"nanos":14934},'
                     b'"text":"Chunk ID: 6acb0a\nWall time: 0.0001 seconds"}'])
    two = normalize([b'{"process_id":"39911","duration":{"secs":0,"nanos":18483},'
                     b'"text":"Chunk ID: 94f329\nWall time: 0.0000 seconds"}'])
    assert one == two


def _tool(update: str) -> bytes:
    return ('{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"<uuid-1>","update":{'
            + update + "}}}").encode()


def test_a_tool_call_split_differently_by_timing_settles_the_same() -> None:
    """Two real runs (codex-agent, claude-agent 0.101 under load): the output and the exit in one
    update or two; a call announced before its input streamed. Each call's final state is the
    same; any field that ends differently still shows."""
    text = b'{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk"}}}'
    start = _tool('"sessionUpdate":"tool_call","toolCallId":"c1","rawInput":{},"status":"pending"')
    split = [start, _tool('"sessionUpdate":"tool_call_update","toolCallId":"c1","rawInput":{"command":"echo hi"}'),
             _tool('"sessionUpdate":"tool_call_update","toolCallId":"c1","_meta":{"delta":"hi"}'),
             _tool('"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"completed",'
                   '"_meta":{"exit":0}'), text]
    joined = [_tool('"sessionUpdate":"tool_call","toolCallId":"c1","rawInput":{"command":"echo hi"},'
                    '"status":"pending"'),
              _tool('"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"completed",'
                    '"_meta":{"delta":"hi","exit":0}'), text]
    assert first_difference(split, joined) is not None
    assert first_difference(settled_tool_calls(split), settled_tool_calls(joined)) is None
    failed = [*joined[:1], joined[1].replace(b'"completed"', b'"failed"'), text]
    assert first_difference(settled_tool_calls(split), settled_tool_calls(failed)) is not None
    assert settled_tool_calls(split)[1:] == [text]  # other frames kept, in order
