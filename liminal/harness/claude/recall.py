"""Recall keys in Claude Code session files: the record with the key's uuid, the key's content
block in it, the key's path inside that block (``liminal.gradient.recall`` has the syntax)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from liminal.gradient.recall import RecallError, RecallKey, _as_bytes, walk
from liminal.harness.claude.paths import SessionLocation, locate_id
from liminal.harness.claude.records import loads


def value_in(record: Mapping[str, Any], key: RecallKey) -> bytes:
    """What the key names inside its record: a string's UTF-8, anything else as JSON."""
    content = (record.get("message") or {}).get("content")
    if not isinstance(content, list) or key.block >= len(content):
        raise RecallError(f"{key}: record has no block {key.block}")
    block = content[key.block]
    if not key.path:
        value = block.get("content") if block.get("type") == "tool_result" else block
        return _as_bytes(value)
    return _as_bytes(walk(block, key))



def value_in_line(line: bytes, key: RecallKey) -> bytes | None:
    """The key's value if ``line`` is its record, else None."""
    if f'"uuid":"{key.uuid}"'.encode() not in line:
        return None
    try:
        record = loads(line)
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("uuid") != key.uuid:
        return None
    return value_in(record, key)



def resolve_in(location: SessionLocation, key: RecallKey) -> bytes:
    """What the key names, from the session file."""
    with location.path.open("rb") as handle:
        for line in handle:
            value = value_in_line(line, key)
            if value is not None:
                return value
    raise RecallError(f"{key}: no record {key.uuid} in {location.path}")



def resolve(text: str, *, env: Mapping[str, str] | None = None) -> bytes:
    key = RecallKey.parse(text)
    return resolve_in(locate_id(key.session_id, env=env), key)
