"""A frame the deriver does not understand never stops indexing.

Arbitrary JSON in every field of every ACP method the deriver reads: deriving never raises, and
what it yields always reaches a real SQLite store (values it cannot encode, lone surrogates and
integers past 64 bits, are made storable and flagged). And the worker path end to end: such a
frame between two ordinary ones is stored raw, flagged, and its neighbours are derived.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from liminal.ingest.derive import Deriver
from liminal.ingest.indexer import Indexer, Tuning
from liminal.ingest.poison import write_batch
from liminal.ingest.spool import SpoolDir
from liminal.store.records import Batch, FrameRecord, frame_id
from liminal.store.sqlite import SqliteStore

texts = st.one_of(st.text(max_size=12), st.text(
    alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF) | st.characters(), max_size=6))
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
                    texts)
any_json = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(texts, inner, max_size=3)), max_leaves=8)

S = "sess-fuzz"
UPDATE_KINDS = ["user_message_chunk", "agent_message_chunk", "agent_thought_chunk", "tool_call",
                "tool_call_update", "plan", "usage_update", "session_info_update",
                "available_commands_update", "current_mode_update"]
UPDATE_FIELDS = ["content", "messageId", "toolCallId", "title", "status", "rawInput", "rawOutput",
                 "entries", "used", "size", "kind", "locations"]
RESPONSE_METHODS = ["initialize", "session/new", "session/load", "session/resume", "session/fork",
                    "session/prompt"]


def frame(seq: int, direction: str, kind: str, method: str | None, message: Any,
          rpc_id: str | None = None, thread: str | None = S) -> tuple[FrameRecord, Any]:
    raw = json.dumps(message).encode("utf-8", "surrogatepass")
    return FrameRecord(frame_id("c", seq), "c", seq, 1000.0 + seq, direction, kind, thread, thread,
                       method, rpc_id, len(raw), raw), message


def at(template: dict[str, Any], path: list[str], value: Any) -> dict[str, Any]:
    """``template`` with ``value`` put at ``path`` (keys created as needed)."""
    out = json.loads(json.dumps(template))
    node = out
    for key in path[:-1]:
        node = node.setdefault(key, {}) if isinstance(node.get(key), dict) or key not in node else node[key]
        if not isinstance(node, dict):
            return out
    node[path[-1]] = value
    return out


@st.composite
def odd_frames(draw: st.DrawFn) -> list[tuple[FrameRecord, Any]]:
    value = draw(any_json)
    case = draw(st.sampled_from(["prompt", "update", "response", "swap note", "whole params"]))
    if case == "prompt":
        where = draw(st.sampled_from([["params", "prompt"], ["params", "sessionId"],
                                      ["params", "prompt", "0"], ["params"]]))
        base = {"jsonrpc": "2.0", "id": 1, "method": "session/prompt",
                "params": {"sessionId": S, "prompt": [{"type": "text", "text": "hi"}]}}
        if where == ["params", "prompt", "0"]:
            message = at(base, ["params", "prompt"], [value, {"type": "resource", "resource": value}])
        else:
            message = at(base, where, value)
        return [frame(1, "c2a", "request", "session/prompt", message, "1")]
    if case == "update":
        kind = draw(st.sampled_from([*UPDATE_KINDS, None]))
        update: Any = {"sessionUpdate": kind if kind is not None else value}
        if kind is not None:
            update[draw(st.sampled_from(UPDATE_FIELDS))] = value
        if draw(st.booleans()):
            update = value if kind is None else update
        message = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": S, "update": update}}
        return [frame(1, "a2c", "notification", "session/update", message)]
    if case == "response":
        method = draw(st.sampled_from(RESPONSE_METHODS))
        request = {"jsonrpc": "2.0", "id": 7, "method": method,
                   "params": {"sessionId": S, "cwd": "/w", "prompt": []}}
        if draw(st.booleans()):
            request = at(request, ["params", draw(st.sampled_from(["sessionId", "cwd", "prompt"]))], value)
        result = draw(st.sampled_from(["whole", "sessionId", "stopReason", "agentInfo", "error"]))
        answer: dict[str, Any] = {"jsonrpc": "2.0", "id": 7}
        if result == "whole":
            answer["result"] = value
        elif result == "error":
            answer["error"] = value
        else:
            answer["result"] = {result: value}
        return [frame(1, "c2a", "request", method, request, "7"),
                frame(2, "a2c", "response", method, answer, "7")]
    if case == "swap note":
        message = {"jsonrpc": "2.0", "method": "liminal/swap", "params": value}
        return [frame(1, "note", "notification", "liminal/swap", message)]
    message = {"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": value}
    return [frame(1, "c2a", "request", "session/prompt", message, "3")]


def _deep(levels: int, leaf: Any = 0) -> Any:
    value = leaf
    for _ in range(levels):
        value = [value]
    return value


def neighbours(start: int) -> list[tuple[FrameRecord, Any]]:
    prompt = {"jsonrpc": "2.0", "id": 90, "method": "session/prompt",
              "params": {"sessionId": S, "prompt": [{"type": "text", "text": "after the odd one"}]}}
    chunk = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": S, "update": {
        "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "still indexed"}}}}
    return [frame(start, "c2a", "request", "session/prompt", prompt, "90"),
            frame(start + 1, "a2c", "notification", "session/update", chunk)]


@given(odd=odd_frames())
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_json_in_any_field_is_derived_or_flagged_and_always_stored(odd: list[tuple[FrameRecord, Any]]) -> None:
    deriver = Deriver()
    items = [*odd, *neighbours(10)]
    for record, message in items:
        deriver.feed(record, message if isinstance(message, dict) else None)  # never raises
    derived = deriver.take()
    texts_of = [m.text for m in derived.messages]
    assert "after the odd one" in texts_of and "still indexed" in texts_of

    async def store_it() -> None:
        with tempfile.TemporaryDirectory() as folder:
            store = await SqliteStore.open(Path(folder) / "liminal.db")
            try:
                await write_batch(store, Batch([r for r, _ in items], derived.messages, derived.threads),
                                  quarantine=Path(folder) / "quarantine")
                assert await store.frame_count() == len(items)
            finally:
                await store.aclose()

    anyio.run(store_it)



@pytest.mark.anyio
@pytest.mark.parametrize("odd", [
    {"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": {"sessionId": S, "prompt": 42}},
    {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": S, "update": {
        "sessionUpdate": "plan", "entries": "not a list"}}},
    {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": S, "update": {
        "sessionUpdate": "agent_message_chunk", "content": {"type": "resource", "resource": "a string"}}}},
    {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": S, "update": {
        "sessionUpdate": "usage_update", "used": 2**70, "size": 200000}}},
    {"jsonrpc": "2.0", "id": 6, "method": "session/prompt", "params": {"sessionId": S, "prompt": [
        {"type": "text", "text": "lone \ud800 surrogate"}]}},    # Nested deeper than orjson writes (254 levels): JSON the router and the parser read.
    {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": S, "update": {
        "sessionUpdate": "tool_call", "toolCallId": "t-deep", "title": "deep", "rawInput": _deep(300)}}},
    {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": S, "update": {
        "sessionUpdate": "usage_update", "used": 1, "cost": _deep(600, {"x": 1})}}},
])
async def test_the_worker_stores_an_odd_frame_raw_flags_it_and_indexes_its_neighbours(
    tmp_path: Path, odd: dict[str, Any],
) -> None:
    writer = SpoolDir(tmp_path / "spool" / "conn")
    assert writer.acquire()
    kind = "request" if "id" in odd else "notification"
    direction = "c2a" if kind == "request" else "a2c"
    rpc = str(odd["id"]) if "id" in odd else None
    sequence = [frame(0, direction, kind, odd["method"], odd, rpc), *neighbours(1)]
    for record, _ in sequence:
        writer.append(record.seq, record)
    writer.seal()
    store = await SqliteStore.open(tmp_path / "liminal.db")
    worker = Indexer(store, tmp_path / "spool", tail=writer.path, recover=False,
                     tuning=Tuning(yield_bytes_per_second=None, retry_seconds=0.01))
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        with anyio.fail_after(20):
            while await store.frame_count() < 3:  # noqa: ASYNC110 - the store has no event
                await anyio.sleep(0.02)
        await worker.aclose()
        tg.cancel_scope.cancel()
    writer.release(remove_if_empty=False)
    messages = await store.messages(S)
    texts_of = [m.text for m in messages]
    assert "after the odd one" in texts_of and "still indexed" in texts_of
    stored = await store.frames(connection_id="c", after_seq=-1)
    assert [f.raw for f in stored] == [r.raw for r, _ in sequence]  # byte for byte, the odd one too
    assert not list((tmp_path / "spool").glob("*/*.spool"))  # the spool drained
    await store.aclose()
