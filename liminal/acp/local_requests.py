"""The client's requests a hook kept for liminal (``LOCAL``, ``Output.local``), as the router
(``liminal.acp.router``) settles them: answered by liminal (``answer_local``) or sent on to the
agent under the client's id (``forward_local``), each exactly once. What was kept is in
``Owed.local`` until then; a prompt's user message id (rule 10) was drawn when it was kept."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from liminal.acp import jsonrpc, message_ids
from liminal.acp.emitter import Emitter
from liminal.acp.events import Direction, Kind
from liminal.acp.message_ids import MessageIds
from liminal.acp.owed import Owed, Pending
from liminal.acp.threads import ThreadMap

# The router's path for a request going on to the agent: (line, message, thread, now), the line
# and message in thread ids. It holds it (rule 5) or starts a load (rule 8) as for the client's own.
Forward = Callable[[bytes, dict[str, Any], "str | None", float], None]


class LocalRequests:
    def __init__(self, *, emit: Emitter, owed: Owed, threads: ThreadMap, ids: MessageIds,
                 forward: Forward) -> None:
        self._emit = emit
        self._owed = owed
        self._threads = threads
        self._ids = ids
        self._forward = forward

    def pending(self) -> list[Any]:
        return list(self._owed.local)

    def answer_local(self, key: Any, result: Any = None, *, error: tuple[int, str] | None = None,
                     now: float | None = None) -> bool:
        """Answer a request a hook kept (``Output.local``), once; False if it was answered."""
        pending = self._owed.local.pop(key, None)
        if pending is None:
            return False
        id_json = pending.id_json if pending.id_json is not None else jsonrpc.encode_id(key)
        if error is not None:
            line = jsonrpc.error_frame(id_json, error[0], error[1])
        else:
            if pending.message_id is not None and isinstance(result, dict) \
                    and message_ids.user_message_id_of(result) is None:
                result = message_ids.with_user_message_id_in(result, pending.message_id)
            line = jsonrpc.result_frame(id_json, orjson.dumps(result if result is not None else {}))
        self._emit.answer_from_liminal(key, line, self._emit.now if now is None else now, pending.method,
                                       pending.thread_id)
        return True

    def forward_local(self, key: Any, method: str, params: dict[str, Any], now: float | None = None) -> bool:
        """Send a request a hook kept on to the agent as ``method`` with ``params`` (thread ids),
        under the client's id: the agent's answer is the answer to it (``session/edit_prompt``
        goes on as the ``session/prompt`` it comes to; a load liminal asked the store about
        first goes on as the client's own, rule 8 included). False if it was answered."""
        pending = self._owed.local.pop(key, None)
        if pending is None:
            return False
        when = self._emit.now if now is None else now
        id_json = pending.id_json if pending.id_json is not None else jsonrpc.encode_id(key)
        line = (b'{"jsonrpc":"2.0","id":' + id_json + b',"method":' + orjson.dumps(method)
                + b',"params":' + orjson.dumps(params) + b"}")
        thread = pending.thread_id
        forwarded = Pending(method, thread, pending.id_json)
        self._owed.client[key] = forwarded
        message = {"jsonrpc": "2.0", "id": orjson.loads(id_json), "method": method, "params": params}
        if method == "session/prompt" and self._ids.stamping:
            forwarded.message_id = self._ids.next_id()
        self._emit.tap(Direction.CLIENT_TO_AGENT, Kind.REQUEST, when, line, message, thread,
                       self._threads.backing_of(thread) if thread is not None else None, method, message["id"])
        self._forward(line, message, thread, when)
        return True
