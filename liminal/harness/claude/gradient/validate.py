"""The invariants every rewritten session must hold, checked on the bytes about to be written.

Nothing is written unless all hold. Each one is a way a real resume breaks:
- every line is one JSON object ending in a newline, and none is huge (multi-MB lines hang the
  resume);
- every ``sessionId`` is the new id (without it the older adapter replays nothing);
- uuids are unique; the records with a uuid form one pure parent chain, first to last, so the
  walk from the leaf sees every one (2.1.44 follows nothing else); no sidechain lines;
- a ``compact_boundary`` is the first record of the chain and is followed by its summary;
- every ``tool_use`` is answered by exactly one ``tool_result`` before the next prompt or the
  next assistant message, and no result answers a call that is not there (the API answers 400);
- an assistant message does not continue after its own tool results, and two assistant
  messages never follow one another (the API wants user and assistant to alternate);
- no thinking block comes before the first record of the recent band (signatures).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from liminal.harness.claude.records import Record, index_record, loads

MAX_LINE_BYTES = 16 << 20


class ValidationError(ValueError):
    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        shown = "; ".join(self.problems[:5])
        more = f" (+{len(self.problems) - 5} more)" if len(self.problems) > 5 else ""
        super().__init__(f"rewrite refused: {shown}{more}")


@dataclass(frozen=True, slots=True)
class Checked:
    records: tuple[Record, ...]  # the output, indexed


def validate(
    lines: Sequence[bytes],
    new_id: str,
    *,
    old_ids: Sequence[str] = (),
    thinking_from: str | None = None,
) -> Checked:
    problems: list[str] = []
    records: list[Record] = []
    offset = 0
    stale = [f'"sessionId":"{old}"'.encode() for old in old_ids if old != new_id]
    for n, line in enumerate(lines):
        if not line.endswith(b"\n") or b"\n" in line[:-1]:
            problems.append(f"line {n}: not exactly one line")
        if len(line) > MAX_LINE_BYTES:
            problems.append(f"line {n}: {len(line)} bytes")
        try:
            value = loads(line)
        except ValueError:
            problems.append(f"line {n}: not a JSON object")
            continue
        if "sessionId" in value and value["sessionId"] != new_id:
            problems.append(f"line {n}: sessionId {value['sessionId']}")
        if any(s in line for s in stale):
            problems.append(f"line {n}: nested sessionId still names the old session")
        records.append(index_record(value, n, offset, len(line)))
        offset += len(line)

    chain = [r for r in records if r.uuid]
    seen: set[str] = set()
    previous: str | None = None
    for pos, rec in enumerate(chain):
        if rec.uuid in seen:
            problems.append(f"line {rec.line}: duplicate uuid {rec.uuid}")
        seen.add(rec.uuid or "")
        if rec.parent != previous:
            problems.append(f"line {rec.line}: parentUuid {rec.parent} breaks the chain")
        previous = rec.uuid
        if rec.sidechain:
            problems.append(f"line {rec.line}: sidechain record")
        if rec.type == "system" and rec.subtype == "compact_boundary":
            if pos != 0:
                problems.append(f"line {rec.line}: compact boundary inside the chain")
            nxt = chain[pos + 1] if pos + 1 < len(chain) else None
            if nxt is None or not nxt.compact_summary:
                problems.append(f"line {rec.line}: compact boundary without its summary")

    problems.extend(_tool_pairs(chain))
    problems.extend(_alternation(chain, thinking_from))
    if thinking_from is not None or chain:
        for rec in chain:
            if rec.uuid == thinking_from:
                break
            if any(b.kind in ("thinking", "redacted_thinking") for b in rec.blocks):
                problems.append(f"line {rec.line}: thinking block before the recent band")
    if not any(r.type in ("user", "assistant") for r in chain):
        problems.append("no conversation left")
    if problems:
        raise ValidationError(problems)
    return Checked(tuple(records))


def _tool_pairs(chain: Sequence[Record]) -> list[str]:
    problems: list[str] = []
    open_calls: dict[str, str] = {}  # tool_use id -> message id
    used: set[str] = set()
    answered_messages: set[str] = set()
    for rec in chain:
        if rec.type == "assistant":
            mid = rec.message_id or rec.uuid or ""
            if mid in answered_messages:
                problems.append(f"line {rec.line}: assistant message continues after its results")
            stale = [t for t, m in open_calls.items() if m != mid]
            for tool_id in stale:
                problems.append(f"tool_use {tool_id} unanswered before the next message")
                del open_calls[tool_id]
            for block in rec.tool_uses:
                if block.tool_id in used:
                    problems.append(f"line {rec.line}: tool_use id {block.tool_id} repeated")
                used.add(block.tool_id)
                open_calls[block.tool_id] = mid
        elif rec.type == "user":
            if rec.is_prompt and open_calls:
                problems.extend(f"tool_use {t} unanswered before a prompt" for t in open_calls)
                open_calls.clear()
            for block in rec.tool_results:
                caller = open_calls.pop(block.tool_id, "")
                if not caller:
                    problems.append(f"line {rec.line}: tool_result {block.tool_id} answers nothing")
                else:
                    answered_messages.add(caller)
    problems.extend(f"tool_use {t} never answered" for t in open_calls)
    return problems


def validate_note(line: bytes, new_id: str) -> None:
    """A bookkeeping line added after the full check: one object, new id, outside the chain."""
    value = loads(line)
    if not line.endswith(b"\n") or value.get("sessionId") != new_id or "uuid" in value:
        raise ValidationError([f"bookkeeping line is malformed: {line[:80]!r}"])


def _alternation(chain: Sequence[Record], recent_from: str | None) -> list[str]:
    """Assistant lines of different messages with no user line between them.

    Checked up to the recent band only: that band is what Claude Code wrote, untouched, and it
    loads it as it always did (it may hold such a pair, after an API error and a retry).
    """
    problems: list[str] = []
    last_mid: str | None = None
    for rec in chain:
        if rec.uuid == recent_from:
            break
        if rec.type == "assistant":
            mid = rec.message_id or rec.uuid
            if last_mid is not None and mid != last_mid:
                problems.append(f"line {rec.line}: assistant message follows another")
            last_mid = mid
        elif rec.type in ("user", "attachment"):
            last_mid = None
    return problems
