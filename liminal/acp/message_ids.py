"""Message ids (the router's rule 10): every user, agent and thought message the client sees
carries a ``messageId`` (ACP's message-id RFD), the agent's own where it sends one, else liminal's.

liminal's id for a message is the store's: the id of the frame that started it,
``<connection>:<seq>`` (``liminal.store.records.frame_id``), which the router knows as it makes
that frame's event (the index counts the same events, from 0, per connection). A message is
what the deriver (``liminal.ingest.derive``) joins into one: consecutive chunks of one thread,
of one kind, one direction and one agent ``messageId``, with no other frame of the thread
between them. ``MessageIds`` applies that rule as frames pass, so the live id and the id the
store gives the message later (a replay from the store, ``session/rewind``) are one id, with
nothing written anywhere to tie them.

Adding the member rewrites the frame: chunks are otherwise forwarded as the agent's bytes. A
chunk in the canonical form every pinned adapter writes gets the member spliced in right after
its update's ``{`` (one copy of the line, no parse); any other is parsed and encoded again.
The taps, and so the store, keep what the agent sent.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import orjson

from liminal.acp.events import UPDATE_KIND_AT, UPDATE_PREFIX
from liminal.acp.jsonrpc import parse as jsonrpc_parse

CHUNK_KINDS = ("agent_message_chunk", "user_message_chunk", "agent_thought_chunk")
_KIND_AT = len(UPDATE_KIND_AT)
# ``"update":{`` ends at this offset from the end of the session id, canonically.
_UPDATE_OPEN = len(b'","update":{')
# The agent's own id, as its bytes say it (a string without escapes; else the line is parsed).
_AGENT_ID = re.compile(rb'"messageId":"([^"\\]*)"')


def frame_id(connection_id: str, seq: int) -> str:
    """``liminal.store.records.frame_id`` (the store's floor is above this one)."""
    return f"{connection_id}:{seq:010d}"


class MessageIds:
    """Which message each chunk belongs to, per thread, and its id (see the module's text).

    The router tells it of every frame it makes an event of (``chunk``, ``other``, ``tapped``,
    ``run``), whether or not ``stamping`` is on; with it off (the router's own tests) nothing
    is ever stamped and lines pass as sent."""

    def __init__(self, connection_id: str, *, stamping: bool = True) -> None:
        self.connection_id = connection_id
        self.stamping = stamping
        self.made = 0  # events made so far: the next one's sequence number
        # thread -> (chunk signature, message id, whether liminal stamped that id itself)
        self._open: dict[str, tuple[Any, str, bool]] = {}

    def next_id(self) -> str:
        return frame_id(self.connection_id, self.made)

    def other(self, thread: str | None) -> None:
        """A frame of ``thread`` that is not a chunk: the thread's open message ends."""
        self.made += 1
        if thread is not None and self._open:
            self._open.pop(thread, None)

    def chunk(self, thread: str, kind: str, direction: str, agent_id: str | None) -> str:
        """A chunk's frame: the id of the message it belongs to (its own frame's id when it
        starts one). ``agent_id``: the ``messageId`` the frame carries (liminal's own when it
        is that frame's id: ``own_id`` gave it)."""
        signature = (kind, direction, agent_id)
        current = self._open.get(thread)
        if current is not None and current[0] == signature:
            self.made += 1
            return current[1]
        mid = frame_id(self.connection_id, self.made)
        self.made += 1
        self._open[thread] = (signature, mid, agent_id == mid)
        return mid

    def own_id(self, thread: str, kind: str, direction: str) -> str:
        """The id for a chunk liminal itself is about to send with none (a command's answer): the
        message it continues, if liminal's chunk of that kind is the thread's last frame, else
        its own frame's (the next event's)."""
        current = self._open.get(thread)
        if current is not None and current[2] and current[0][:2] == (kind, direction):
            return current[1]
        return self.next_id()

    def agent_update(self, line: bytes, out_line: bytes, message: dict[str, Any] | None, end: int,
                     thread: str, direction: str, forwarded: bool) -> bytes:
        """An agent's ``session/update`` (``message``: its parsed copy, None for a canonical line
        whose session id ends at ``end``): counted, and ``out_line`` (what goes to the client,
        when ``forwarded``) stamped if it is a chunk without the agent's own id."""
        kind = canonical_chunk(line, end) if message is None else chunk_kind(message)
        if kind is None:
            self.other(thread)
            return out_line
        agent_id = agent_id_in(line)
        mid = self.chunk(thread, kind, direction, agent_id)
        if not forwarded or agent_id is not None or not self.stamping:
            return out_line
        return stamped(out_line, mid, canonical_end=end if out_line is line and message is None
                       else canonical_end(out_line))

    def run(self, lines: list[bytes], joined: bytes, thread: str, kind: str, direction: str) -> bytes | None:
        """Streamed chunks of ``kind`` for ``thread`` (``lines``, joined by ``\\n`` in ``joined``),
        counted as ``chunk`` would one by one: the member to splice into each line after its
        update's ``{`` (one message, one id; ``b""`` when they carry the agent's own ids or
        stamping is off). None, and nothing counted, when some carry the agent's own id and
        some do not: then line by line. With the agent's own ids only the last line's
        signature is kept: the liminal id of an agent-id message is never read (nothing of it
        is stamped)."""
        count = len(lines)
        if b'"messageId"' not in joined:
            mid = self.chunk(thread, kind, direction, None)
            self.made += count - 1
            return _member(mid) if self.stamping else b""
        found = list(map(_AGENT_ID.search, lines))
        if not all(found):
            return None
        self.made += count - 1
        self.chunk(thread, kind, direction, found[-1].group(1).decode())  # type: ignore[union-attr]
        return b""

    def others(self, thread: str, count: int) -> None:
        """``count`` frames of ``thread`` that are not chunks (``other`` as many times)."""
        self.made += count
        if self._open:
            self._open.pop(thread, None)

    def tapped(self, method: str | None, notification: bool, thread: str | None, direction: str,
               raw: bytes, message: dict[str, Any] | None) -> None:
        """Any other frame the router makes an event of: a chunk (liminal's own, a replay's)
        joins or starts a message, anything else of the thread ends it."""
        kind = None
        if method == "session/update" and notification and thread is not None:
            end = canonical_end(raw) if message is None else None
            kind = chunk_kind(message) if message is not None else (
                canonical_chunk(raw, end) if end is not None else chunk_kind(jsonrpc_parse(raw)))
        if kind is not None and thread is not None:
            self.chunk(thread, kind, direction, agent_id_in(raw))
        else:
            self.other(thread)

    def own_chunk(self, thread: str, params: dict[str, Any], direction: str) -> dict[str, Any]:
        """``params`` of liminal's own ``session/update`` with a ``messageId`` where it is a chunk
        with none."""
        update = params.get("update")
        kind = update.get("sessionUpdate") if isinstance(update, dict) else None
        if not self.stamping or not isinstance(update, dict) or kind not in CHUNK_KINDS \
                or isinstance(update.get("messageId"), str):
            return params
        return {**params, "update": {**update, "messageId": self.own_id(thread, kind, direction)}}


def canonical_chunk(line: bytes, end: int) -> str | None:
    """The kind of a canonical ``session/update`` line (its session id ending at ``end``) when it
    is a message chunk, else None."""
    start = end + _KIND_AT
    kind = line[start:line.find(b'"', start)]
    return _CHUNK_BYTES.get(kind)


_CHUNK_BYTES = {k.encode(): k for k in CHUNK_KINDS}


def chunk_kind(message: dict[str, Any] | None) -> str | None:
    """The kind of a parsed ``session/update`` when it is a message chunk, else None."""
    params = message.get("params") if message is not None else None
    update = params.get("update") if isinstance(params, dict) else None
    kind = update.get("sessionUpdate") if isinstance(update, dict) else None
    return kind if kind in CHUNK_KINDS else None


def agent_id_in(line: bytes) -> str | None:
    """The ``messageId`` a chunk line already carries, or None. Read from the bytes; a line
    where the bytes do not say it plainly is parsed."""
    if b'"messageId"' not in line:
        return None
    found = _AGENT_ID.search(line)
    if found is not None:
        return found.group(1).decode()
    try:
        update = orjson.loads(line)["params"]["update"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None
    value = update.get("messageId") if isinstance(update, dict) else None
    return value if isinstance(value, str) else None


def stamped(line: bytes, message_id: str, *, canonical_end: int | None) -> bytes:
    """``line`` with ``messageId`` added to its update: spliced into a canonical line (its
    session id ending at ``canonical_end``), else before its ``sessionUpdate`` member."""
    member = _member(message_id)
    if canonical_end is not None:
        at = canonical_end + _UPDATE_OPEN
        return line[:at] + member + line[at:]
    # Another writer's form (spaces, another order of members, escapes): still spliced, before
    # the update's ``sessionUpdate`` member, so the agent's bytes stay as they were; checked by
    # a parse, since that key could be spelled elsewhere in the line.
    try:
        message = orjson.loads(line)
        params = message["params"]
        update = params["update"]
        for found in _KEY.finditer(line):
            candidate = line[:found.start(2)] + member + line[found.start(2):]
            try:
                parsed = orjson.loads(candidate)
            except orjson.JSONDecodeError:
                continue
            if parsed.get("params", {}).get("update") == {**update, "messageId": message_id} \
                    and {**parsed, "params": params} == message:
                return candidate
        return orjson.dumps({**message, "params": {**params, "update": {**update, "messageId": message_id}}})
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        return line


@functools.lru_cache(maxsize=64)
def _member(message_id: str) -> bytes:
    """The member spliced in (every chunk of a message spells the same: made once)."""
    return b'"messageId":' + orjson.dumps(message_id) + b","


_KEY = re.compile(rb'([{,]\s*)("sessionUpdate"\s*:)')


def canonical_end(line: bytes) -> int | None:
    """Where the session id of a canonical ``session/update`` line ends, or None."""
    if not line.startswith(UPDATE_PREFIX):
        return None
    end = line.find(b'"', len(UPDATE_PREFIX))
    if end < 0 or not line.startswith(UPDATE_KIND_AT, end) or b"\\" in line[len(UPDATE_PREFIX):end]:
        return None
    return end


# Where a prompt's answer says its user message's id: under the result's ``_meta`` (an
# extension by ACP's rules). The message-id RFD's draft named it ``userMessageId`` on the result;
# the completed RFD and both SDKs' ``PromptResponse`` have no such member.
USER_MESSAGE_ID = "userMessageId"


def user_message_id_of(result: Any) -> str | None:
    """The id a prompt's answer carries for its user message (under ``_meta``), if any."""
    meta = result.get("_meta") if isinstance(result, dict) else None
    found = meta.get(USER_MESSAGE_ID) if isinstance(meta, dict) else None
    return found if isinstance(found, str) else None


def with_user_message_id_in(result: dict[str, Any], message_id: str) -> dict[str, Any]:
    """``result`` with the user message's id added under its ``_meta`` (the agent's own kept)."""
    meta = result.get("_meta")
    return {**result, "_meta": {**(meta if isinstance(meta, dict) else {}), USER_MESSAGE_ID: message_id}}


def with_user_message_id(line: bytes, id_json: bytes, result: dict[str, Any], message_id: str) -> bytes:
    """A prompt's answer with its user message's id under ``_meta``, spliced in first in its
    result when the agent's has no ``_meta`` (the agent's bytes kept: its order of members, its
    usage figures and floats), checked by a parse; else encoded again."""
    amended = with_user_message_id_in(result, message_id)
    member = b'"_meta":' + orjson.dumps({USER_MESSAGE_ID: message_id})
    try:
        message = orjson.loads(line)
    except orjson.JSONDecodeError:
        message = None
    if isinstance(message, dict) and "_meta" not in result:
        wanted = {**message, "result": amended}
        for found in _RESULT.finditer(line):
            at = found.end()
            rest = line[at:]
            candidate = line[:at] + member + (rest if rest.lstrip().startswith(b"}") else b"," + rest)
            try:
                if orjson.loads(candidate) == wanted:
                    return candidate
            except orjson.JSONDecodeError:
                continue
    return b'{"jsonrpc":"2.0","id":' + id_json + b',"result":' + orjson.dumps(amended) + b"}"


_RESULT = re.compile(rb'"result"\s*:\s*\{')
