"""Sessions cut from Claude Code session files by byte position: what ``/clear MARK``, ``/undo``
and ``/fork`` write (``liminal.kernel.commands``).

A position is a byte offset at a line boundary between turns (a mark is the file's size once a
turn is on disk; the CLI only ever appends, so a position stays valid). A cut takes byte ranges
of one or more files of a thread's lineage, in order, links their records into one parent chain
and writes them as a new session through the gradient with no target to meet: every turn is
kept as it was, ids and chain made consistent, validated before anything is written.

A cut that does not start at the beginning of its first file (``/fork MARK``) leaves out the
first turn, after whose prompt Claude Code writes its context attachments (environment, model,
tool and skill listings, the date). Without them 2.1.316 sends an empty ``system`` message after
the first user message, which the API refuses (docs/facts.md). The latest of each kind found in
what the parts leave out is carried to just after the cut's first user message, as the gradient
carries them from the turns it drops (``liminal.harness.claude.gradient.plan.context_attachments``).

Claude Code appends what names a session and its modes (``custom-title``, ``ai-title``, ...: the
last of each kind wins) wherever the file stands when they change, so a cut by position misses
those written after its end and keeps stale ones from before. A cut the thread moves to (/undo,
/clear MARK) takes the latest of each kind from the whole of its files and the thread's current
file, at its end; a /fork, a thread of its own, takes none of the names.
"""

from __future__ import annotations

import re
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson

from liminal.config import GradientSettings
from liminal.harness.base import Turns
from liminal.harness.claude.conversation import ConversationError, build
from liminal.harness.claude.gradient.plan import context_attachments
from liminal.harness.claude.gradient.render import Preamble
from liminal.harness.claude.gradient.rewrite import prepare
from liminal.harness.claude.gradient.validate import validate
from liminal.harness.claude.paths import locate
from liminal.harness.claude.records import Record, SessionFormatError, dumps, loads, read_session
from liminal.harness.claude.tokens import total_chars
from liminal.sessionfiles import write_atomically

UNLIMITED = 10**9  # a target no session reaches: the gradient keeps every turn whole
# What Claude Code reads as the state of a session, the last line of each kind winning: what the
# picker shows (titles, name, colour, tag, PR link) and the session's settings.
THREAD_STATE = frozenset({
    "custom-title", "ai-title", "tag", "agent-name", "agent-color", "agent-setting", "pr-link",
    "mode", "permission-mode", "worktree-state",
})
# What names a thread: a fork, a thread of its own, does not take them.
NAMES = frozenset({"custom-title", "ai-title", "agent-name", "agent-color"})
_STATE_TYPE = re.compile(b'"(?:' + b"|".join(re.escape(k.encode()) for k in sorted(THREAD_STATE)) + b')"')


def turn_starts(path: Path) -> list[int]:
    """Where each turn of the session begins (the offset of its prompt's line), oldest first."""
    return list(turns(path).starts)


def turns(path: Path) -> Turns:
    """Each typed prompt's offset, and whether the conversation holds a message before the
    first: the summary of a compaction (liminal's preamble, the CLI's own ``/compact``), which
    the model reads and no prompt starts. (Claude Code's ``isMeta`` notes are not history.)"""
    conversation = build(read_session(locate(path)))
    return Turns(tuple(turn.records[0].offset for turn in conversation.turns),
                 any(r.type == "assistant" or (r.type == "user" and not r.meta) for r in conversation.head))


def _linked(chunks: Sequence[bytes], drop: frozenset[str] = frozenset()) -> bytes:
    """The chunks' lines as one file: the first record of each chunk after the first is made the
    child of the last record of the chunk before (its own parent is in a part left out). Records
    without a uuid whose type is in ``drop`` are left out."""
    out: list[bytes] = []
    last_uuid: str | None = None
    for chunk in chunks:
        first = True
        for line in chunk.splitlines(keepends=True):
            if not line.strip():
                continue
            try:  # the stdlib's reading too: orjson refuses a lone surrogate, which the CLI writes
                record = loads(line)
            except (ValueError, UnicodeDecodeError):
                # A torn last line of a part stays a line of its own (skipped on reading): the
                # next part's first line must not join it.
                out.append(line if line.endswith(b"\n") else line + b"\n")
                continue
            if record.get("type") in drop and not record.get("uuid"):
                continue
            if isinstance(record.get("uuid"), str):
                if first:
                    record["parentUuid"] = last_uuid
                    line = dumps(record)
                    first = False
                last_uuid = record["uuid"]
            out.append(line if line.endswith(b"\n") else line + b"\n")
    return b"".join(out)


