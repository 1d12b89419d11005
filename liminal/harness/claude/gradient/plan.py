"""Planning the gradient: which turns go in which band, and what happens to each record.

Pure: a Conversation (the index, no file access) and budgets in, a Plan out. Bands are by age,
youngest first, sized by token budgets rather than turn counts, so the result lands near the
target whatever the length of the session:

- recent: the youngest turns that fit ``recent_tokens`` (at least the last turn), untouched;
  under a target, no more than fits under it (``liminal.gradient.bands.recent_budget``);
- middle: the next turns that fit ``middle_tokens`` once their tool results and the string
  leaves of their tool inputs are cut to ``truncate_lines`` lines / ``truncate_chars``
  characters, each cut followed by a marker with its recall key;
- old: the next turns that fit what is left of the target once their tool calls and results
  are removed in pairs and only prose remains;
- ancient: everything older, consolidated into one preamble (``summary_tokens``) in Claude
  Code's native compact form.

Thinking blocks outside the recent band are dropped: their signatures cover the history before
them, which the rewrite changes. The API strips thinking from earlier turns anyway, so the recent
band keeps its own (the swap happens between turns). Unpaired tool calls and orphan results are
removed wherever they are, since either makes the API answer 400.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial

from liminal.config import GradientSettings
from liminal.gradient.bands import MARKER_CHARS, Band, TurnCost, assign_bands, preamble_budget
from liminal.gradient.summarize import TurnDigest
from liminal.harness.claude.conversation import Conversation, Turn
from liminal.harness.claude.records import Record
from liminal.harness.claude.tokens import Calibration, measure, total_chars

PREAMBLE_FRAME_CHARS = 700  # the native intro and our footer around the summary
# Request logs describe calls made with the old history; a previous rewrite's note is replaced.
ALWAYS_DROP = frozenset(
    {"api-request", "api-request-shape", "api-request-blob", "liminal-rewrite"}
)
RECENT_ONLY = frozenset({"queue-operation", "progress", "file-history-snapshot"})
LAST_ONLY = frozenset({"cost-state", "atis-latch", "last-prompt", "summary"})




@dataclass(frozen=True, slots=True)
class Edit:
    """What to do to one record's content; the writer applies it to the parsed record."""

    truncate: bool = False  # cut tool results and tool input leaves, with recall markers
    strip_tools: bool = False  # remove tool_use and tool_result blocks
    drop_thinking: bool = False
    drop_ids: frozenset[str] = frozenset()  # tool ids whose blocks go (unpaired)

    @property
    def changes(self) -> bool:
        return self.truncate or self.strip_tools or self.drop_thinking or bool(self.drop_ids)


KEEP = Edit()


@dataclass(frozen=True, slots=True)
class Item:
    record: Record | None  # None: the preamble (boundary and summary records)
    edit: Edit = KEEP
    band: Band | None = None  # None for records outside the conversation
    chain: bool = True  # takes part in the parentUuid chain


@dataclass(frozen=True, slots=True)
class Plan:
    items: tuple[Item, ...]
    bands: dict[Band, tuple[int, ...]]  # turn numbers in each band
    digests: tuple[TurnDigest, ...]  # the ancient band, for the summarizer
    calibration: Calibration
    tokens_before: int  # measured from usage when the file has it, else estimated
    tokens_planned: int  # the estimate of what the new file holds (preamble at its budget)
    summary_chars: int  # budget for the summarizer
    consolidate_head: bool  # the old head (a previous preamble) goes into the new one
    notes: tuple[str, ...] = field(default=())
    target_tokens: int = 0  # what it aimed for (a target of 0 resolved to the floor)


def _leaves_cost(lengths: Sequence[int], cut: int) -> int:
    return sum(min(n, cut + MARKER_CHARS) + 16 for n in lengths)


