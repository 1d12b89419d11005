"""What the store holds, as plain frozen values every backend reads and writes.

Every record has a deterministic id derived from where it came from (a frame's connection and
sequence number, a tool call's id, a session file's byte offset), so writing the same thing twice
is a no-op. That is what lets the indexer replay its spool, and re-index a session file, without
ever creating duplicates.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any


def frame_id(connection_id: str, seq: int) -> str:
    """The id of the ``seq``-th frame liminal saw on a connection (zero-padded: sorts as text)."""
    return f"{connection_id}:{seq:010d}"


# The direction of a frame from the client to liminal: a prompt of it is one liminal answered
# itself (a command), which never reached the model and is no turn of the conversation.
TO_LIMINAL = "c2l"


@dataclass(frozen=True, slots=True)
class FrameRecord:
    """One frame of the immutable log, byte-exact."""

    id: str
    connection_id: str
    seq: int
    time: float
    direction: str  # Direction.value: c2a, a2c, l2a, a2l, l2c
    kind: str  # Kind.value
    thread_id: str | None
    backing_id: str | None
    method: str | None
    rpc_id: str | None  # the JSON-RPC id as JSON text (ids may be numbers or strings)
    size: int
    raw: bytes


@dataclass(frozen=True, slots=True)
class MessageRecord:
    """One entry of a thread's conversation as a person reads it.

    ``kind`` is one of ``user``, ``agent``, ``thought``, ``tool_call``, ``plan``, ``usage``,
    ``turn_end``. Agent text and thoughts are their chunks joined; a tool call carries its final
    status and output in ``data``. The same id is written again as a message grows: the latest
    version wins.
    """

    id: str
    thread_id: str
    turn_id: str | None  # the frame id of the session/prompt request that opened the turn
    time: float  # when the message started
    order: str  # sort key within the thread: the frame id that started it
    kind: str
    text: str = ""
    tool_call_id: str | None = None
    status: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    # True for messages an agent replayed during session/load: history shows only those of the
    # first load before anything recorded live (``conversation``), and search leaves them out.
    replayed: bool = False
    backing_id: str | None = None


# The model's summaries of a thread's oldest turns (``liminal.kernel.summaries``) are messages of
# this pseudo-thread, each naming the thread it summarises (``data["thread"]``). They are that
# thread's record: deleted with it (``Store.delete_thread``) and, once it is deleted, taken no
# more (``Batch.without``). Memos are kept the same way and outlive the thread they were written
# in (``liminal.lookup.memos``): a person's note, not a copy of the conversation.
SUMMARY_THREAD = "liminal-summaries"
# The lessons the model drew from a thread's turns (``liminal.lookup.lessons``): one message of
# this pseudo-thread per lesson and thread it came from, naming that thread in ``data["thread"]``
# as a summary does, so each thread's part of a lesson several threads share is that thread's
# record, deleted with it (``Store.delete_thread``) while the other threads' parts stay.
LESSON_THREAD = "liminal-lessons"
# The pseudo-threads whose messages are each the record of the thread their ``data`` names.
OWNED_ELSEWHERE = (SUMMARY_THREAD, LESSON_THREAD)


def summarised(data: object) -> str | None:
    """The thread a model's summary names in its ``data``, if any."""
    found = data.get("thread") if isinstance(data, dict) else None
    return found if isinstance(found, str) and found else None


def of_thread(message: MessageRecord) -> str:
    """The thread a message is the record of: its own, or the one a model's summary summarises
    (a lesson's part: the thread it came from)."""
    if message.thread_id in OWNED_ELSEWHERE:
        return summarised(message.data) or message.thread_id
    return message.thread_id


def acp_message_id(message: MessageRecord) -> str:
    """The ``messageId`` the client knows a message by: the agent's own, where it sent one, else
    the store's id, which liminal gave it as it streamed (``liminal.acp.message_ids``)."""
    given = message.data.get("messageId")
    return given if isinstance(given, str) and given else message.id


# The ``session/update`` kinds that make a thread's history: what a load replays. A load of a
# thread the store already has stores none of them again (``liminal.ingest.derive``), and the
# compaction of a store an older liminal wrote removes those it stored (``Store.compact``).
HISTORY_UPDATES = frozenset({"user_message_chunk", "agent_message_chunk", "agent_thought_chunk",
                             "tool_call", "tool_call_update", "plan"})