def _thread_state(files: Sequence[Path]) -> list[bytes]:
    """The last line of each kind of ``THREAD_STATE`` in the whole of ``files``, later files
    winning, in the order those lines came."""
    latest: dict[str, tuple[int, bytes]] = {}
    n = 0
    for path in files:
        with path.open("rb") as f:
            for line in f:
                n += 1
                if not _STATE_TYPE.search(line):
                    continue  # most lines: no need to parse them
                try:
                    record = loads(line)
                except (ValueError, UnicodeDecodeError):
                    continue
                if (record.get("type") in THREAD_STATE
                        and not record.get("uuid")):
                    latest[record["type"]] = (n, line if line.endswith(b"\n") else line + b"\n")
    return [line for _, line in sorted(latest.values())]


def _scratch(folder: Path, data: bytes) -> Path:
    path = folder / f"{uuid.uuid4()}.jsonl"
    path.write_bytes(data)
    return path


def _left_out(parts: Sequence[tuple[Path, int, int | None]],
              folder: Path) -> tuple[list[Record], dict[str, bytes]]:
    """The records on the conversation of what each part leaves out, before its start and after
    its end, parts in order, and the lines of those with a uuid. Left-out bytes that hold no
    conversation give nothing."""
    records: list[Record] = []
    lines: dict[str, bytes] = {}
    for path, start, end in parts:
        with path.open("rb") as f:
            left = [f.read(start) if start > 0 else b""]
            if end is not None:
                f.seek(end)
                left.append(f.read())
        for data in left:
            if not data.strip():
                continue
            try:
                session = read_session(locate(_scratch(folder, data)))
                conversation = build(session)
            except (SessionFormatError, ConversationError):
                continue
            found = [*conversation.head, *conversation.records]
            records += found
            raw = session.raw(found)
            lines.update((r.uuid, raw[r.line]) for r in found if r.uuid)
    return records, lines


def _with_context(data: bytes, parts: Sequence[tuple[Path, int, int | None]],
                  folder: Path, *, session_id: str | None = None, within: bytes = b"") -> bytes:
    """``data`` with the context attachments of what the parts leave out carried to just after
    its first user message (the prompt and the user lines that follow it; with no turn, the
    summary that is all the cut holds), chained between that message and what hung off it.
    Kinds the cut's first turn (or its summary) announces itself are not carried. With
    ``session_id``, the carried records are that session's. ``within``: what the parts hold,
    whose attachments after its last message (an earlier such cut's) count too."""
    try:
        conversation = build(read_session(locate(_scratch(folder, data))))
    except (SessionFormatError, ConversationError):
        return data  # the validation of the cut itself says what is wrong
    order = conversation.records
    if conversation.turns:
        at = order.index(conversation.turns[0].prompt)
        announced = conversation.turns[0].records
    else:
        users = [n for n, r in enumerate(order) if r.type == "user" and not r.meta]
        if not users:
            return data
        at, announced = users[0], order
    while at + 1 < len(order) and order[at + 1].type == "user":
        at += 1
    anchor = order[at]
    if anchor.uuid is None:
        return data
    own = {r.subtype or "" for r in announced if r.type == "attachment"}
    present = {r.uuid for r in conversation.session.records if r.uuid}
    records, lines = _left_out(parts, folder)
    if within:
        session = read_session(locate(_scratch(folder, within)))
        own_lines = [r for r in session.records if r.type == "attachment" and r.uuid and not r.sidechain]
        raw = session.raw(own_lines)
        records = own_lines + records
        lines.update((r.uuid, raw[r.line]) for r in own_lines if r.uuid)
    carried = [r.uuid for r in context_attachments(records, own)
               if r.uuid and r.uuid not in present]
    if not carried:
        return data
    block: list[bytes] = []
    parent = anchor.uuid
    for carried_uuid in carried:
        value = loads(lines[carried_uuid])
        value["parentUuid"] = parent
        value["isSidechain"] = False
        if session_id is not None:
            value["sessionId"] = session_id
        block.append(dumps(value))
        parent = carried_uuid
    children = {r.offset for r in conversation.session.records
                if r.uuid and r.parent == anchor.uuid}
    end = anchor.offset + anchor.length
    out: list[bytes] = []
    offset = 0
    for line in data.splitlines(keepends=True):
        if offset in children:
            value = loads(line)
            value["parentUuid"] = parent
            out.append(dumps(value))
        else:
            out.append(line)
        offset += len(line)
        if offset == end:
            out += block
    return b"".join(out)