def _record_cost(rec: Record, mode: Band, cut: int) -> int:
    """Characters a record costs in a band."""
    if mode is Band.RECENT:
        return total_chars(rec)
    if rec.type == "attachment":
        return rec.extra_chars if mode is Band.MIDDLE else 0
    if rec.type not in ("user", "assistant"):
        return 0
    cost = 0
    for block in rec.blocks:
        if block.kind in ("thinking", "redacted_thinking"):
            continue
        if block.kind == "tool_result":
            cost += min(block.chars, cut + MARKER_CHARS) if mode is Band.MIDDLE else 0
        elif block.kind == "tool_use":
            cost += _leaves_cost(block.leaves, cut) if mode is Band.MIDDLE else 0
        else:
            cost += block.chars
    return cost


def turn_cost(turn: Turn, mode: Band, cut: int) -> int:
    return sum(_record_cost(r, mode, cut) for r in turn.records)


def turn_costs(turns: Sequence[Turn], cal: Calibration, cut: int) -> list[TurnCost]:
    """(full, truncated, prose) tokens of each turn, lazily (``TurnCost``): on a long session most
    turns are never costed at all."""
    return [TurnCost(partial(_tokens, t, cal, cut)) for t in turns]


def _tokens(turn: Turn, cal: Calibration, cut: int, band: Band) -> int:
    return cal.tokens(turn_cost(turn, band, cut))


def _fit(
    costs: Sequence[Sequence[int]], budget: int, reserve: int, settings: GradientSettings,
    *, floor: bool = False,
) -> list[Band]:
    """Bands at the configured budgets; when all of it fits without a preamble, widen them.

    The recent and middle budgets say how much fidelity to keep at least. If even then every
    older turn fits as prose, the remaining room under the target is better spent keeping more
    turns whole or merely cut, so both budgets grow together until one more step would push a
    turn into the ancient band. ``floor``: the rewrite was asked for the floor, which keeps the
    configured recent band whole.
    """
    def at(scale: float) -> list[Band]:
        return assign_bands(
            costs,
            budget=budget,
            recent=int(settings.recent_tokens * scale),
            middle=int(settings.middle_tokens * scale),
            reserve=reserve,
            keep=settings.recent_tokens if floor else 0,
        )

    bands = at(1.0)
    if Band.ANCIENT in bands:
        return bands
    for scale in (1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64):
        trial = at(scale)
        if Band.ANCIENT in trial:
            break
        bands = trial
    return bands


def digest(turn: Turn) -> TurnDigest:
    """A turn as the summarizer is given it: its prompt, the heads of the replies, its tools."""
    prompt = " ".join(b.head for b in turn.prompt.blocks if b.kind == "text")
    replies: list[str] = []
    tools: list[tuple[str, str]] = []
    for rec in turn.records[1:]:
        for block in rec.blocks:
            if rec.type == "assistant" and block.kind == "text" and block.head.strip():
                replies.append(block.head)
            elif block.kind == "tool_use":
                tools.append((block.name, block.detail))
    return TurnDigest(turn.number, prompt, tuple(replies), tuple(tools))


