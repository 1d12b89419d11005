"""Claude Code's session file (JSONL) as the store keeps it: a line as a record, which records are
the conversation and who speaks in each, the model calls a session shows.

The session file holds what frames do not: exact usage per API call and the full tool outputs
(``toolUseResult``), which recall needs. The indexer tails it (``liminal.ingest.tail``) and
makes each line a record here (``parse_line``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from liminal.harness.claude.records import loads
from liminal.store.records import SessionRecord


def _text_of(content: Any, tool_ids: list[str]) -> Iterable[str]:
    if isinstance(content, str):
        yield content
        return
    if not isinstance(content, list):
        return
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            yield str(block.get("text", ""))
        elif kind == "thinking":
            yield str(block.get("thinking", ""))
        elif kind == "tool_use":
            tool_ids.append(str(block.get("id", "")))
            yield f"{block.get('name', '')} {orjson.dumps(block.get('input')).decode()}"
        elif kind == "tool_result":
            tool_ids.append(str(block.get("tool_use_id", "")))
            yield from _text_of(block.get("content"), [])


# Which of Claude Code's lines are the conversation: what the person and the model said and what
# tools returned (the CLI's other lines are its bookkeeping: ``api-request-blob`` holds a copy of
# every message sent, ``attachment`` what it injected, ``last-prompt``, ``queue-operation`` ...).
# A prompt line the CLI wrote itself (``isMeta``: a caveat, a skill's text; ``isCompactSummary``:
# its own compaction's summary) is typed apart when indexed (``user:meta``, ``user:summary``).
CONVERSATION_TYPES = frozenset({"user", "assistant"})


def record_role(record_type: str | None, tool_ids: Sequence[str]) -> str | None:
    """Who a record of ``CONVERSATION_TYPES`` speaks for; None for the CLI's bookkeeping."""
    if record_type == "user":
        return "tool output" if tool_ids else "you"
    if record_type == "assistant":
        return "tool call" if tool_ids else "model"
    return None


def _type_of(obj: dict[str, Any]) -> str | None:
    kind = _opt_str(obj.get("type"))
    if kind == "user" and obj.get("isCompactSummary") is True:
        return "user:summary"
    if kind == "user" and obj.get("isMeta") is True:
        return "user:meta"
    return kind


def parse_line(raw: bytes, backing_id: str, thread_id: str | None, offset: int) -> SessionRecord:
    """One JSONL line as a record; a line that is not a JSON object is kept with no fields."""
    rid = SessionRecord.make_id(backing_id, offset)
    try:  # the stdlib's reading too: orjson refuses a lone surrogate, which the CLI writes
        obj: Any = loads(raw)
    except (ValueError, UnicodeDecodeError):
        obj = None
    if not isinstance(obj, dict):
        return SessionRecord(rid, backing_id, thread_id, offset, None, None, None, None, (), "",
                             raw)
    tool_ids: list[str] = []
    parts: list[str] = []
    message = obj.get("message")
    usage = None
    if isinstance(message, dict):
        parts.extend(_text_of(message.get("content"), tool_ids))
        if isinstance(message.get("usage"), dict):
            usage = message["usage"]
    result = obj.get("toolUseResult")
    if result is not None:  # the structured, often larger, copy of a tool's output
        if isinstance(result, dict):
            for key in ("stdout", "stderr", "content", "output"):
                value = result.get(key)
                if isinstance(value, str) and value not in parts:
                    parts.append(value)
            file = result.get("file")
            if isinstance(file, dict) and isinstance(file.get("content"), str):
                parts.append(file["content"])
        elif isinstance(result, str) and result not in parts:
            parts.append(result)
    for key in ("summary", "title", "customTitle", "aiTitle", "content"):
        value = obj.get(key)
        if isinstance(value, str):
            parts.append(value)
    return SessionRecord(
        rid, backing_id, thread_id, offset, _opt_str(obj.get("uuid")), _type_of(obj),
        _opt_str(obj.get("timestamp")), usage, tuple(t for t in tool_ids if t),
        "\n".join(p for p in parts if p), raw)


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class ModelCall:
    t: float  # seconds since the epoch
    uncached: int
    cache_read: int
    cache_write: int
    output: int
    # Of ``cache_write``, what went to the hour's cache (``usage.cache_creation``), at 2x the
    # input price rather than 1.25x.
    cache_write_1h: int = 0

    @property
    def input(self) -> int:
        """The whole prompt."""
        return self.uncached + self.cache_read + self.cache_write


def model_calls(records: Sequence[SessionRecord]) -> list[ModelCall]:
    """The model calls a session's records show, oldest first. Claude Code writes one line per
    content block of a response, each with the response's usage: a run of lines with the same
    usage is one call."""
    calls: list[ModelCall] = []
    previous: dict[str, Any] | None = None
    for record in sorted(records, key=lambda r: (r.time or "", r.offset)):
        usage = record.usage
        if record.type != "assistant" or not isinstance(usage, dict) or usage == previous:
            continue
        previous = usage
        split = usage.get("cache_creation")
        try:
            t = datetime.fromisoformat((record.time or "").replace("Z", "+00:00")).timestamp()
            calls.append(ModelCall(t, int(usage.get("input_tokens") or 0),
                                   int(usage.get("cache_read_input_tokens") or 0),
                                   int(usage.get("cache_creation_input_tokens") or 0),
                                   int(usage.get("output_tokens") or 0),
                                   int(split.get("ephemeral_1h_input_tokens") or 0) if isinstance(split, dict) else 0))
        except (TypeError, ValueError):
            continue
    return calls