def _when(record: dict[str, object]) -> datetime | None:
    value = record.get("timestamp")
    try:
        return datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _last_is_newest(data: bytes) -> bytes:
    """``data`` with the last record of its chain strictly the newest by ``timestamp``. Claude
    Code 2.1.44 resumes a session from its newest message, not its last: the rewrite gives its
    boundary and summary the time of the first turn it keeps, and with that turn cut out the
    boundary (first of equals) would win: the summary would never be sent and the next prompt
    would hang off the boundary."""
    lines = data.splitlines(keepends=True)
    records = {n: loads(line) for n, line in enumerate(lines) if b'"uuid"' in line}
    chained = [n for n, record in records.items() if record.get("uuid")]
    stamps = [when for n in chained if (when := _when(records[n])) is not None]
    if not chained or not stamps:
        return data
    last, newest = records[chained[-1]], max(stamps)
    if _when(last) == newest and stamps.count(newest) == 1:
        return data
    later = (newest + timedelta(milliseconds=1)).astimezone(UTC)
    last["timestamp"] = later.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    lines[chained[-1]] = dumps(last)
    return b"".join(lines)


def write_cut(parts: Sequence[tuple[Path, int, int | None]], target: Path, new_id: str,
              settings: GradientSettings, env: Mapping[str, str] | None = None, *,
              thread: Path | None = None, scratchpad: str | None = None) -> tuple[int, int]:
    """Write ``[(file, start, end)]`` (end None: to the end) as session ``new_id`` at ``target``.
    ``thread``: the thread moves to the cut and this is its current file; the cut takes the
    thread's latest names and modes (``THREAD_STATE``) from the whole of the parts' files and
    this one. Without it (a fork) the cut takes no names. ``scratchpad``: the thread's, in place
    of the one a preamble the cut keeps holds (a cut adds no preamble). Returns (tokens, bytes)
    of what was written. Raises (nothing written) if the result would not be a valid session."""
    chunks = []
    for path, start, end in parts:
        with path.open("rb") as f:
            f.seek(start)
            chunks.append(f.read() if end is None else f.read(max(0, end - start)))
    data = _linked(chunks, THREAD_STATE if thread is not None else NAMES)
    if not data:
        raise ValueError("nothing to keep: the cut is empty")
    if thread is not None:
        files = list(dict.fromkeys([*(p for p, _, _ in parts), thread]))
        state = b"".join(_thread_state(files))
        if state and not data.endswith(b"\n"):
            data += b"\n"  # a torn last line stays a line of its own, left out on reading
        data += state
    with tempfile.TemporaryDirectory(prefix="liminal-cut-") as folder:
        if parts[0][1] > 0:  # the first file's first turn, and its context, are left out
            data = _with_context(data, parts, Path(folder))
        source = _scratch(Path(folder), data)
        prepared = prepare(source, UNLIMITED, new_id=new_id, settings=settings, env=env,
                           preamble=Preamble(scratchpad=scratchpad))
        # The header names where the records came from, not the scratch file they were read from:
        # other tools (and a later rewrite) read it.
        note = orjson.loads(prepared.rendered.lines[0])
        first = parts[0][0]
        note.update(sourceSessionId=first.stem, sourcePath=str(first),
                    cut=[{"path": str(p), "start": start, "end": end} for p, start, end in parts])
        body = b"".join(prepared.rendered.lines[1:])
        tokens = prepared.result.tokens_after
        if not prepared.conversation.turns:
            # No turn left, only a swap's summary (``/undo`` of the one turn a rewrite kept after
            # it): the context went with the turns after the cut's end. After the summary, where
            # Claude Code's own compaction puts it and chains the next prompt to it; the
            # gradient would leave it out, being after the last message.
            body = _last_is_newest(_with_context(body, parts, Path(folder), session_id=new_id, within=data))
            checked = validate(body.splitlines(keepends=True), new_id)
            calibration = prepared.plan.calibration
            tokens = calibration.overhead_tokens + calibration.tokens(
                sum(total_chars(r) for r in checked.records if r.uuid))
            # The header's word on what the file holds, as a rewrite's (``tail.context_tokens``).
            note.update(tokensAfter=tokens,
                        lastRecordUuid=next((r.uuid for r in reversed(checked.records) if r.uuid), None))
        lines = (orjson.dumps(note) + b"\n", *body.splitlines(keepends=True))
        write_atomically(target, lines)
    return tokens, sum(len(line) for line in lines)
