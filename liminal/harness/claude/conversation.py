"""The conversation as Claude Code builds it from a session file.

Rules (from FACTS.md and real files):
- A uuid names one record. Claude Code sometimes writes a record again further down the file,
  same uuid, same content (an editor reopened replays its entries, a hook re-emits its
  attachment); it keeps one record per uuid, and so does this model: the first line of each
  uuid, where the record came in the conversation. Later copies are not the conversation.
- The leaf is where the conversation ends, as Claude Code finds it: from each line no other line
  names as its parent, up to the first user or assistant line, not a sidechain; of those, the
  last in the file. (A copy of an early line written at the end is not the end.)
- Claude Code walks ``parentUuid`` back from the leaf. The walk stops at a ``compact_boundary``
  (its ``parentUuid`` is null): the model sees nothing before the last boundary. A parent that
  points at a missing uuid cuts everything before it off; we report it.
- Parallel tool calls branch the graph: each assistant line holds one content block, and each
  ``tool_result`` hangs off its own ``tool_use`` line, so all but one result (and sometimes a
  ``tool_use`` line) are off the walk. The conversation is the walk, plus assistant lines sharing
  a ``message.id`` with a line in the set, plus ``tool_result`` lines whose parent is in the set,
  repeated until nothing is added. Newer builds load it that way; 2.1.44 follows the pure chain.
- The order is file order, except that a tool result never comes before the last line of the
  assistant message that called it: the linear order the rewrite writes, where every record is
  on the pure parent chain and every CLI version sees all of it.
- A turn is a typed user prompt and everything until the next one. Records before the first
  prompt (a boundary and its summary) are the head.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass

from liminal.harness.claude.records import Record, SessionFile


@dataclass(frozen=True, slots=True)
class Turn:
    number: int  # from 0, oldest first
    records: tuple[Record, ...]

    @property
    def prompt(self) -> Record:
        return self.records[0]


@dataclass(frozen=True, slots=True)
class Conversation:
    session: SessionFile
    leaf: Record
    records: tuple[Record, ...]  # linear order
    head: tuple[Record, ...]
    turns: tuple[Turn, ...]
    boundary: Record | None
    tool_uses: dict[str, Record]  # tool_use id -> the line holding it
    tool_results: dict[str, Record]  # tool_use id -> the line answering it
    gathered: int  # lines added by the side-branch rule (off the pure walk)
    broken_parent: str | None  # a parentUuid pointing at no line: the walk stopped there

    @property
    def unpaired_uses(self) -> set[str]:
        return set(self.tool_uses) - set(self.tool_results)

    @property
    def orphan_results(self) -> set[str]:
        return set(self.tool_results) - set(self.tool_uses)


class ConversationError(ValueError):
    """No conversation can be built from the file."""


def _leaf(records: Sequence[Record], by_uuid: dict[str, Record], parents: set[str]) -> Record:
    """The last user or assistant line (file order) reached from a line without children."""
    best: Record | None = None
    for rec in records:
        if not rec.uuid or rec.uuid in parents:
            continue
        cursor: Record | None = rec
        seen: set[str] = set()
        while cursor is not None and cursor.type not in ("user", "assistant"):
            if cursor.uuid in seen or cursor.parent is None:
                cursor = None
                break
            seen.add(cursor.uuid or "")
            cursor = by_uuid.get(cursor.parent)
        if cursor is not None and not cursor.sidechain and (best is None or cursor.line > best.line):
            best = cursor
    if best is not None:
        return best
    for rec in reversed(records):  # every line has a child: a parentUuid cycle
        if rec.type in ("user", "assistant") and rec.uuid and not rec.sidechain:
            return rec
    raise ConversationError("no main-chain user or assistant line")


def build(session: SessionFile) -> Conversation:
    by_uuid: dict[str, Record] = {}
    parents: set[str] = set()
    for rec in session.records:
        if rec.uuid:
            by_uuid.setdefault(rec.uuid, rec)
            if rec.parent:
                parents.add(rec.parent)
    # One record per uuid: a later line with a uuid already seen is the CLI writing it again.
    records = [r for r in session.records if r.uuid is None or by_uuid[r.uuid] is r]
    answers: dict[str, list[Record]] = defaultdict(list)  # parent uuid -> tool result lines
    by_message: dict[str, list[Record]] = defaultdict(list)
    for rec in records:
        kind = rec.type
        if kind == "assistant":
            if rec.message_id and not rec.sidechain:
                by_message[rec.message_id].append(rec)
        elif kind == "user" and rec.parent and any(b.kind == "tool_result" for b in rec.blocks):
            answers[rec.parent].append(rec)

    leaf = _leaf(records, by_uuid, parents)
    chosen: dict[int, Record] = {}
    boundary: Record | None = None
    broken: str | None = None
    cursor: Record | None = leaf
    while cursor is not None and cursor.line not in chosen:
        chosen[cursor.line] = cursor
        if cursor.type == "system" and cursor.subtype == "compact_boundary":
            boundary = cursor
            break
        parent = cursor.parent
        if parent is None:
            break
        cursor = by_uuid.get(parent)
        if cursor is None:
            broken = parent
    walked = len(chosen)
    floor = boundary.line if boundary is not None else -1

    queue = deque(chosen.values())
    while queue:
        rec = queue.popleft()
        related: list[Record] = []
        if rec.type == "assistant" and rec.message_id:
            related.extend(by_message.get(rec.message_id, ()))
        if rec.uuid:
            related.extend(answers.get(rec.uuid, ()))
        for other in related:
            if other.line not in chosen and other.line > floor and not other.sidechain:
                chosen[other.line] = other
                queue.append(other)

    in_file_order = sorted(chosen.values(), key=lambda r: r.line)
    tool_uses: dict[str, Record] = {}
    tool_results: dict[str, Record] = {}
    for rec in in_file_order:
        for block in rec.blocks:
            if block.kind == "tool_use":
                tool_uses.setdefault(block.tool_id, rec)
            elif block.kind == "tool_result":
                tool_results.setdefault(block.tool_id, rec)
    linear = _linearise(in_file_order, tool_uses)

    head: list[Record] = []
    turns: list[list[Record]] = []
    for rec in linear:
        if rec.is_prompt:
            turns.append([rec])
        elif turns:
            turns[-1].append(rec)
        else:
            head.append(rec)
    return Conversation(
        session=session,
        leaf=leaf,
        records=tuple(linear),
        head=tuple(head),
        turns=tuple(Turn(n, tuple(t)) for n, t in enumerate(turns)),
        boundary=boundary,
        tool_uses=tool_uses,
        tool_results=tool_results,
        gathered=len(chosen) - walked,
        broken_parent=broken,
    )


def _linearise(records: list[Record], tool_uses: dict[str, Record]) -> list[Record]:
    """File order, with each tool result moved after the last line of its calling message."""
    position = {rec.line: n for n, rec in enumerate(records)}
    group_last: dict[str, int] = {}
    for n, rec in enumerate(records):
        if rec.type == "assistant" and rec.message_id:
            group_last[rec.message_id] = n
    keys: list[tuple[int, int, int]] = []
    moved = False
    for pos, rec in enumerate(records):
        latest = pos
        if rec.type == "user":
            for block in rec.blocks:
                if block.kind != "tool_result":
                    continue
                caller = tool_uses.get(block.tool_id)
                if caller is not None:
                    anchor = group_last.get(caller.message_id or "", position[caller.line])
                    latest = max(latest, anchor)
        # A moved result sorts just after the line it waits for, before anything else there.
        keys.append((latest, 0 if latest == pos else 1, pos))
        moved = moved or latest != pos
    if not moved:
        return records
    return [records[k[2]] for k in sorted(keys)]