def make_plan(
    conversation: Conversation,
    settings: GradientSettings,
    target_tokens: int | None = None,
    *,
    head_chars: int = 0,
) -> Plan:
    """``head_chars``: what the preamble holds besides its summary (the thread's scratchpad),
    room a target must leave it."""
    target = settings.target_tokens if target_tokens is None else target_tokens
    cal, measured_context = measure(conversation)
    floor = target <= 0
    if floor:
        # The floor: the CLI's own prompt, the recent band whole and the preamble at its budget;
        # everything older is consolidated (the swap's cost policy asks for this).
        target = cal.overhead_tokens + settings.recent_tokens + settings.summary_tokens
    cut = settings.truncate_chars
    turns = conversation.turns
    costs = turn_costs(turns, cal, cut)
    head_tokens = cal.tokens(sum(total_chars(r) for r in conversation.head))
    # A percent of slack: estimates are rounded record by record, the check sums the file.
    budget = int((target - cal.overhead_tokens) * 0.99)
    # The preamble gets a quarter of a small budget, but never less than a readable minimum.
    summary_reserve = preamble_budget(budget, settings)
    reserve = summary_reserve + (cal.tokens(head_chars) if head_chars else 0)
    # Room for the attachments carried forward: known only once the bands are, so fit again
    # until the room asked for covers what is carried (it only grows; two rounds in practice).
    carry = 0
    for _ in range(4):
        bands = _fit(costs, budget - carry, reserve, settings, floor=floor)
        consolidate = Band.ANCIENT in bands
        if not consolidate and head_tokens:
            # No preamble to fold the old head into: it stays, and must fit too.
            bands = _fit(costs, budget - carry - head_tokens, 0, settings, floor=floor)
            consolidate = Band.ANCIENT in bands
        carried = _carried_attachments(conversation, turns, bands, consolidate)
        needed = cal.tokens(sum(i.record.extra_chars for i in carried if i.record is not None))
        if needed <= carry:
            break
        carry = needed
    unpaired = frozenset(conversation.unpaired_uses | conversation.orphan_results)

    items: list[Item] = []
    if consolidate:
        items.append(Item(None))
    else:
        for rec in conversation.head:
            items.append(Item(rec, Edit(drop_thinking=True, drop_ids=unpaired), None))
    recent_floor: int | None = None
    for turn, band in zip(turns, bands, strict=True):
        if band is Band.ANCIENT:
            continue
        for rec in turn.records:
            if band is Band.RECENT:
                recent_floor = rec.line if recent_floor is None else min(recent_floor, rec.line)
                ids = frozenset(b.tool_id for b in rec.blocks if b.tool_id in unpaired)
                items.append(Item(rec, Edit(drop_ids=ids), band))
                continue
            if rec.type not in ("user", "assistant", "attachment"):
                continue  # progress, turn_duration and other bookkeeping of cut turns
            if rec.type == "attachment" and band is Band.OLD:
                continue
            if rec.type in ("user", "assistant") and not rec.blocks:
                continue  # a message with nothing in it (null, no content): the model reads none
            edit = Edit(
                truncate=band is Band.MIDDLE,
                strip_tools=band is Band.OLD,
                drop_thinking=True,
                drop_ids=unpaired,
            )
            items.append(Item(rec, edit, band))
    items = _after_first_user(items, carried)
    items = _with_bookkeeping(conversation, items, recent_floor)
    planned = sum(
        c[{Band.RECENT: 0, Band.MIDDLE: 1, Band.OLD: 2}[b]]
        for c, b in zip(costs, bands, strict=True)
        if b is not Band.ANCIENT
    )
    planned += (reserve if consolidate else head_tokens) + carry
    notes: list[str] = []
    if conversation.broken_parent:
        notes.append(f"parent chain broken at {conversation.broken_parent}: older lines unseen")
    if unpaired:
        notes.append(f"{len(unpaired)} unpaired tool blocks removed")
    return Plan(
        items=tuple(items),
        bands={b: tuple(t.number for t, x in zip(turns, bands, strict=True) if x is b) for b in Band},
        digests=tuple(digest(t) for t, b in zip(turns, bands, strict=True) if b is Band.ANCIENT),
        calibration=cal,
        tokens_before=measured_context
        or cal.overhead_tokens + cal.tokens(sum(r.chars for r in conversation.records)),
        tokens_planned=cal.overhead_tokens + planned,
        summary_chars=int(summary_reserve * cal.chars_per_token) - PREAMBLE_FRAME_CHARS,
        consolidate_head=consolidate,
        notes=tuple(notes),
        target_tokens=target,
    )


