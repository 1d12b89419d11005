"""A Gemini CLI session line as a store record (``SessionRecord``), for the indexer's tailing
(``liminal.ingest.sessions``): the line whole, for recall and for writing the session again; its
searchable text (the prompt, the model's text, a call's arguments and full results); the usage
of a model message; and, for a model message holding calls, the calls' ids as its tool ids and
the first as its uuid.

Recall keys of a Gemini session name a call: ``<session id>:<call id>:<block>``, block 0 the
call's result (what its function response says), 1 its arguments (``value_in_line``).

The record types are ``gemini:`` and the line's kind, so that no other CLI's roles answer for
them: ``gemini:user`` (a prompt), ``gemini:user:context`` (the CLI's ``<session_context>``),
``gemini:user:responses`` (the function responses the CLI records again after the calls),
``gemini:user:summary`` (a rewrite's summary of older turns, liminal's),
``gemini:model``, ``gemini:model:calls``, ``gemini:info`` (and ``error``, ``warning``: not sent
to the model), ``gemini:header``, ``gemini:update``, ``gemini:rewind``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from liminal.gradient.recall import RecallError, RecallKey, as_bytes, walk
from liminal.gradient.summarize import PREAMBLE_INTRO
from liminal.gradient.zone import is_zone
from liminal.harness.gemini.chatfile import (
    SESSION_CONTEXT,
    is_function_responses,
    text_of,
    tool_calls,
)
from liminal.harness.gemini.chatfile import (
    parse_line as parse_chat_line,
)
from liminal.store.records import SessionRecord

OUTPUT_BLOCK = 0  # a recall key's block for a call's result
CALL_BLOCK = 1  # for a call's arguments

_ROLES = {"gemini:user": "you", "gemini:model": "model", "gemini:model:calls": "tool call",
          "gemini:user:responses": "tool output"}
CONVERSATION_TYPES = frozenset(_ROLES)


def record_role(record_type: str | None, tool_ids: Sequence[str]) -> str | None:
    """Who a record of ``CONVERSATION_TYPES`` speaks for; None for the CLI's bookkeeping."""
    return _ROLES.get(record_type or "")


def message_type(message: Mapping[str, Any]) -> str:
    """The record type of a message (the module's doc lists them)."""
    kind = message.get("type")
    if kind == "user":
        if is_function_responses(message):
            return "gemini:user:responses"
        text = text_of(message.get("content"))
        if text.startswith(SESSION_CONTEXT):
            return "gemini:user:context"
        if text.startswith(PREAMBLE_INTRO):
            return "gemini:user:summary"
        if is_zone(text):
            return "gemini:user:zone"
        return "gemini:user"
    if kind == "gemini":
        return "gemini:model:calls" if tool_calls(message) else "gemini:model"
    return f"gemini:{kind}" if isinstance(kind, str) and kind.isidentifier() else "gemini:other"


def response_text(parts: Any) -> str:
    """The outputs of function response parts (their ``response``), as text."""
    found: list[str] = []
    for part in parts if isinstance(parts, list) else []:
        response = part.get("functionResponse") if isinstance(part, dict) else None
        if not isinstance(response, dict):
            continue
        value = response.get("response")
        if isinstance(value, dict) and set(value) <= {"output", "error"}:
            value = value.get("output", value.get("error"))
        found.append(value if isinstance(value, str) else orjson.dumps(value).decode())
    return "\n".join(found)


def searchable_text(message: Mapping[str, Any]) -> str:
    kind = message_type(message)
    if kind == "gemini:user:responses":
        return response_text(message.get("content"))
    if kind == "gemini:model:calls":
        pieces = [text_of(message.get("content"))]
        for call in tool_calls(message):
            pieces.append(orjson.dumps(call.get("args")).decode() if call.get("args") is not None else "")
            pieces.append(response_text(call.get("result")))
        return "\n".join(p for p in pieces if p)
    return text_of(message.get("content"))


def parse_line(raw: bytes, backing_id: str, thread_id: str | None, offset: int) -> SessionRecord:
    rid = SessionRecord.make_id(backing_id, offset)
    line = parse_chat_line(raw)
    obj = line.obj
    kind = line.kind
    if obj is None or kind == "other":
        return SessionRecord(rid, backing_id, thread_id, offset, None, None, None, None, (), "", raw)
    if kind != "message":
        stamp = obj.get("lastUpdated") if kind == "header" else None
        return SessionRecord(rid, backing_id, thread_id, offset, None, f"gemini:{kind}",
                             stamp if isinstance(stamp, str) else None, None, (), "", raw)
    record_type = message_type(obj)
    calls = tuple(str(c["id"]) for c in tool_calls(obj) if isinstance(c.get("id"), str))
    if record_type == "gemini:user:responses":
        calls = tuple(str(p["functionResponse"]["id"]) for p in obj.get("content") or ()
                      if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)
                      and isinstance(p["functionResponse"].get("id"), str))
    tokens = obj.get("tokens")
    usage = dict(tokens) if isinstance(tokens, dict) and obj.get("type") == "gemini" else None
    stamp = obj.get("timestamp")
    return SessionRecord(rid, backing_id, thread_id, offset, calls[0] if calls else str(obj["id"]),
                         record_type, stamp if isinstance(stamp, str) else None, usage, calls,
                         searchable_text(obj), raw)


def value_of(message: Mapping[str, Any], key: RecallKey) -> bytes | None:
    """What ``key`` names in a model message holding its call, or None: not this message's."""
    for call in tool_calls(message):
        if call.get("id") != key.uuid:
            continue
        if key.block == OUTPUT_BLOCK:
            value: Any = call.get("result")
            responses = [p["functionResponse"].get("response") for p in value or ()
                         if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)]
            if len(responses) == 1 and isinstance(responses[0], dict) and set(responses[0]) == {"output"}:
                value = responses[0]["output"]
            elif len(responses) == 1:
                value = responses[0]
        elif key.block == CALL_BLOCK:
            value = call.get("args")
        else:
            return None
        try:
            return as_bytes(walk(value, key))
        except RecallError:
            return None
    return None


def value_in_line(raw: bytes, key: RecallKey) -> bytes | None:
    """What ``key`` names if ``raw`` (a session line) holds its call: a model message, or a
    ``$set`` or header of messages (a resume writes the history again); else None."""
    if f'"{key.uuid}"'.encode() not in raw:
        return None
    line = parse_chat_line(raw)
    obj = line.obj
    if obj is None:
        return None
    if line.kind == "message":
        return value_of(obj, key)
    held = obj["$set"].get("messages") if line.kind == "update" else obj.get("messages")
    for message in held if isinstance(held, list) else ():
        found = value_of(message, key) if isinstance(message, dict) else None
        if found is not None:
            return found
    return None
