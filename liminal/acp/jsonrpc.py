"""JSON-RPC 2.0 as ACP uses it: parse a copy, classify, build the few frames liminal writes.

Nothing here re-serialises a frame that is forwarded: the router forwards raw bytes and only
reads the parsed copy. When liminal must echo a request id it takes the id's exact bytes from the
raw frame, because orjson reads integers beyond 64 bits as floats.
"""

from __future__ import annotations

import enum
import json
import re
from typing import Any

import orjson

from liminal.acp.framing import HEAD_BYTES, TAIL_BYTES

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_CANCELLED = -32800


class Kind(enum.Enum):
    REQUEST = "request"
    NOTIFICATION = "notification"
    RESPONSE = "response"
    INVALID = "invalid"  # not JSON, not an object, or not JSON-RPC
    OVERSIZED = "oversized"  # over the frame cap; ``raw`` holds only the head


def parse(raw: bytes) -> dict[str, Any] | None:
    """The parsed copy of a line, or None when it is not a JSON object. Every reader of frames
    (the router, a lazy event, the index worker) parses with this, so they agree on what a line
    is; and the copy can always be written again with orjson (the store does)."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        # orjson refuses a few things the stdlib reads (NaN, lone surrogates in escapes);
        # those frames are still forwarded untouched, so a slower second reading is fine.
        try:
            value = json.loads(raw, parse_int=_int)
            # Lone surrogates cannot be encoded as UTF-8: in the copy they become "?".
            value = json.loads(json.dumps(value, ensure_ascii=False).encode("utf-8", "replace"),
                               parse_int=_int)
        except (ValueError, RecursionError):
            return None
    except RecursionError:
        return None
    return value if isinstance(value, dict) else None


def _int(digits: str) -> int | str:
    # Python refuses to convert more than 4300 digits; the parsed copy keeps such a number as text.
    return int(digits) if len(digits) <= 4000 else digits


def classify(message: dict[str, Any] | None) -> Kind:
    if message is None:
        return Kind.INVALID
    if "method" in message:
        if not isinstance(message["method"], str):
            return Kind.INVALID
        return Kind.REQUEST if "id" in message else Kind.NOTIFICATION
    if "id" in message and ("result" in message or "error" in message):
        return Kind.RESPONSE
    return Kind.INVALID


def id_key(rpc_id: Any) -> Any:
    """A hashable key for an id (ids are strings or numbers; anything else is kept as text)."""
    if isinstance(rpc_id, (str, int, float)) or rpc_id is None:
        return rpc_id
    return orjson.dumps(rpc_id)


def encode_id(rpc_id: Any, raw: bytes | None = None) -> bytes:
    """The id as JSON bytes. A float may be a big integer orjson rounded: then read the raw frame.

    An ``id_key`` of an object or array id (its JSON bytes) is returned as it is, so that a key
    can always be turned back into an id to answer with.
    """
    if isinstance(rpc_id, bytes):
        return rpc_id
    if isinstance(rpc_id, float) and raw is not None:
        # Only the ends, as for an oversized frame: the walk is a Python loop per byte, and a
        # top-level id is near the start (or, after a huge value, at the very end).
        found = recover_top_level(raw[:HEAD_BYTES], raw[-TAIL_BYTES:]).get("id")
        if found is not None:
            return found
    if isinstance(rpc_id, (list, dict)) and raw is not None:
        # An array or object id (not JSON-RPC, but answered all the same) may hold an integer
        # past 64 bits that orjson read as a float: the stdlib reads it exactly (rarely needed).
        try:
            exact = json.loads(raw, parse_int=_int)
            if isinstance(exact, dict) and "id" in exact:
                return json.dumps(exact["id"]).encode()
        except (ValueError, RecursionError):
            pass
    try:
        return orjson.dumps(rpc_id)
    except TypeError:
        return json.dumps(rpc_id).encode()


def error_frame(id_json: bytes, code: int, message: str, data: Any = None) -> bytes:
    """An error response line (without its ``\\n``, like every line the router handles)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return b'{"jsonrpc":"2.0","id":' + id_json + b',"error":' + orjson.dumps(error) + b"}"


def result_frame(id_json: bytes, result_json: bytes) -> bytes:
    """A result response line, from the id's and the result's JSON bytes."""
    return b'{"jsonrpc":"2.0","id":' + id_json + b',"result":' + result_json + b"}"


def request_frame(rpc_id: str, method: str, params: Any) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params})


def notification_frame(method: str, params: Any) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "method": method, "params": params})


_SCALAR = re.compile(rb'\s*("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|null|true|false)')
_TRAILING_ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)\s*}\s*$')


def recover_top_level(head: bytes, tail: bytes = b"") -> dict[str, bytes]:
    """Scalar top-level members of a possibly cut-off JSON object, as raw JSON bytes.

    Used on oversized frames, which are never parsed whole: it walks the head tracking nesting
    and strings, so an ``"id"`` inside ``params`` is not mistaken for the request's. A top-level
    id written after a huge value is found at the very end of the tail.
    """
    found: dict[str, bytes] = {}
    depth = 0
    i = 0
    n = len(head)
    expecting_key = False
    while i < n:
        c = head[i]
        if c == 0x22:  # '"'
            end = i + 1
            while end < n:
                if head[end] == 0x5C:  # backslash
                    end += 2
                    continue
                if head[end] == 0x22:
                    break
                end += 1
            if end >= n:
                break
            if depth == 1 and expecting_key:
                key = head[i + 1 : end]
                colon = head.find(b":", end + 1)
                if colon < 0:
                    break
                match = _SCALAR.match(head, colon + 1)
                if match and key in (b"id", b"method", b"jsonrpc"):
                    found[key.decode()] = match.group(1)
                expecting_key = False
                i = colon + 1
                continue
            i = end + 1
            continue
        if c in (0x7B, 0x5B):  # { [
            depth += 1
            expecting_key = c == 0x7B and depth == 1
        elif c in (0x7D, 0x5D):  # } ]
            depth -= 1
        elif c == 0x2C and depth == 1:  # ,
            expecting_key = True
        i += 1
    if "id" not in found and tail:
        match = _TRAILING_ID.search(tail)
        if match:
            found["id"] = match.group(1)
    return found
