"""From frames to the conversation a person reads: a pure state machine, no I/O.

Rules, all in this file:

* A ``session/prompt`` request opens a turn; its frame id is the turn id and it yields a ``user``
  message. Its response yields a ``turn_end`` message (stop reason, usage) and closes the turn.
* Consecutive ``agent_message_chunk`` (or ``agent_thought_chunk``, ``user_message_chunk``) updates
  of one thread are joined into one message; any other frame of the thread (an update, a
  prompt, a permission request, a note), a different ``messageId``, or a chunk from another
  sender (liminal's notice before the agent's thought) starts a new one. A message's id is the
  id of the frame that started it, so deriving the same frames again (after a crash, or from
  the frames table) gives the same ids; the router gives the client the same id as the
  message streams (its rule 10, ``liminal.acp.message_ids``, which applies this rule).
* ``tool_call`` starts a tool call message; ``tool_call_update`` merges into it (ACP: fields
  present replace, ``content`` replaces the whole list). The latest version is re-emitted.
* ``plan`` replaces the turn's plan; ``usage_update`` is one usage point each.
* ``session/new``, ``session/load``, ``session/resume``, ``session/fork`` results, and
  ``session_info_update`` titles, yield thread updates.
* Updates that arrive while a ``session/load`` is pending are a replay of the thread's history.
  Only a thread's first load records it: the conversation from before liminal, kept as
  messages marked ``replayed``. A load of a thread whose history liminal has (it said so
  here, or the store did: ``told``, asked by ``liminal.ingest.recovery.ask_loads``) records
  what is new of it and not the history again: its history updates
  (``records.HISTORY_UPDATES``) derive nothing and ``feed`` says they are not to be stored;
  what describes the session now (commands, mode, usage, a title) is stored as frames. Such
  a load's note (``records.LOAD``) lists the messages the agent replayed to the client, by
  the ids the client was given. A replay the client never saw (``a2l``: a swap's load, a moved thread's
  compressed session) yields no message either way.
* One thread, one name. A title the agent gives the thread's own session is the thread's
  title; one it gives a session liminal moved the thread onto (the CLI titles every new
  session after its first prompt) only stands in for a missing one. A session liminal opens
  for a thread joins its lineage when the move commits (its swap note), not when the agent
  answers the open (a move can still fail). Only the client's ``session/close`` closes a
  thread: liminal's closes the session a move left, which is no thread of its own.
* A frame no rule can read (an unexpected shape) yields one ``problem`` message naming it and
  why; nothing else about it changes, and the frames around it are derived as usual.
* Each frame is taken once: a frame whose sequence number is not past the last one seen on its
  connection is ignored, so replays of the spool never derive twice.
* Bounded, whatever the agent sends: a message joined from chunks keeps its first
  ``MESSAGE_TEXT_CHARS`` characters, then a note that the rest is in its frames (unbounded, a 1.5 GB
  streamed answer would be held whole, joined again at every write, and refused by the store). A
  frame past ``DERIVE_BYTES`` is derived from a copy whose strings past ``CUT_STRING_BYTES`` are
  cut (``liminal.ingest.cutcopy``: its reader does that), and gets a ``problem`` message saying
  so; the frame itself is stored whole.

``feed`` takes frames; ``take`` returns the messages created or changed since the last call, each
once, in its latest version, and the thread updates.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from liminal import moves
from liminal.errors import in_words
from liminal.ingest.salvage import problem_message
from liminal.store.records import (
    HISTORY_KINDS,
    HISTORY_UPDATES,
    LOAD,
    FrameRecord,
    MessageRecord,
    ThreadUpdate,
    load_note_id,
)

_CHUNK_KINDS = {
    "user_message_chunk": "user",
    "agent_message_chunk": "agent",
    "agent_thought_chunk": "thought",
}
# Requests whose parameters the deriver needs when their response arrives.
_REMEMBERED = {"initialize", "session/new", "session/load", "session/resume", "session/fork",
               "session/prompt"}
# liminal answers some client requests itself (its commands): "l2c" answers a "c2l" request.
_RESPONSE_TO_REQUEST = {"a2c": "c2a", "a2l": "l2a", "l2c": "c2l"}
TITLE_CHARS = 80
# A message's text is kept up to this many characters (a model's longest answers are well below
# a million); the rest stays in its frames.
MESSAGE_TEXT_CHARS = 4 * 1024 * 1024
# Frames up to this size are derived from their whole parsed copy (the default
# ``proxy.max_frame_bytes``); longer ones from a copy with strings cut to ``CUT_STRING_BYTES``.
DERIVE_BYTES = 64 * 1024 * 1024
CUT_STRING_BYTES = 1024 * 1024


@dataclass(slots=True)
class _Open:
    """The text message being joined from chunks (joined lazily: once per ``take``, not once
    per chunk, which would be quadratic in a long answer)."""

    message: MessageRecord
    parts: list[str]
    message_id: str | None  # ACP messageId, when the agent sends one
    # Who sent the chunks: liminal's own text (a swap notice, a command's answer, ``l2c``) is
    # never joined to the agent's around it, so it stays liminal's (search leaves it out).
    direction: str = ""
    closed: bool = False
    chars: int = 0  # characters held, in the text and the parts not joined yet
    dropped: int = 0  # characters past ``MESSAGE_TEXT_CHARS``, left in the frames
    taken: int = 0  # ``chars`` when ``take`` last returned it

    def record(self) -> MessageRecord:
        if self.parts:
            text = self.message.text + "".join(self.parts)
            if len(text) > MESSAGE_TEXT_CHARS:
                self.dropped += len(text) - MESSAGE_TEXT_CHARS
                text = text[:MESSAGE_TEXT_CHARS]
            self.message = replace(self.message, text=text)
            self.parts = []
        if self.dropped:
            return replace(self.message, text=self.message.text + (
                f"\n[liminal: the rest of this message, {self.dropped:,} characters, "
                "is in its frames]"))
        return self.message


@dataclass(slots=True)
class _Load:
    """A ``session/load`` of the thread under way."""

    frame: FrameRecord  # its request
    recorded: bool  # the thread's first: its replay is kept as the conversation before liminal
    said: list[list[str]] = field(default_factory=list)  # [kind, id] replayed to the client


@dataclass(slots=True)
class _ThreadState:
    turn_id: str | None = None
    open: _Open | None = None
    tools: dict[str, MessageRecord] = field(default_factory=dict)
    plan_id: str | None = None
    load: _Load | None = None
    said: bool = False  # a message of its history was derived here (live, or a recorded replay)
    ended_turn_id: str | None = None  # the last turn that ended
    file_used: int | None = None  # the last context liminal noted from the session file

    @property
    def loading(self) -> bool:
        return self.load is not None

    def ended(self, turn_id: str) -> None:
        self.turn_id, self.ended_turn_id = None, turn_id
        self.tools.clear()


# liminal's own notes for the store (never sent), by method: the Deriver's method for each.
_NOTES = {"liminal/swap": "_swap", "liminal/mark": "_mark", "liminal/restored": "_restored",
          "liminal/usage": "_file_usage"}


def usage_point(frame: FrameRecord, message: dict[str, Any], state: _ThreadState) -> list[MessageRecord]:
    """A ``liminal/usage`` note: the context liminal read from the session file of a CLI that
    sends no ``usage_update`` (at a turn's end), a usage point of the turn that ended, as the
    agent's would be, though the next prompt may have come meanwhile (a look far below the
    trigger reads the file unheld). The same size again is no new model call (a command's
    turn): no point."""
    params = message.get("params")
    used = params.get("used") if isinstance(params, dict) else None
    if frame.thread_id is None or not isinstance(used, int) or isinstance(used, bool) or used == state.file_used:
        return []
    state.file_used = used
    return [MessageRecord(
        id=frame.id, thread_id=frame.thread_id, turn_id=state.ended_turn_id or state.turn_id, time=frame.time,
        order=_order(frame), kind="usage", data={"used": used}, backing_id=frame.backing_id or frame.thread_id)]


@dataclass(frozen=True, slots=True)
class Derived:
    messages: list[MessageRecord]
    threads: list[ThreadUpdate]


def content_text(block: Any) -> str:
    """The readable text of an ACP ContentBlock (text, resource link, embedded resource)."""
    if not isinstance(block, dict):
        return ""
    kind = block.get("type")
    if kind == "text":
        text = block.get("text", "")
        return text if isinstance(text, str) else str(text)
    if kind == "resource_link":
        return f"[{block.get('name') or block.get('uri', '')}]"
    if kind == "resource":
        res = block.get("resource") or {}
        return str(res.get("text") or f"[{res.get('uri', '')}]")
    if kind in {"image", "audio"}:
        return f"[{kind}]"
    return ""


def tool_text(data: dict[str, Any]) -> str:
    """What search should find in a tool call: title, input, every text output, raw output."""
    parts = [str(data.get("title") or "")]
    if data.get("rawInput") is not None:
        parts.append(_compact(data["rawInput"]))
    for item in data.get("content") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "content":
            parts.append(content_text(item.get("content")))
        elif item.get("type") == "diff":
            parts.append(f"{item.get('path', '')}\n{item.get('newText', '')}")
    if data.get("rawOutput") is not None:
        parts.append(_compact(data["rawOutput"]))
    return "\n".join(p for p in parts if p)


def _compact(value: Any) -> str:
    if isinstance(value, str):
        return value
    import orjson

    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return str(value)


class Deriver:
    def __init__(self) -> None:
        self._threads: dict[str, _ThreadState] = {}
        self._requests: dict[tuple[str, str, str], tuple[str, dict[str, Any], str]] = {}
        self._harness: dict[str, str] = {}
        self._last_seq: dict[str, int] = {}
        self._out = Derived([], [])  # scratch for the frame being fed
        self._changed: dict[str, MessageRecord | _Open] = {}
        self._told: dict[str, bool] = {}  # load request frame id -> the store had the history
        self._keep = True  # whether the frame being fed is to be stored

    def to_ask(self, frame: FrameRecord, message: dict[str, Any] | None) -> str | None:
        """The thread of a ``session/load`` request in ``frame`` whose replay only the store can
        place: whether it holds the thread's history from before this load (``told``). None
        when there is nothing to ask (not a load, taken already, or known here)."""
        if (frame.kind != "request" or frame.method != "session/load" or message is None
                or self.seen(frame) or frame.id in self._told):
            return None
        params = message.get("params")
        thread_id = frame.thread_id or (_str(params.get("sessionId")) if isinstance(params, dict) else "")
        state = self._threads.get(thread_id) if thread_id else None
        return None if not thread_id or (state is not None and state.said) else thread_id

    def told(self, frame_id: str, said_before: bool) -> None:
        """What the store said for the load ``frame_id`` names (``to_ask``): whether it holds
        the thread's history from before it. Not told, a load is taken for the thread's first
        unless this deriver has seen its history."""
        self._told[frame_id] = said_before

    def seen(self, frame: FrameRecord) -> bool:
        """Whether this frame (or a later one of its connection) was already taken."""
        return frame.seq <= self._last_seq.get(frame.connection_id, -1)

    def knows(self, connection_id: str) -> bool:
        """Whether any frame of this connection was taken."""
        return connection_id in self._last_seq

    def feed(self, frame: FrameRecord, message: dict[str, Any] | None) -> bool:
        """Take one frame (in sequence order); ``take`` returns what it changed. False: the
        frame is a piece of a history the store has already (a later load's replay), not to be
        stored."""
        if self.seen(frame):
            return True
        self._last_seq[frame.connection_id] = frame.seq
        if message is None or frame.kind in {"invalid", "oversized"}:
            return True
        out = self._out
        self._keep = True
        if len(frame.raw) > DERIVE_BYTES:
            note = problem_message(
                "large", frame,
                f"a frame of {len(frame.raw):,} bytes: derived from a copy with every string "
                f"past {CUT_STRING_BYTES:,} bytes cut; the frame is stored whole")
            self._changed[note.id] = note
        threads_before = len(out.threads)
        if frame.thread_id is not None and frame.method != "session/update":
            # Any frame of the thread but an update ends its open text (updates decide in
            # ``_update``): the router's rule 10 numbers messages by the same rule.
            state = self._threads.get(frame.thread_id)
            if state is not None:
                self._close_text(state)
        try:
            if frame.kind == "request":
                self._request(frame, message, out)
            elif frame.kind == "notification":
                if frame.method == "session/update":
                    self._update(frame, message, out)
                elif frame.direction == "note" and frame.method in _NOTES:
                    getattr(self, _NOTES[frame.method])(frame, message, out)
            elif frame.kind == "response":
                self._response(frame, message, out)
        except Exception as exc:
            # Valid JSON of a shape no rule expected (a prompt that is a number, plan entries
            # that are not a list): the frame is stored raw as always, this says why it
            # yielded nothing, and its neighbours are derived as usual.
            out.messages.clear()
            del out.threads[threads_before:]
            out.messages.append(problem_message(
                "derive", frame,
                f"not derived, a shape liminal did not expect: {in_words(exc)}"))
            self._keep = True
        for m in out.messages:
            self._changed[m.id] = m
            if m.kind in HISTORY_KINDS:
                self._state(m.thread_id).said = True
        out.messages.clear()
        return self._keep

    @property
    def holding(self) -> bool:
        """Whether ``take(include_open=False)`` held back text that is not written yet."""
        return bool(self._changed)

    def take(self, *, include_open: bool = True, growth: float = 0.0) -> Derived:
        """The latest version of every message changed since the last ``take``, and the thread
        updates, in order. ``include_open=False`` holds back text still growing (its next
        version would replace it anyway): re-indexing a long answer's whole text for full-text
        search at every batch is the one quadratic cost in indexing. ``growth``: a text still
        growing is taken only once it has grown by that share of what it was when last taken
        (0.5: by half), so that taking it again and again costs in all a small multiple of its
        final length (about ``1 + 1 / growth`` times), not the square of it."""
        messages: list[MessageRecord] = []
        held: dict[str, MessageRecord | _Open] = {}
        for key, value in self._changed.items():
            if isinstance(value, _Open):
                if not value.closed and (not include_open or value.chars < value.taken * (1 + growth)):
                    held[key] = value
                    continue
                value.taken = value.chars
                messages.append(value.record())
            else:
                messages.append(value)
        threads = list(self._out.threads)
        self._changed = held
        self._out.threads.clear()
        return Derived(messages, threads)

    # -- requests -----------------------------------------------------------------------------

    def _request(self, frame: FrameRecord, message: dict[str, Any], out: Derived) -> None:
        method = frame.method or ""
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if method in _REMEMBERED and frame.rpc_id is not None:
            if frame.direction == "c2a":  # a request liminal kept, then passed on: answered a2c
                self._requests.pop((frame.connection_id, "c2l", frame.rpc_id), None)
            self._requests[(frame.connection_id, frame.direction, frame.rpc_id)] = (
                method, params, frame.id)
        thread_id = frame.thread_id or _str(params.get("sessionId"))
        if not thread_id:
            return
        state = self._state(thread_id)
        if method == "session/load":
            said_before = state.said or self._told.pop(frame.id, False)
            state.load = _Load(frame, recorded=not said_before)
        elif method == "session/close" and frame.direction == "c2a":
            # The client's close ends the thread; liminal's own (a move closing the session the
            # thread left) names only that backing session, which is no thread of its own.
            out.threads.append(ThreadUpdate(thread_id, frame.time, state="closed"))
        elif method == "session/prompt":
            self._close_text(state)
            state.turn_id = frame.id
            state.plan_id = None
            blocks = params.get("prompt") or []
            text = "\n".join(t for t in (content_text(b) for b in blocks) if t)
            out.messages.append(MessageRecord(
                id=frame.id, thread_id=thread_id, turn_id=frame.id, time=frame.time,
                order=_order(frame), kind="user", text=text, data={"prompt": blocks},
                backing_id=frame.backing_id or thread_id))
            if frame.direction != "c2l":  # liminal's own command (``/memo ...``) names no thread
                first_line = text.strip().splitlines()[0] if text.strip() else ""
                out.threads.append(ThreadUpdate(thread_id, frame.time,
                                                fallback_title=first_line[:TITLE_CHARS]))

    # -- liminal's own notes ------------------------------------------------------------------

    def _mark(self, frame: FrameRecord, message: dict[str, Any], out: Derived) -> None:
        """A mark set (``/mark NAME``): one ``mark`` message per thread and name, the latest
        position winning (its id is the name's)."""
        params = message.get("params")
        if not isinstance(params, dict):
            return
        thread_id = frame.thread_id or _str(params.get("thread_id"))
        name = _str(params.get("name"))
        if not thread_id or not name:
            return
        out.messages.append(MessageRecord(
            id=f"mark:{thread_id}:{name}", thread_id=thread_id, turn_id=None, time=frame.time,
            order=_order(frame), kind="mark", text=name,
            data={k: params[k] for k in ("backing_id", "offset") if k in params},
            backing_id=frame.backing_id or thread_id))

    def _swap(self, frame: FrameRecord, message: dict[str, Any], out: Derived) -> None:
        """A swap liminal attempted (its journal record): one ``swap`` message, between turns."""
        record = message.get("params")
        thread_id = frame.thread_id or (_str(record.get("thread_id")) if isinstance(record, dict) else None)
        if not isinstance(record, dict) or not thread_id:
            return
        state = self._state(thread_id)
        self._close_text(state)
        outcome = _str(record.get("outcome")) or "?"
        text = moves.describe(record, committed_why=False)
        out.messages.append(MessageRecord(
            id=frame.id, thread_id=thread_id, turn_id=state.turn_id, time=frame.time,
            order=_order(frame), kind="swap", text=text, status=outcome, data=record,
            backing_id=frame.backing_id or thread_id))
        moved_to = _str(record.get("new_backing_id"))
        if outcome == "committed" and moved_to:
            # The journal's word on the lineage (what an answer to the open may not say).
            lineage = tuple(b for b in (_str(record.get("old_backing_id")), moved_to) if b)
            out.threads.append(ThreadUpdate(thread_id, frame.time, cwd=_str(record.get("cwd")),
                                            backing_ids=lineage))

    def _restored(self, frame: FrameRecord, message: dict[str, Any], out: Derived) -> None:
        """A session liminal opened for the client's load of a thread whose file was gone
        (``liminal.kernel.restore``, which wrote it again from the store): liminal's own load
        names the session to no one, so this does; the CLI's turns from here on are indexed."""
        record = message.get("params")
        thread_id = frame.thread_id
        backing = _str(record.get("backing_id")) if isinstance(record, dict) else None
        if thread_id and backing and isinstance(record, dict):
            out.threads.append(ThreadUpdate(thread_id, frame.time, cwd=_str(record.get("cwd")),
                                            backing_ids=(backing,)))

    def _file_usage(self, frame: FrameRecord, message: dict[str, Any], out: Derived) -> None:
        """The context read from the session file of a CLI that tells none (``usage_point``)."""
        if frame.thread_id:
            out.messages.extend(usage_point(frame, message, self._state(frame.thread_id)))

    # -- session/update -----------------------------------------------------------------------

    def _update(self, frame: FrameRecord, message: dict[str, Any], out: Derived) -> None:
        params = message.get("params")
        if not isinstance(params, dict):
            return
        update = params.get("update")
        thread_id = frame.thread_id or _str(params.get("sessionId"))
        if not thread_id or not isinstance(update, dict):
            return
        state = self._state(thread_id)
        kind = update.get("sessionUpdate")
        load = state.load
        if load is not None and (not load.recorded or frame.direction == "a2l"):
            if kind in HISTORY_UPDATES:
                self._replayed_again(frame, update, kind, state, load)
                return
            if kind == "usage_update":  # the session's usage now: its last turn's, recorded live
                return
        elif frame.direction == "a2l" and kind in HISTORY_UPDATES:
            # History the client never saw, after its load was answered: the tail of a replay
            # the agent streams after answering (the router keeps it from the client until the
            # session's next prompt). The store has those messages already.
            self._keep = False
            self._close_text(state)
            return
        if kind in _CHUNK_KINDS:  # the hot path: most frames are chunks
            text = content_text(update.get("content"))
            msg_kind = _CHUNK_KINDS[kind]
            message_id = update.get("messageId") or None
            current = state.open
            if (current is not None and current.message.kind == msg_kind
                    and current.message_id == message_id
                    and current.message.replayed == state.loading
                    and current.direction == frame.direction):
                if current.chars < MESSAGE_TEXT_CHARS:
                    current.parts.append(text)
                    current.chars += len(text)
                else:  # held no more: the frames have it
                    current.dropped += len(text)
            else:
                self._close_text(state)
                state.said = True
                data = {"messageId": message_id} if message_id else {}
                current = _Open(MessageRecord(
                    id=frame.id, thread_id=thread_id, turn_id=state.turn_id, time=frame.time,
                    order=_order(frame), kind=msg_kind, data=data, replayed=state.loading,
                    backing_id=frame.backing_id or thread_id), [text], _str(message_id) or None,
                    frame.direction, chars=len(text))
                state.open = current
            self._changed[current.message.id] = current
            return
        self._close_text(state)
        base = MessageRecord(
            id=frame.id, thread_id=thread_id, turn_id=state.turn_id, time=frame.time,
            order=_order(frame), kind="", replayed=state.loading,
            backing_id=frame.backing_id or thread_id)
        if kind in {"tool_call", "tool_call_update"}:
            tool_id = _str(update.get("toolCallId"))
            previous = state.tools.get(tool_id)
            data = dict(previous.data) if previous else {}
            data.update({k: v for k, v in update.items() if k != "sessionUpdate"})
            start = previous or replace(base, kind="tool_call", tool_call_id=tool_id)
            msg = replace(start, text=tool_text(data), status=_str(data.get("status")) or None,
                          data=data)
            state.tools[tool_id] = msg
            out.messages.append(msg)
        elif kind == "plan":
            plan_id = state.plan_id or frame.id
            state.plan_id = plan_id
            entries = update.get("entries") or []
            text = "\n".join(str(e.get("content", "")) for e in entries if isinstance(e, dict))
            out.messages.append(replace(base, id=plan_id, kind="plan", text=text,
                                        data={"entries": entries}))
        elif kind == "usage_update":
            data = {k: v for k, v in update.items() if k != "sessionUpdate"}
            out.messages.append(replace(base, kind="usage", data=data))
        elif kind == "session_info_update":
            title = _str(update.get("title"))
            if title and frame.backing_id in (None, "", thread_id):
                out.threads.append(ThreadUpdate(thread_id, frame.time, title=title))
            elif title:  # a session the thread moved onto: titled after its own first prompt
                out.threads.append(ThreadUpdate(thread_id, frame.time, fallback_title=title))

    def _replayed_again(self, frame: FrameRecord, update: dict[str, Any], kind: Any,
                        state: _ThreadState, load: _Load) -> None:
        """A piece of history in a load whose replay is not recorded: the store has the thread's
        history, or the client never saw it (``a2l``: a swap's load, a moved thread's compressed
        session, whose lines the store has). It derives no message and is not stored. Its
        messages' boundaries are followed as for any (the router's rule 10 numbers them
        alike), and each one the agent replayed to the client goes into the load's note, by
        the id the client was given."""
        self._keep = False
        if kind not in _CHUNK_KINDS:
            self._close_text(state)
            return
        message_id = update.get("messageId") or None
        msg_kind = _CHUNK_KINDS[kind]
        current = state.open
        if (current is not None and current.message.kind == msg_kind
                and current.message_id == message_id and current.direction == frame.direction):
            return
        self._close_text(state)
        state.open = _Open(MessageRecord(
            id=frame.id, thread_id=load.frame.thread_id or "", turn_id=None, time=frame.time,
            order=_order(frame), kind=msg_kind, replayed=True), [], _str(message_id) or None,
            frame.direction)
        if frame.direction == "a2c":
            load.said.append([msg_kind, _str(message_id) or frame.id])

    # -- responses ----------------------------------------------------------------------------

    def _response(self, frame: FrameRecord, message: dict[str, Any], out: Derived) -> None:
        request_dir = _RESPONSE_TO_REQUEST.get(frame.direction)
        if request_dir is None or frame.rpc_id is None:
            return
        key = (frame.connection_id, request_dir, frame.rpc_id)
        remembered = self._requests.pop(key, None)
        if remembered is None:
            return
        method, params, request_frame = remembered
        result = message.get("result")
        result = result if isinstance(result, dict) else {}
        if method == "initialize":
            info = result.get("agentInfo")
            if isinstance(info, dict) and info.get("name"):
                self._harness[frame.connection_id] = str(info["name"])
            return
        if method == "session/prompt":
            thread_id = frame.thread_id or _str(params.get("sessionId"))
            if not thread_id:
                return
            state = self._state(thread_id)
            self._close_text(state)
            data: dict[str, Any] = dict(result)
            if "error" in message:
                data = {"error": message["error"]}
            out.messages.append(MessageRecord(
                id=frame.id, thread_id=thread_id, turn_id=request_frame, time=frame.time,
                order=_order(frame), kind="turn_end", text="",
                status=_str(result.get("stopReason")) or ("error" if "error" in message else None),
                data=data, backing_id=frame.backing_id or thread_id))
            state.ended(request_frame)
            out.threads.append(ThreadUpdate(thread_id, frame.time))
            return
        if "error" in message:
            if method == "session/load":
                sid = frame.thread_id or _str(params.get("sessionId"))
                if sid:
                    self._state(sid).load = None
            return
        session_id = _str(result.get("sessionId")) or _str(params.get("sessionId"))
        if method == "session/fork":
            session_id = _str(result.get("sessionId"))
            thread_id = session_id
        else:
            thread_id = frame.thread_id or session_id
        if not thread_id:
            return
        backing = frame.backing_id or session_id or thread_id
        state = self._state(thread_id)
        load, state.load = state.load, None
        self._close_text(state)
        if method == "session/load" and load is not None and not load.recorded and load.said:
            out.messages.append(MessageRecord(
                id=load_note_id(thread_id), thread_id=thread_id, turn_id=None,
                time=load.frame.time, order=_order(load.frame), kind=LOAD,
                data={"said": load.said}, backing_id=frame.backing_id or thread_id))
        if frame.direction == "a2l":
            # A session liminal opened for the thread (a swap, /clear): the thread is on it
            # only once the move commits, which its swap note says (``_swap``).
            return
        out.threads.append(ThreadUpdate(
            thread_id, frame.time, cwd=_str(params.get("cwd")),
            harness=self._harness.get(frame.connection_id, ""), state="active",
            backing_ids=(backing,)))

    # -- helpers ------------------------------------------------------------------------------

    def _state(self, thread_id: str) -> _ThreadState:
        state = self._threads.get(thread_id)
        if state is None:
            state = self._threads[thread_id] = _ThreadState()
        return state

    @staticmethod
    def _close_text(state: _ThreadState) -> None:
        if state.open is not None:
            state.open.closed = True
            state.open = None


def _order(frame: FrameRecord) -> str:
    """Sort key within a thread: wall time first (threads span connections), then the frame."""
    return f"{frame.time:017.6f}|{frame.id}"


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""