# The note of a thread's latest load whose replay was not stored (the store had the thread):
# one message per thread, ``load:<thread>``, replaced at every such load. Its ``data["said"]``
# lists what the agent replayed to the client, ``[kind, message id]`` in order, so that a
# ``session/rewind`` naming a message by the id it had in that replay finds its turn
# (``liminal.kernel.rewind``). No reader shows it (``conversation`` leaves it out).
LOAD = "load"
# The message kinds those updates yield: a thread with one of them has a conversation.
HISTORY_KINDS = ("user", "agent", "thought", "tool_call", "plan")


def load_note_id(thread_id: str) -> str:
    return f"load:{thread_id}"


def replays_kept(replays: Sequence[tuple[str, str]], first_live: str | None) -> set[str]:
    """Of a thread's replayed messages, as ``(id, order)`` oldest first, the ones its history
    shows: the first load's (its connection's), from before anything recorded live
    (``conversation``). ``first_live``: the order of the first message recorded live, if any.
    The others are a load's replay of what the store had already (``Store.compact``)."""
    earlier = [m for m in replays if first_live is None or m[1] < first_live]
    if not earlier:
        return set()
    first_load = _connection(earlier[0][0])
    return {m[0] for m in earlier if _connection(m[0]) == first_load}

# What liminal keeps of a thread for the model beyond its context (docs/memory.md), as messages
# of the thread (so every sidecar on the store reads them and ``Store.delete_thread`` takes
# them): its scratchpad (``liminal.lookup.scratchpad``) and the queries of its search dumps
# (``liminal.lookup.dumps``). No part of the conversation, which leaves them out.
MEMORY_KINDS = frozenset({"scratchpad", "dump"})


def conversation(messages: Sequence[MessageRecord]) -> list[MessageRecord]:
    """A thread's history as its user knows it, from all its messages in order.

    What liminal recorded live, preceded by what came before liminal: a thread first seen
    through a ``session/load`` had a past, which the agent replayed then (the only load whose
    replay is stored: ``liminal.ingest.derive``). Of replayed messages only those from before
    the first live one count, and of those only the first load's (its connection's): a store
    an older liminal wrote holds every load's replay until it is compacted. ``liminal
    history`` shows this; a load of a moved thread replays it (``liminal.kernel.replay``).
    """
    said = [m for m in messages if m.kind != LOAD and m.kind not in MEMORY_KINDS]
    live = [m for m in said if not m.replayed]
    kept = replays_kept([(m.id, m.order) for m in said if m.replayed],
                        live[0].order if live else None)
    return [m for m in said if m.replayed and m.id in kept] + live


def turn_numbers(messages: Iterable[MessageRecord], liminals: Collection[str]) -> dict[str, int]:
    """The conversation's turns numbered from 1 in the order they began, as ``Store.threads``
    counts them: recorded live (a load's replay has none), and not ``liminals``, the turns whose
    prompt liminal answered itself (its commands: ``Store.liminal_turns``), which never reached
    the model. ``liminal history``, the three searches and the dashboard number them so; a
    command stays in the transcript, between the turns, with no number."""
    numbers: dict[str, int] = {}
    for m in messages:
        turn = m.turn_id
        if turn is not None and not m.replayed and turn not in numbers and turn not in liminals:
            numbers[turn] = len(numbers) + 1
    return numbers


def _connection(message_id: str) -> str:
    """A message's id is the id of the frame that started it: ``<connection>:<seq>``."""
    return message_id.rpartition(":")[0]


@dataclass(frozen=True, slots=True)
class ThreadUpdate:
    """What one observation says about a thread; the store merges updates.

    A thread keeps its title (docs/formats.md, "threads"): the opening words of its first prompt
    stand in (``fallback_title``) until the agent titles the thread's own session (``title``),
    and from then on only a name the user gives (``title`` with ``named``) replaces it. The
    titles the agent gives the sessions liminal moves the thread onto (a swap's rewrite, the
    session ``/clear`` or ``/undo`` opened) come as ``fallback_title``: the CLI titles each new
    session after its own first prompt, which is not what the thread is about.

    Merge rules (every backend): ``fallback_title`` fills an empty title; ``title`` replaces a
    title that is still a stand-in (``Thread.titled`` false), a ``named`` one replaces any;
    non-empty ``cwd``, ``harness``, ``state`` replace the stored ones (but ``archived``, which
    only a ``by_user`` state replaces); ``backing_ids`` are
    appended in order when new; ``created`` keeps the earliest and ``updated`` the latest.
    Merging the same update twice changes nothing.
    """

    id: str
    time: float
    title: str = ""
    # Used only while the thread has no title yet (the first prompt's opening words, the title
    # of a session the thread moved to).
    fallback_title: str = ""
    cwd: str = ""
    harness: str = ""
    state: str = ""
    backing_ids: tuple[str, ...] = ()
    # ``title`` is the user's (``liminal threads rename``, ``/rename``): it replaces any title,
    # and no title that is not the user's replaces it afterwards.
    named: bool = False
    # ``state`` is the user's (``/archive``, ``liminal threads archive`` and ``unarchive``): it
    # replaces any state. Another (an open's ``active``, a client's ``closed``) does not
    # replace ``archived``: only the user brings an archived thread back.
    by_user: bool = False


