"""A Codex rollout line as a store record (``SessionRecord``), for the indexer's tailing
(``liminal.ingest.sessions``): the line whole, for recall; its searchable text (messages, tool
arguments and full outputs); the usage of a ``token_count``; and, for a tool call and for its
output, the ``call_id`` as the record's uuid: a recall key of a Codex rewrite names the call id,
with block 0 for the output and 1 for the call's arguments (the store gives the recaller both
lines, ``liminal.lookup.recaller``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from liminal.harness.codex.rollout import CALLS, OUTPUTS, call_id_of, is_context_message, text_of
from liminal.store.records import SessionRecord

# Which rollout lines are the conversation: the message items of the person and the model (typed
# with their role when indexed, ``response_item:message:user``; a message Codex writes itself,
# its instructions and environment context, is ``...:context``), tool calls and their outputs.
# The events that repeat them (``event_msg:user_message``, ``agent_message``) and the rest are
# Codex's bookkeeping. ``response_item:message`` without a role is how liminal typed message
# items before it told them apart.
_CALL_TYPES = {f"response_item:{kind}" for kind in CALLS}
_OUTPUT_TYPES = {f"response_item:{kind}" for kind in OUTPUTS}
_SAID = {"response_item:message:user": "you", "response_item:message:assistant": "model",
         "response_item:message": "message"}
CONVERSATION_TYPES = frozenset(_SAID) | _CALL_TYPES | _OUTPUT_TYPES


def record_role(record_type: str | None, tool_ids: Sequence[str]) -> str | None:
    """Who a record of ``CONVERSATION_TYPES`` speaks for; None for Codex's bookkeeping."""
    if record_type in _CALL_TYPES:
        return "tool call"
    if record_type in _OUTPUT_TYPES:
        return "tool output"
    return _SAID.get(record_type or "")


def _message_type(payload: dict[str, Any]) -> str:
    if is_context_message(payload):
        return "response_item:message:context"
    role = payload.get("role")
    return f"response_item:message:{role}" if role in ("user", "assistant") else "response_item:message:other"


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(str(p.get("text") or "") for p in output if isinstance(p, dict))
    return ""


def parse_line(raw: bytes, backing_id: str, thread_id: str | None, offset: int) -> SessionRecord:
    rid = SessionRecord.make_id(backing_id, offset)
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        obj = None
    if not isinstance(obj, dict):
        return SessionRecord(rid, backing_id, thread_id, offset, None, None, None, None, (), "", raw)
    found = obj.get("payload")
    payload: dict[str, Any] = found if isinstance(found, dict) else {}
    kind = str(obj.get("type") or "")
    sub = str(payload.get("type") or "") if kind in ("response_item", "event_msg") else ""
    call_id = (call_id_of(payload) or "") if sub in CALLS or sub in OUTPUTS else ""
    text = ""
    usage = None
    if sub == "message":
        text = text_of(payload)
    elif sub in OUTPUTS:
        text = _output_text(payload.get("output"))
    elif sub in CALLS:
        text = str(payload.get("arguments") or payload.get("input") or "")
    elif sub == "token_count":
        info = payload.get("info")
        last = info.get("last_token_usage") if isinstance(info, dict) else None
        usage = last if isinstance(last, dict) else None
    elif sub in ("user_message", "agent_message"):
        text = str(payload.get("message") or "")
    time = obj.get("timestamp")
    record_type = f"{kind}:{sub}" if sub else kind or None
    if record_type == "response_item:message":
        record_type = _message_type(payload)
    # A call's line and its output's both carry the call_id: a recall key names either.
    return SessionRecord(rid, backing_id, thread_id, offset, call_id or None, record_type,
                         time if isinstance(time, str) else None, usage,
                         (call_id,) if call_id else (), text, raw)
