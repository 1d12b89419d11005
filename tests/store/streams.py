"""Long literal frame streams for the indexer's fault tests and the benchmark."""

from __future__ import annotations

from collections.abc import Iterator

import orjson

from liminal.acp.events import Direction, FrameEvent, Kind


def stream(n: int, *, session: str = "sess-long", connection: str = "conn-long",
           t0: float = 2000.0, pad: int = 0) -> Iterator[FrameEvent]:
    """A prompt, ``n - 2`` agent text chunks ("w0 w1 ..."), and the prompt's response."""
    prompt = {"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {
        "sessionId": session, "prompt": [{"type": "text", "text": "stream please"}]}}
    raw = orjson.dumps(prompt)
    yield FrameEvent(Direction.CLIENT_TO_AGENT, Kind.REQUEST, t0, raw, prompt, connection,
                     session, session, "session/prompt", 1, len(raw))
    filler = "x" * pad
    for i in range(n - 2):
        message = {"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": session, "update": {"sessionUpdate": "agent_message_chunk",
                                             "content": {"type": "text", "text": f"w{i} "}},
            "_meta": {"pad": filler}} if pad else {
            "sessionId": session, "update": {"sessionUpdate": "agent_message_chunk",
                                             "content": {"type": "text", "text": f"w{i} "}}}}
        raw = orjson.dumps(message)
        yield FrameEvent(Direction.AGENT_TO_CLIENT, Kind.NOTIFICATION, t0 + (i + 1) * 1e-5, raw,
                         message, connection, session, session, "session/update", None,
                         len(raw))
    done = {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}}
    raw = orjson.dumps(done)
    yield FrameEvent(Direction.AGENT_TO_CLIENT, Kind.RESPONSE, t0 + n * 1e-5, raw, done,
                     connection, session, session, "session/prompt", 1, len(raw))


def expected_text(n: int) -> str:
    return "".join(f"w{i} " for i in range(n - 2))