def _carried_attachments(
    conversation: Conversation, turns: Sequence[Turn], bands: Sequence[Band], consolidate: bool
) -> list[Item]:
    """The context the CLI announced in turns the rewrite drops, latest of each kind.

    Claude Code 2.1.316 renders ``attachment`` records (environment, model, tool and skill
    listings, the date) as a ``system`` message after the first user message, and sends that
    message empty when no such attachment follows it: the API refuses an empty message. Its own
    ``/compact`` has the same flaw. Carrying the latest of each kind from the cut turns to just
    after the first user message keeps that message whole, and keeps what the model knew of its
    environment. Kinds the kept turns announce again are not carried; nor are file attachments,
    which are large and which the model can read again.
    """
    dropped = [r for t, b in zip(turns, bands, strict=True) if b in (Band.OLD, Band.ANCIENT)
               for r in t.records]
    kept = {r.subtype or "" for t, b in zip(turns, bands, strict=True)
            if b in (Band.RECENT, Band.MIDDLE) for r in t.records if r.type == "attachment"}
    if consolidate:
        dropped = list(conversation.head) + dropped
    carried = context_attachments(dropped, kept)
    return [Item(r, KEEP, None) for r in sorted(carried, key=lambda r: r.line)]


def context_attachments(records: Iterable[Record], skip: Collection[str] = ()) -> list[Record]:
    """The latest of each kind of context attachment among ``records`` (those the CLI renders
    as a ``system`` message; not files), in the order those latest ones came. Kinds in ``skip``
    are left out. Shared by the gradient and by cuts (``liminal.harness.claude.cuts``), which
    carry them into a session that no longer holds the turns that announced them."""
    latest: dict[str, tuple[int, Record]] = {}
    for n, rec in enumerate(records):
        if (rec.type == "attachment" and rec.rendered_role == "system"
                and rec.subtype != "file" and (rec.subtype or "") not in skip):
            latest[rec.subtype or ""] = (n, rec)
    return [rec for _, rec in sorted(latest.values(), key=lambda pair: pair[0])]


def _after_first_user(items: list[Item], carried: list[Item]) -> list[Item]:
    if not carried:
        return items
    for n, item in enumerate(items):
        if item.record is None or (item.record.type == "user" and item.chain):
            at = n + 1
            while at < len(items) and items[at].record is not None and (
                items[at].record.type == "user"  # type: ignore[union-attr]
            ):
                at += 1  # after the whole first user message (prompt and its meta lines)
            return items[:at] + carried + items[at:]
    return items


def _with_bookkeeping(
    conversation: Conversation, items: list[Item], recent_floor: int | None
) -> list[Item]:
    """Interleave the records outside the conversation that the new file keeps, by file position.

    Kept: records of unknown or metadata types (titles, modes, tools used), wherever they are;
    per-turn bookkeeping (queue operations, progress, file snapshots) only beside the recent
    band; the last of each running-state type. Dropped: request logs (``api-request*``),
    which describe calls made with the old history, and lines off the conversation's branch.
    """
    in_conversation = {r.line for r in conversation.records}
    kept_uuids = {i.record.uuid for i in items if i.record is not None and i.record.uuid}
    floor = recent_floor if recent_floor is not None else conversation.leaf.line + 1
    last_of: dict[str, int] = {}
    for rec in conversation.session.records:
        if rec.type in LAST_ONLY and (rec.ref is None or rec.ref in kept_uuids):
            last_of[rec.type] = rec.line
    extra: list[Record] = []
    for rec in conversation.session.records:
        if rec.line in in_conversation or rec.uuid or rec.type in ALWAYS_DROP:
            continue
        if rec.type in LAST_ONLY:
            if last_of.get(rec.type) == rec.line:
                extra.append(rec)
        elif rec.type in RECENT_ONLY:
            if rec.line >= floor and (rec.ref is None or rec.ref in kept_uuids):
                extra.append(rec)
        elif rec.type != "summary":
            extra.append(rec)
    out: list[Item] = []
    pending = iter(extra)
    nxt = next(pending, None)
    for item in items:
        if item.record is not None:
            while nxt is not None and nxt.line < item.record.line:
                out.append(Item(nxt, KEEP, None, chain=False))
                nxt = next(pending, None)
        out.append(item)
    while nxt is not None:
        out.append(Item(nxt, KEEP, None, chain=False))
        nxt = next(pending, None)
    return out