@dataclass(frozen=True, slots=True)
class Thread:
    id: str
    title: str
    cwd: str
    harness: str
    state: str
    backing_ids: tuple[str, ...]
    created: float
    updated: float
    named: bool = False  # its title was given by the user: the agent's titles do not replace it
    # Its title is the agent's or the user's, not the first prompt's words standing in:
    # the agent's later titles do not replace it (only the user's name does).
    titled: bool = False


ARCHIVED = "archived"
# A thread the client deleted (``session/delete``, ``liminal.kernel.delete``): its record stays
# as a tombstone so that nothing recorded of it afterwards (its last frames still on their way
# to the store) brings it back. No update replaces the state; the store takes no more records
# of the thread and lists it nowhere.
DELETED = "deleted"


def merge_thread(old: Thread | None, update: ThreadUpdate) -> Thread:
    """The merge rules of ``ThreadUpdate``, shared by backends that merge in Python."""
    named = update.named and bool(update.title)
    if old is None:
        return Thread(update.id, update.title or update.fallback_title, update.cwd, update.harness,
                      update.state or "active", tuple(dict.fromkeys(update.backing_ids)),
                      update.time, update.time, named, bool(update.title))
    lineage = old.backing_ids + tuple(b for b in update.backing_ids if b not in old.backing_ids)
    # An agent's title replaces only a stand-in; the user's name replaces anything.
    title = update.title if (named or not (old.titled or old.named)) else ""
    # The same for the state: an archived thread stays archived when the client opens or closes it.
    state = update.state if (update.by_user or old.state != ARCHIVED) else ""
    if old.state == DELETED and update.state != DELETED:
        return old  # a tombstone takes nothing more of the thread
    if state == DELETED:  # a tombstone keeps no words of the thread: its lineage, where and whose
        return Thread(old.id, "", update.cwd or old.cwd, update.harness or old.harness, DELETED,
                      tuple(dict.fromkeys(lineage)), min(old.created, update.time),
                      max(old.updated, update.time), False, False)
    return Thread(
        old.id, title or old.title or update.fallback_title, update.cwd or old.cwd,
        update.harness or old.harness, state or old.state,
        tuple(dict.fromkeys(lineage)),
        min(old.created, update.time), max(old.updated, update.time), old.named or named,
        old.titled or old.named or bool(title))


@dataclass(frozen=True, slots=True)
class ThreadSummary:
    """A thread with what ``liminal threads`` shows, computed from its messages."""

    thread: Thread
    # The conversation's turns, recorded live (a load's replay is none): liminal's own commands
    # (``/context``, ``/mark``..., a turn whose prompt frame went client to liminal) are none.
    turns: int
    # The context now: the last usage point's ``used`` tokens, or what a move that committed
    # since left (``context_now``).
    context_used: int | None
    context_size: int | None
    last_activity: float
    # Nothing to show of it: no title, and nothing said in it, live or replayed (a session a
    # client opened and never prompted: a row of dashes). Left out of the lists unless asked
    # for (``Store.threads``). A fork liminal wrote has a title and a context: it is listed.
    empty: bool = False

    @property
    def swaps(self) -> int:
        """Every move the thread made (liminal's swaps, ``/clear``, ``/undo``): the sessions it
        went through, less the first (``liminal threads`` MOVES; the dashboard's swaps are only
        liminal's rewrites, ``moves.is_rewrite``)."""
        return max(0, len(self.thread.backing_ids) - 1)


def context_now(usage: tuple[str, Mapping[str, Any]] | None,
                move: tuple[str, Mapping[str, Any]] | None) -> tuple[int | None, int | None]:
    """The context a thread has now, and the window it has it in, from the latest ``usage``
    message and the latest committed ``swap`` message (each as its order and data). A move
    that committed after the last usage point set the context to its ``tokens_after`` (None
    when it does not know it: ``/clear``'s new, empty session): the usage points after a swap
    come only with the next model call. The window is the last usage point's."""
    def number(value: Any) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    size = number(usage[1].get("size")) if usage is not None else None
    if move is not None and (usage is None or move[0] > usage[0]):
        return number(move[1].get("tokens_after")), size
    return (number(usage[1].get("used")) if usage is not None else None), size


