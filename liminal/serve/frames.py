"""A client's frame as ``liminal serve`` reads it before it may reach an agent. No I/O.

The thread locks must see every thread a frame could make an agent open. The router is lenient
on purpose: a line it cannot read is forwarded untouched for the agent to answer, which on stdio
is the client's own business. Behind ``liminal serve`` it is not: an agent reads with its own
parser, and Node's (the Claude adapters') decodes invalid UTF-8 as U+FFFD, reads a batch,
takes the last of two repeated keys where another parser takes the first. A frame the lock
cannot read as one message could still name a thread another connection holds, and two agents
would write one session.

So a frame goes on only when every reader must agree on what it is: valid UTF-8, one JSON
object (no batch: ACP has none, and its SDK refuses them the same way), no key repeated at any
depth, a request id an agent echoes exactly (a string, or an integer a double holds: a longer
number comes back rounded, or as null, and is then never answered), and a ``sessionId`` that
is a name a lock can be taken under. Whatever else is answered here with a JSON-RPC error,
echoing what id can be recovered; the agent never sees it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from liminal.acp import jsonrpc
from liminal.acp.events import Kind
from liminal.acp.framing import HEAD_BYTES, TAIL_BYTES
from liminal.serve.locks import lock_name

MAX_EXACT_INTEGER = 2**53 - 1  # JavaScript's Number.MAX_SAFE_INTEGER


@dataclass(frozen=True, slots=True)
class Message:
    """One JSON-RPC message every reader agrees on. Only what the locks need is kept: a
    message that waits for a lock costs its bytes, not a parsed copy besides."""

    method: str | None  # None for a response
    thread: str | None  # ``params.sessionId`` of a request or notification, when a string
    rpc_id: str | int | None  # a request's id; None for a notification or a response


@dataclass(frozen=True, slots=True)
class Refusal:
    """A frame that does not reach the agent."""

    answer: bytes | None  # the error response for the client; None when nothing asked
    why: str  # for the log


class _Repeated(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


@dataclass(frozen=True, slots=True)
class _Number:
    """A number that is not an integer a double holds: kept as the text it was sent as."""

    text: str


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _Repeated(key)
        found[key] = value
    return found


def _integer(digits: str) -> int | _Number:
    # Past 16 digits it may not fit a double; and Python refuses to convert more than 4300.
    value = int(digits) if len(digits) <= 17 else None
    return value if value is not None and abs(value) <= MAX_EXACT_INTEGER else _Number(digits)


def _strict(text: str) -> Any:
    return json.loads(text, object_pairs_hook=_pairs, parse_int=_integer, parse_float=_Number,
                      parse_constant=_Number)


def read(data: bytes) -> Message | Refusal:
    """What ``data``, one frame, is (see the module's docstring)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return _refused(data, jsonrpc.PARSE_ERROR, "not valid UTF-8", "a frame that is not UTF-8")
    try:
        strict = _strict(text)
    except _Repeated as repeated:
        return _refused(data, jsonrpc.INVALID_REQUEST, f"the key {repeated.key!r} is repeated",
                        "a frame with a repeated key")
    except (ValueError, RecursionError):
        return _refused(data, jsonrpc.PARSE_ERROR, "not JSON", "a frame that is not JSON")
    if isinstance(strict, list):
        # As ACP's own SDK answers a batch: one error, with no id.
        return Refusal(jsonrpc.error_frame(b"null", jsonrpc.INVALID_REQUEST, "JSON-RPC batches are not supported"),
                       "a batch")
    if not isinstance(strict, dict):
        return Refusal(jsonrpc.error_frame(b"null", jsonrpc.INVALID_REQUEST, "not a JSON-RPC message"),
                       "a frame that is not a JSON object")
    # The router reads the same keys and values (``jsonrpc.parse`` reads whatever this reads:
    # NaN, escaped keys; a lone surrogate, which no lockable session id has, it reads as "?").
    kind = jsonrpc.classify(strict)
    if kind is Kind.INVALID:
        return _refused(data, jsonrpc.INVALID_REQUEST, "not a JSON-RPC request, notification or response",
                        "an object that is not JSON-RPC", strict)
    if kind is Kind.RESPONSE:
        return Message(None, None, None)
    method = strict["method"]
    rpc_id = strict.get("id")
    if "id" in strict and not (type(rpc_id) is str or type(rpc_id) is int):  # type, not isinstance: a bool is an int
        return _refused(data, jsonrpc.INVALID_REQUEST,
                        f"liminal serve takes request ids that are strings or integers up to {MAX_EXACT_INTEGER}",
                        "a request id an agent cannot echo", strict)
    params = strict.get("params")
    session = params.get("sessionId") if isinstance(params, dict) else None
    if not isinstance(session, str):
        return Message(method, None, rpc_id)
    if lock_name(session) is None:
        return _refused(data, jsonrpc.INVALID_PARAMS, "sessionId is not a session id", "a sessionId no lock can be taken on",
                        strict)
    return Message(method, session, rpc_id)


def _refused(data: bytes, code: int, text: str, why: str, strict: dict[str, Any] | None = None) -> Refusal:
    """An error answer echoing the frame's id, when it is a request whose id can be found."""
    if strict is not None:  # read whole: its own id, exactly as sent
        if "method" not in strict or "id" not in strict:
            return Refusal(None, why)
        rpc_id = strict["id"]
        if isinstance(rpc_id, _Number):
            id_json = rpc_id.text.encode()
        elif rpc_id is None or isinstance(rpc_id, (str, int)):  # bool is an int
            id_json = json.dumps(rpc_id).encode()
        else:  # an object or array: an id that JSON-RPC does not allow, answered as unknown
            id_json = b"null"
        return Refusal(jsonrpc.error_frame(id_json, code, text), why)
    # Not readable whole: the id and method a walk of its ends finds. A response's id is not
    # answered (the client asked nothing); a frame with no id found gets a null one.
    found = jsonrpc.recover_top_level(data[:HEAD_BYTES], data[-TAIL_BYTES:])
    recovered = found.get("id")
    if recovered is not None and not _is_json(recovered):
        recovered = None
    if "method" not in found and recovered is not None:
        return Refusal(None, why)
    return Refusal(jsonrpc.error_frame(recovered or b"null", code, text), why)


def _is_json(raw: bytes) -> bool:
    try:
        json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return True
