"""Rule 6 of the router (``liminal.acp.router``) for a line over the cap: it is dropped, never
forwarded in part. Its top-level ``id`` and ``method`` are recovered from its head and tail
(``jsonrpc.recover_top_level``) so that whoever waits on it is told: a request's sender gets an
error, and so does the client for an answer of the agent's to one of its requests (the agent's
answers to liminal's own requests are dropped: the component that asked times out)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from liminal.acp import jsonrpc
from liminal.acp.emitter import Emitter
from liminal.acp.events import Direction, Kind
from liminal.acp.framing import Oversized
from liminal.acp.owed import Owed


def drop_oversized(line: Oversized, now: float, *, from_client: bool, cap: int, emit: Emitter, owed: Owed,
                   answered: Callable[[Any], object]) -> None:
    """Drop ``line`` and answer for it. ``answered(key)``: the router's bookkeeping for a client
    request the agent has now answered (a load under way ends, rule 8)."""
    found = jsonrpc.recover_top_level(line.head, line.tail)
    id_json, method = found.get("id"), _loaded(found.get("method"))
    method = method if isinstance(method, str) else None
    emit.out.problems.append(f"{'client' if from_client else 'agent'} sent a {line.size}-byte line, "
                             f"over the {cap}-byte cap; dropped")
    emit.tap(Direction.CLIENT_TO_AGENT if from_client else Direction.AGENT_TO_CLIENT, Kind.OVERSIZED, now,
             line.head, None, None, None, method, None, size=line.size)
    if id_json is None or (from_client and method is None):
        return
    key = jsonrpc.id_key(_loaded(id_json))
    if method is not None:
        error = jsonrpc.error_frame(id_json, jsonrpc.INVALID_REQUEST,
                                    f"request of {line.size} bytes exceeds liminal's limit of {cap} bytes")
        if from_client:
            emit.answer_from_liminal(key, error, now, method, None)
        else:
            emit.out.to_agent.append(error)
            emit.tap(Direction.LIMINAL_TO_AGENT, Kind.RESPONSE, now, error, None, None, None, method, None)
        return
    pending = owed.client.pop(key, None)
    if pending is not None:
        answered(key)
        error = jsonrpc.error_frame(id_json, jsonrpc.INTERNAL_ERROR, f"the agent's answer of {line.size} "
                                    f"bytes exceeds liminal's limit of {cap} bytes")
        emit.answer_from_liminal(key, error, now, pending.method, None)


def _loaded(raw_json: bytes | None) -> Any:
    """A scalar recovered from an oversized line, or None."""
    try:
        return orjson.loads(raw_json) if raw_json is not None else None
    except orjson.JSONDecodeError:
        return None
