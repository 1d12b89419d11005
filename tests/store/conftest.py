"""Fixtures shared by the store tests: every available backend, and literal frames."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from liminal.acp.events import Direction, FrameEvent, Kind
from liminal.store.base import Store
from liminal.store.sqlite import SqliteStore
from tests.support.mongo import fresh_database, needs_mongo

REDIS_URL = os.environ.get("LIMINAL_TEST_REDIS_URL", "")

# Each backend in each of its search modes: SQLite with FTS5 and with its LIKE fallback;
# MongoDB as the server offers (a text index, or regular expressions where the server has no
# text indexes, as FerretDB) and with the regular expressions forced.
BACKENDS = [
    "sqlite",
    "sqlite-like",
    pytest.param("mongodb", marks=needs_mongo),
    pytest.param("mongodb-regex", marks=needs_mongo),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    backend = request.param
    if backend.startswith("mongodb"):
        from liminal.store.mongo import MongoStore

        async with fresh_database() as url:
            mongo = await MongoStore.open(url, text_index=backend == "mongodb")
            try:
                yield mongo
            finally:
                await mongo.aclose()
        return
    sqlite = await SqliteStore.open(tmp_path / "liminal.db", fts=backend == "sqlite")
    try:
        yield sqlite
    finally:
        await sqlite.aclose()


def event(direction: str, message: dict[str, Any] | bytes, *, connection: str = "conn1",
          thread: str | None = None, backing: str | None = None, method: str | None = None,
          time: float = 1000.0) -> FrameEvent:
    """A FrameEvent as the router would offer it, from a literal message."""
    if isinstance(message, bytes):
        return FrameEvent(Direction(direction), Kind.INVALID, time, message, None, connection,
                          thread, backing, method, None, len(message))
    raw = orjson.dumps(message)
    if "method" in message and "id" in message:
        kind = Kind.REQUEST
    elif "method" in message:
        kind = Kind.NOTIFICATION
    else:
        kind = Kind.RESPONSE
    params = message.get("params")
    sid = params.get("sessionId") if isinstance(params, dict) else None
    return FrameEvent(Direction(direction), kind, time, raw, message, connection,
                      thread or sid, backing or sid, method or message.get("method"),
                      message.get("id"), len(raw))


def conversation(session: str = "sess-1", *, connection: str = "conn1",
                 t0: float = 1000.0) -> list[FrameEvent]:
    """initialize, session/new, one prompt with thought, text chunks, a tool call, plan, usage."""
    frames: list[tuple[str, dict[str, Any], str | None, str | None]] = [
        ("c2a", {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                 "params": {"protocolVersion": 1}}, None, None),
        ("a2c", {"jsonrpc": "2.0", "id": 0, "result": {
            "protocolVersion": 1, "agentInfo": {"name": "claude-agent-acp", "version": "0.1"}}},
         None, "initialize"),
        ("c2a", {"jsonrpc": "2.0", "id": 1, "method": "session/new",
                 "params": {"cwd": "/work/demo", "mcpServers": []}}, None, None),
        ("a2c", {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": session}}, session,
         "session/new"),
        ("c2a", {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {
            "sessionId": session,
            "prompt": [{"type": "text", "text": "Refactor the flux capacitor module"}]}},
         None, None),
    ]
    updates: list[dict[str, Any]] = [
        {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "Let me "}},
        {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "think."}},
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "I will "}},
        {"sessionUpdate": "agent_message_chunk",
         "content": {"type": "text", "text": "read the file."}},
        {"sessionUpdate": "tool_call", "toolCallId": "toolu_01", "title": "Read flux.py",
         "kind": "read", "status": "pending", "rawInput": {"path": "flux.py"}},
        {"sessionUpdate": "tool_call_update", "toolCallId": "toolu_01", "status": "completed",
         "content": [{"type": "content", "content": {
             "type": "text", "text": "def gigawatts(): return 1.21"}}]},
        {"sessionUpdate": "plan", "entries": [
            {"content": "Rename gigawatts", "priority": "high", "status": "pending"}]},
        {"sessionUpdate": "agent_message_chunk",
         "content": {"type": "text", "text": "Done: renamed."}},
        {"sessionUpdate": "usage_update", "used": 12345, "size": 200000},
    ]
    for update in updates:
        frames.append(("a2c", {"jsonrpc": "2.0", "method": "session/update",
                               "params": {"sessionId": session, "update": update}}, None, None))
    frames.append(("a2c", {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}},
                   session, "session/prompt"))
    out = []
    for i, (direction, message, thread, method) in enumerate(frames):
        out.append(event(direction, message, connection=connection, thread=thread,
                         backing=thread, method=method, time=t0 + i))
    return out


def own_request(thread: str | None, backing: str, rpc: str, method: str, params: dict[str, Any],
                result: dict[str, Any], t: float) -> list[FrameEvent]:
    """A request of liminal's own to the agent and its answer, as the router taps them."""
    return [event("l2a", {"jsonrpc": "2.0", "id": rpc, "method": method, "params": params},
                  thread=thread, backing=backing, time=t),
            event("a2l", {"jsonrpc": "2.0", "id": rpc, "result": result}, thread=thread,
                  backing=backing, method=method, time=t + 0.1)]