def one_row_per_thread(summaries: Iterable[ThreadSummary], *, empty: bool) -> list[ThreadSummary]:
    """What ``Store.threads`` answers, most recently active first: without the records kept
    under a backing session's id (every session a thread moved onto is in its lineage; a row
    of its own under that id is the same conversation seen through a frame that named the
    session, not a thread: older liminals wrote one for each session a swap, ``/clear MARK`` or
    ``/undo`` closed), and without empty threads (``ThreadSummary.empty``) unless ``empty``."""
    rows = list(summaries)
    backing = {b for s in rows for b in s.thread.backing_ids if b != s.thread.id}
    kept = [s for s in rows if s.thread.id not in backing and (empty or not s.empty)
            and s.thread.state != DELETED]
    kept.sort(key=lambda s: s.last_activity, reverse=True)
    return kept


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """One line of a CLI's session file (a Claude Code session, a Codex rollout), kept whole:
    for recall, and so that the file can be written again from the store."""

    id: str  # f"{backing_id}@{offset:012d}": re-indexing the same line is a no-op
    backing_id: str
    thread_id: str | None
    offset: int  # byte offset of the line in the file
    uuid: str | None
    type: str | None
    time: str | None  # the record's own timestamp, as written
    usage: dict[str, Any] | None
    tool_ids: tuple[str, ...]
    text: str  # the searchable text: message text, tool inputs and full tool outputs
    raw: bytes  # the line without its newline
    # liminal wrote the line, not the CLI: the head of a session liminal made (a swap's rewrite,
    # the cut of /undo or /clear MARK), copies of what the thread said in its older sessions.
    # Kept for the recall keys that name that session; never a search hit (the older session's
    # line is the one found), and it carries no text.
    own: bool = False

    @staticmethod
    def make_id(backing_id: str, offset: int) -> str:
        return f"{backing_id}@{offset:012d}"


@dataclass(frozen=True, slots=True)
class SearchHit:
    source: str  # "message" or "session"
    id: str
    thread_id: str | None
    kind: str  # a message's kind, or a session record's type
    time: float | None
    snippet: str
    score: float  # higher is better
    # Where the hit is in the conversation (``liminal.lookup.search`` places and sifts by these):
    # the message it is (its own id; for a session record of a tool call, the tool call's
    # message when the store has it), that message's turn, its first line (a tool call's
    # title), and the direction of the frame that started it (``c2l``, ``l2c``, ``note``:
    # liminal's own, a command it answered or a note it wrote).
    message_id: str | None = None
    turn_id: str | None = None
    head: str = ""
    direction: str | None = None
    tool_ids: tuple[str, ...] = ()
    # The whole text, its whitespace and case folded, hashed: the same words kept in two
    # places (a prompt as the client saw it and as the CLI recorded it) are one find.
    digest: str = ""


@dataclass(frozen=True, slots=True)
class Batch:
    """One write: everything in it is committed together (one transaction on SQLite)."""

    frames: Sequence[FrameRecord] = ()
    messages: Sequence[MessageRecord] = ()
    threads: Sequence[ThreadUpdate] = ()
    session_records: Sequence[SessionRecord] = ()

    def __bool__(self) -> bool:
        return bool(self.frames or self.messages or self.threads or self.session_records)

    def thread_ids(self) -> set[str]:
        """Every thread a record of the batch is of."""
        return ({f.thread_id for f in self.frames if f.thread_id} | {of_thread(m) for m in self.messages}
                | {r.thread_id for r in self.session_records if r.thread_id})

    def unowned_sessions(self) -> set[str]:
        """The sessions of the batch's records that name no thread (a line of a file the CLI
        wrote again once its thread was gone)."""
        return ({f.backing_id for f in self.frames if f.backing_id and not f.thread_id}
                | {r.backing_id for r in self.session_records if not r.thread_id})

    def without(self, deleted: AbstractSet[str], sessions: AbstractSet[str] = frozenset()) -> Batch:
        """The batch less every record of a deleted thread (``DELETED``: its tombstone takes no
        more): its last frames and lines, still on their way when the client deleted it, and the
        records of no thread of the ``sessions`` its tombstones name."""
        if not deleted and not sessions:
            return self

        def gone(thread_id: str | None, backing_id: str | None) -> bool:
            return thread_id in deleted if thread_id else backing_id in sessions

        return Batch(frames=[f for f in self.frames if not gone(f.thread_id, f.backing_id)],
                     messages=[m for m in self.messages if of_thread(m) not in deleted],
                     threads=self.threads,
                     session_records=[r for r in self.session_records
                                      if not gone(r.thread_id, r.backing_id)])
