"""liminal as a proxy component in a conductor's chain: the framing of its one stdio, sans I/O.

A conductor (docs/facts.md, "The conductor and proxy chains") starts liminal as a component and
speaks to it on one stdin/stdout pair that carries both neighbours:

- **the predecessor** (the editor, or the component before): plain ACP both ways, except that
  the editor's ``initialize`` arrives as ``proxy/initialize`` (same params, the conductor's id);
- **the successor** (the next component, or the agent): every message is wrapped in a
  ``proxy/successor`` envelope ``{method, params}``. liminal's requests to it go as
  ``proxy/successor`` requests under an id of this module's own, whose answer is the wrapped
  request's answer; its notifications as ``proxy/successor`` notifications. What the successor
  sends (its ``session/update``s, its ``session/request_permission``) arrives wrapped the same
  way, a request under the conductor's id, which the answer (plain) carries back.

``SuccessorFraming`` turns each line read into a line for one of liminal's two ends (the
router's client side or its agent side, exactly what ``liminal acp -- AGENT`` would read from
the editor or from the agent's process) and wraps what the router writes to the agent. Both
spellings, ``proxy/`` and the ``_proxy/`` of conductors before 5.0.0, are taken; liminal answers
in the one it was initialized with. Lines that are not JSON-RPC go to the client side, whose
router answers them as it answers an editor's.
"""

from __future__ import annotations

import enum
import itertools
from typing import Any

import orjson

from liminal.acp import jsonrpc

PREFIXES = ("proxy/", "_proxy/")
INITIALIZE = tuple(p + "initialize" for p in PREFIXES)
SUCCESSOR = tuple(p + "successor" for p in PREFIXES)
# The ids of liminal's envelopes: a namespace of their own (the conductor's ids are UUIDs).
ENVELOPE_ID_PREFIX = "liminal-successor-"
NOT_IN_A_CHAIN = ("liminal acp without an agent command is a proxy component: a conductor starts it "
                  "and sends proxy/initialize. To run it in front of an agent, give the agent "
                  "command after --, e.g. liminal acp -- npx @agentclientprotocol/claude-agent-acp")


class End(enum.Enum):
    CLIENT = "client"  # the predecessor's, for the router's client side
    AGENT = "agent"  # the successor's, unwrapped, for the router's agent side
    REPLY = "reply"  # an answer of the framing's own, written back to the predecessor


class SuccessorFraming:
    def __init__(self) -> None:
        self.prefix = PREFIXES[0]
        self.initialized = False
        self._ids = itertools.count(1)
        # Each envelope of ours not yet answered: the id of the request it wraps.
        self._wrapped: dict[str, Any] = {}

    def read(self, line: bytes) -> tuple[End, bytes]:
        """One whole line read from stdin (with its newline): which end takes it, and as what."""
        message = jsonrpc.parse(line)
        if message is None:
            return End.CLIENT, line
        method = message.get("method")
        if method is None:
            rpc_id = message.get("id")
            if isinstance(rpc_id, str) and rpc_id in self._wrapped:
                return End.AGENT, _line({**message, "id": self._wrapped.pop(rpc_id)})
            return End.CLIENT, line  # the predecessor's answer to a request liminal sent it
        if method in INITIALIZE:
            self.prefix = method.removesuffix("initialize")
            self.initialized = True
            return End.CLIENT, _line({**message, "method": "initialize"})
        if method in SUCCESSOR:
            inner = unwrapped(message)
            if isinstance(inner["method"], str):
                return End.AGENT, _line(inner)
            if "id" in message:
                return End.REPLY, jsonrpc.error_frame(jsonrpc.encode_id(message["id"], line),
                                                      jsonrpc.INVALID_REQUEST,
                                                      "a proxy/successor envelope without a method") + b"\n"
            return End.REPLY, b""  # a notification with nothing in it: dropped
        if method == "initialize" and "id" in message:
            return End.REPLY, jsonrpc.error_frame(jsonrpc.encode_id(message["id"], line),
                                                  jsonrpc.INVALID_REQUEST, NOT_IN_A_CHAIN) + b"\n"
        return End.CLIENT, line

    def wrap(self, data: bytes) -> bytes:
        """What the router wrote to the agent (whole lines), as the successor takes it: requests
        and notifications in envelopes; answers (to the successor's requests) as they are."""
        out = bytearray()
        for line in data.splitlines(keepends=True):
            message = jsonrpc.parse(line)
            if message is None or "method" not in message:
                out += line if line.endswith(b"\n") else line + b"\n"
                continue
            envelope: dict[str, Any] = {"method": message["method"]}
            if "params" in message:
                envelope["params"] = message["params"]
            frame: dict[str, Any] = {"jsonrpc": "2.0", "method": self.prefix + "successor",
                                     "params": envelope}
            if "id" in message:
                own = f"{ENVELOPE_ID_PREFIX}{next(self._ids)}"
                self._wrapped[own] = message["id"]
                frame["id"] = own
            out += _line(frame)
        return bytes(out)

    def unanswered(self) -> int:
        """Envelopes of ours the successor has not answered."""
        return len(self._wrapped)


def unwrapped(envelope: dict[str, Any]) -> dict[str, Any]:
    """The message a ``proxy/successor`` envelope carries, under the envelope's id if it has one
    (the answer goes back under it). The envelope's own ``_meta`` is for this hop only."""
    inner = envelope.get("params")
    inner = inner if isinstance(inner, dict) else {}
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": inner.get("method")}
    if "params" in inner:
        message["params"] = inner["params"]
    if "id" in envelope:
        message["id"] = envelope["id"]
    return message


def _line(message: dict[str, Any]) -> bytes:
    return orjson.dumps(message) + b"\n"