def moved(thread: str, backings: list[str], *, t0: float) -> list[FrameEvent]:
    """The agent titles the thread ("Flux work"), then liminal moves it onto each of
    ``backings`` in turn: the last by a ``/clear`` (``session/new``), the others as a swap, a
    ``/clear MARK`` or an ``/undo`` do (``session/resume`` of a file liminal wrote). Each move's
    swap note, liminal's ``session/close`` of the session left (naming the thread, as the router
    does, or not, as an older one did), and the agent's title for the new session, after its
    first prompt."""
    frames = [event("a2c", {"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": thread, "update": {"sessionUpdate": "session_info_update", "title": "Flux work"}}},
        time=t0)]
    t, old = t0 + 1, thread
    for n, new in enumerate(backings):
        if n == len(backings) - 1:
            frames += own_request(thread, new, f"liminal-x-{n}", "session/new",
                                  {"cwd": "/work/demo", "mcpServers": []}, {"sessionId": new}, t)
        else:  # the answer to a resume names no session
            frames += own_request(thread, old, f"liminal-x-{n}", "session/resume",
                                  {"sessionId": new, "cwd": "/work/demo"}, {}, t)
        record = {"thread_id": thread, "old_backing_id": old, "new_backing_id": new,
                  "outcome": "committed", "reason": "r", "cwd": "/work/demo"}
        frames.append(event("note", {"jsonrpc": "2.0", "method": "liminal/swap", "params": record},
                            thread=thread, backing=old, time=t + 0.2))
        frames += own_request(thread if n % 2 else None, old, f"liminal-c-{n}", "session/close",
                              {"sessionId": old}, {}, t + 0.3)
        frames.append(event("a2c", {"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": new, "update": {"sessionUpdate": "session_info_update",
                                         "title": f"first prompt after move {n}"}}},
            thread=thread, backing=new, time=t + 0.5))
        old, t = new, t + 1
    return frames


def chunk(text: str, message_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"sessionUpdate": "agent_message_chunk",
                            "content": {"type": "text", "text": text}}
    if message_id:
        body["messageId"] = message_id
    return body


def load_of(thread: str, rpc: int, replay: list[dict[str, Any]], *, connection: str = "conn1",
            t: float = 2000.0, direction: str = "a2c") -> list[FrameEvent]:
    """A client's ``session/load`` of ``thread``: the agent's replay, commands and usage (the
    session's state), then its answer."""
    return [
        event("c2a", {"jsonrpc": "2.0", "id": rpc, "method": "session/load",
                      "params": {"sessionId": thread, "cwd": "/w", "mcpServers": []}},
              connection=connection, time=t),
        *(event(direction, {"jsonrpc": "2.0", "method": "session/update",
                            "params": {"sessionId": thread, "update": u}},
                connection=connection, time=t + 0.1) for u in replay),
        event("a2c", {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": thread, "update": {
            "sessionUpdate": "available_commands_update", "availableCommands": []}}},
              connection=connection, time=t + 0.2),
        event("a2c", {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": thread, "update": {
            "sessionUpdate": "usage_update", "used": 5000, "size": 200000}}},
              connection=connection, time=t + 0.3),
        event("a2c", {"jsonrpc": "2.0", "id": rpc, "result": {}}, thread=thread, method="session/load",
              connection=connection, time=t + 0.4),
    ]


REPLAY = [{"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "old prompt"}},
          chunk("old "), chunk("answer"),
          {"sessionUpdate": "tool_call", "toolCallId": "tc1", "title": "Read", "status": "completed"},
          chunk("more", "m9")]
