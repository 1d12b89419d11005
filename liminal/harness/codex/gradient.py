"""The gradient for Codex rollouts: Claude Code's bands (``liminal.gradient.bands``) on Codex's
records, written as a new rollout under a new id.

Turns are banded by age, youngest first, by token budgets (``GradientSettings``):

- recent: the youngest turns that fit ``recent_tokens`` (at least the last), byte for byte;
  under a target, no more than fits under it (``liminal.gradient.bands.recent_budget``);
- middle: the next that fit once tool outputs (and long string leaves of tool arguments) are cut
  to ``truncate_lines`` / ``truncate_chars``, each cut followed by a recall marker whose key is
  ``<session id>:<call_id>:<0 output | 1 call>[:<path>]``;
- old: the next that fit what is left of the target with their calls and outputs removed in pairs
  and only the conversation's messages left;
- ancient: the rest, consolidated into one summary message (``ExtractiveSummarizer``) in the
  first turn, after Codex's own context messages (permissions, environment), which every band
  keeps: a resumed thread whose newest ``turn_context`` survives gets only context *diffs*.

Reasoning items outside the recent band are dropped: their encrypted content was made for the
history before them, which the rewrite changes (as thinking is for Claude Code). Usage records
(``token_count`` events, 0.166's ``token_usage_record``) are not copied: they were paid for in
the original rollout, and a usage reporter reading both files would count them twice. Calls
and outputs left without their other half are removed wherever they are (the API refuses them).

The copy is a complete rollout (``session_meta`` first, ``payload.id`` the new id, with
``forked_from_id`` the original's; 0.166's ordinals renumbered from 0), so Codex resumes it as
it resumes its own: docs/formats.md, "Codex rollouts".
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from liminal.config import GradientSettings
from liminal.gradient.bands import (
    MARKER_CHARS,
    Band,
    Cutter,
    TurnCost,
    already_cut,
    assign_bands,
    preamble_budget,
    recallable,
)
from liminal.gradient.recall import RecallKey
from liminal.gradient.summarize import (
    PREAMBLE_INTRO,
    ExtractiveSummarizer,
    Summarizer,
    TurnDigest,
    scratchpad_chars,
    split_scratchpad,
    with_scratchpad,
)
from liminal.gradient.zone import Candidate, Placed, block, is_zone, select, tokens
from liminal.harness.codex.rollout import (
    CALLS,
    OUTPUTS,
    Line,
    Rollout,
    RolloutError,
    Turn,
    call_id_of,
    is_context_message,
    last_token_count,
    parse_lines,
    read_rollout,
    text_of,
)

_ORDINAL = re.compile(rb'^(\{"timestamp":"[^"]*","ordinal":)\d+')
_SHELLS = ("exec_command", "shell_command", "shell", "local_shell_call")
USAGE_EVENTS = ("token_count",)
USAGE_LINES = ("token_usage_record",)
OUTPUT_BLOCK, CALL_BLOCK = 0, 1


def cost(n_bytes: int) -> int:
    return n_bytes // 4 + 1


# Fields of a response item Codex keeps in the rollout and does not send to the model (0.166).
NOT_SENT = ("internal_chat_message_metadata_passthrough",)


def item_tokens(payload: dict[str, Any]) -> int:
    """What a response item costs the model: its payload as the API is sent it, not the rollout
    line around it (the timestamp, the type, 0.166's ordinal and metadata) nor the fields Codex
    keeps for itself. Counted by the line, that wrapper (75 to 400 bytes an item) would put a
    rewrite that dropped 66 items 1.2k tokens under the context the model then saw."""
    if any(k in payload for k in NOT_SENT):
        payload = {k: v for k, v in payload.items() if k not in NOT_SENT}
    return cost(len(orjson.dumps(payload)))


@dataclass(frozen=True, slots=True)
class CodexRewrite:
    lines: tuple[bytes, ...]
    tokens_before: int
    tokens_after: int
    bands: tuple[Band, ...]  # one per turn of the original, oldest first
    recall_keys: int
    zone: tuple[Placed, ...] = ()  # the dynamic zone's entries


class _Edits:
    """What a band does to one response item; returns the new payload, or None to drop it."""

    def __init__(self, session_id: str, settings: GradientSettings) -> None:
        self.cutter = Cutter(session_id, settings)

    def middle(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        kind = payload.get("type")
        call_id = str(payload.get("call_id") or "")
        if kind == "reasoning":
            return None
        if kind in OUTPUTS:
            output = payload.get("output")
            key = RecallKey(self.cutter.session_id, call_id, OUTPUT_BLOCK)
            if isinstance(output, str):
                cut = self.cutter.cut(output, key)
                return payload if cut is None else {**payload, "output": cut}
            if isinstance(output, list):
                return {**payload, "output": self.cutter.leaves(output, call_id, OUTPUT_BLOCK, ())}
            return payload
        if kind == "function_call" and isinstance(payload.get("arguments"), str):
            arguments = payload["arguments"]
            if len(arguments) <= self.cutter.chars + MARKER_CHARS or already_cut(arguments):
                return payload
            try:
                parsed = orjson.loads(arguments)
            except orjson.JSONDecodeError:
                return payload  # the model's own text: cutting it could leave it unreadable
            cut = self.cutter.leaves(parsed, call_id, CALL_BLOCK, ())
            return {**payload, "arguments": orjson.dumps(cut).decode()}
        if kind == "custom_tool_call" and isinstance(payload.get("input"), str):
            text = self.cutter.cut(payload["input"], RecallKey(self.cutter.session_id, call_id, CALL_BLOCK))
            return payload if text is None else {**payload, "input": text}
        return payload

    @staticmethod
    def old(payload: dict[str, Any]) -> dict[str, Any] | None:
        return payload if payload.get("type") == "message" else None


def _turn_cost(turn: Turn, edit: Any) -> int:
    """A turn's items in a band, but Codex's context messages, which every band keeps
    (``_context_cost``)."""
    payloads = (edit(line.payload) if edit else line.payload for line in turn.items()
                if not is_context_message(line.payload))
    return sum(item_tokens(payload) for payload in payloads if payload is not None)


def _context_cost(turns: Sequence[Turn]) -> int:
    """Codex's context messages (permissions, environment): kept whatever band their turn is in,
    the summary's turn too, so they come off the room first (2.6k tokens with codex-agent)."""
    return sum(item_tokens(line.payload) for turn in turns for line in turn.items()
               if is_context_message(line.payload))


def _digest(number: int, turn: Turn) -> TurnDigest:
    replies: list[str] = []
    tools: list[tuple[str, str]] = []
    for line in turn.items():
        p = line.payload
        if p.get("type") == "message" and p.get("role") == "assistant":
            replies.append(text_of(p)[:600])
        elif p.get("type") in CALLS:
            name = str(p.get("name") or p.get("type"))
            detail = ""
            try:
                args = orjson.loads(p.get("arguments") or "{}")
            except (orjson.JSONDecodeError, TypeError):
                args = {}
            if isinstance(args, dict):
                command = args.get("cmd") or args.get("command")
                detail = " ".join(command) if isinstance(command, list) else str(command or "")
            # The summarizer lists shell commands under Claude Code's tool name.
            tools.append(("Bash" if name in _SHELLS else name, detail))
    return TurnDigest(number, turn.prompt, tuple(replies), tuple(tools))


def _digests(turns: Sequence[Turn]) -> tuple[list[TurnDigest], str | None]:
    """The turns as the summarizer is given them, and a previous rewrite's summary among them."""
    previous: str | None = None
    digests: list[TurnDigest] = []
    for n, turn in enumerate(turns):
        if turn.prompt.startswith(PREAMBLE_INTRO):  # a previous rewrite's summary: carried over
            previous = turn.prompt.removeprefix(PREAMBLE_INTRO)
            continue
        for line in turn.items():  # or a summary message of ours inside a turn
            text = text_of(line.payload)
            if line.payload.get("role") == "user" and text.startswith(PREAMBLE_INTRO):
                previous = text.removeprefix(PREAMBLE_INTRO)
        digests.append(_digest(n + 1, turn))
    return digests, previous


def summary_text(turns: Sequence[Turn], settings: GradientSettings, budget_tokens: int | None = None,
                 summarizer: Summarizer | None = None, scratchpad: str | None = None) -> str:
    """The preamble of ``turns``, in ``budget_tokens`` (``summary_tokens`` unless said), headed
    by ``scratchpad`` (None: the one a previous rewrite's summary among them holds)."""
    digests, previous = _digests(turns)
    carried, previous = split_scratchpad(previous) if previous is not None else (None, None)
    tokens = settings.summary_tokens if budget_tokens is None else budget_tokens
    budget = max(400, tokens * 4 - len(PREAMBLE_INTRO))
    text = (summarizer or ExtractiveSummarizer()).summarize(digests, previous or None, budget)
    return PREAMBLE_INTRO + with_scratchpad(text, carried if scratchpad is None else scratchpad)


def previous_summary(rollout: Rollout) -> str | None:
    """The text (after ``PREAMBLE_INTRO``) of a previous rewrite's summary in the rollout, the
    last found as ``_digests`` finds it."""
    found: str | None = None
    for line in rollout.lines:
        if line.is_item and line.payload.get("role") == "user":
            text = text_of(line.payload)
            if text.startswith(PREAMBLE_INTRO):
                found = text.removeprefix(PREAMBLE_INTRO)
    return found


def refreshed(line: Line, scratchpad: str) -> Line:
    """``line`` with ``scratchpad`` at the head of its summary, if it is a previous rewrite's
    summary message (``_summary_line``) holding another; else ``line``."""
    payload = line.payload
    if not (line.is_item and payload.get("type") == "message" and payload.get("role") == "user"):
        return line
    content = payload.get("content")
    if not isinstance(content, list) or len(content) != 1 or not isinstance(content[0], dict):
        return line
    text = content[0].get("text")
    if not isinstance(text, str) or not text.startswith(PREAMBLE_INTRO):
        return line
    new = PREAMBLE_INTRO + with_scratchpad(text[len(PREAMBLE_INTRO):], scratchpad)
    if new == text:
        return line
    return _with_payload(line, {**payload, "content": [{**content[0], "text": new}]})


def _overhead_and_bands(rollout: Rollout, target_tokens: int, settings: GradientSettings,
                        edits: _Edits) -> tuple[int, list[Band]]:
    items = [line for line in rollout.lines if line.is_item]
    estimate = sum(item_tokens(line.payload) for line in items)
    before = last_token_count(rollout.lines) or estimate
    overhead = max(0, before - estimate)  # instructions and tools: not in the file
    return overhead, list(turn_bands(rollout.turns, target_tokens, overhead, settings, edits))


def ancient_digests(rollout: Rollout, target_tokens: int, settings: GradientSettings) -> list[TurnDigest]:
    """The turns a rewrite to ``target_tokens`` would consolidate, as the summarizer gets them
    (without earlier swaps' zones, as ``rewrite`` reads them)."""
    rollout = without_zones(rollout)
    _, bands = _overhead_and_bands(rollout, target_tokens, settings, _Edits(rollout.session_id, settings))
    return _digests([t for t, b in zip(rollout.turns, bands, strict=True) if b is Band.ANCIENT])[0]


def all_digests(rollout: Rollout) -> list[TurnDigest]:
    """Every turn, as the summarizer gets them (a previous rewrite's summary and zones left out)."""
    return _digests(without_zones(rollout).turns)[0]


def preamble_tokens(target_tokens: int, overhead: int, settings: GradientSettings) -> int:
    """The summary's budget: ``summary_tokens`` at the floor (a target of 0), else its share of
    the room under the target (``liminal.gradient.bands.preamble_budget``)."""
    if not target_tokens:
        return settings.summary_tokens
    return preamble_budget(target_tokens - overhead, settings)


def turn_bands(turns: Sequence[Turn], target_tokens: int, overhead: int, settings: GradientSettings,
               edits: _Edits, head_chars: int = 0) -> list[Band]:
    """Youngest first: recent by ``recent_tokens`` (at least one turn; under a target, no more
    than fits under it with the summary), then middle and old by what the target leaves
    (``target_tokens`` 0: nothing, the recent band and the summary only). The walk is the
    gradient's (``liminal.gradient.bands.assign_bands``); a turn's cost in each band is its
    response items as that band edits them. ``head_chars``: what the summary holds besides
    (the thread's scratchpad), room a target must leave it."""
    overhead += _context_cost(turns)
    reserve = preamble_tokens(target_tokens, overhead, settings) + (cost(head_chars) if head_chars else 0)
    floor = not target_tokens
    costs = [TurnCost(partial(_band_cost, turn, edits)) for turn in turns]
    # At the floor nothing but the recent band (kept whole) and the summary: no budget left.
    return assign_bands(costs, budget=0 if floor else target_tokens - overhead,
                        recent=settings.recent_tokens, middle=settings.middle_tokens,
                        reserve=reserve, keep=settings.recent_tokens if floor else 0)


def _band_cost(turn: Turn, edits: _Edits, band: Band) -> int:
    edit = {Band.RECENT: None, Band.MIDDLE: edits.middle, Band.OLD: edits.old}[band]
    return _turn_cost(turn, edit)


def _item_completed_id(line: Line) -> str | None:
    if not line.is_event("item_completed"):
        return None
    item = line.payload.get("item")
    return str(item.get("id")) if isinstance(item, dict) and item.get("id") else None


def _with_payload(line: Line, payload: dict[str, Any]) -> Line:
    assert line.value is not None
    value = {**line.value, "payload": payload}
    return Line(line.offset, orjson.dumps(value) + b"\n", value)


def _summary_line(like: Line, text: str) -> Line:
    value = {"timestamp": like.value.get("timestamp") if like.value else None, "type": "response_item",
             "payload": {"type": "message", "role": "user",
                         "content": [{"type": "input_text", "text": text}]}}
    if like.value is not None and "ordinal" in like.value:
        value = {"timestamp": value["timestamp"], "ordinal": 0, "type": "response_item",
                 "payload": value["payload"]}
    return Line(like.offset, orjson.dumps(value) + b"\n", value)


def _render_turn(turn: Turn, band: Band, edits: _Edits) -> list[Line]:
    out: list[Line] = []
    dropped: set[str] = set()
    for line in turn.lines:
        if line.type in USAGE_LINES or any(line.is_event(k) for k in USAGE_EVENTS):
            continue
        if not line.is_item or band is Band.RECENT:
            out.append(line)
            continue
        payload = (edits.middle if band is Band.MIDDLE else edits.old)(line.payload)
        if payload is None:
            if (call_id := call_id_of(line.payload)) is not None:
                dropped.add(call_id)
            continue
        out.append(line if payload is line.payload else _with_payload(line, payload))
    return [line for line in out if _item_completed_id(line) not in dropped]


_SUMMARY_TURN_KEEPS = ("turn_context", "world_state")
_SUMMARY_TURN_EVENTS = ("task_started", "task_complete", "thread_settings_applied")


def _summary_turn(turn: Turn, text: str) -> list[Line]:
    """The first turn, its conversation replaced by the summary: its structure (start, context,
    settings, end) and Codex's context messages stay."""
    out: list[Line] = []
    placed = False
    for line in turn.lines:
        keep = line.type in _SUMMARY_TURN_KEEPS or any(line.is_event(k) for k in _SUMMARY_TURN_EVENTS) \
            or (line.is_item and is_context_message(line.payload))
        if line.is_event("task_complete") and not placed:
            out.append(_summary_line(line, text))
            placed = True
        if keep:
            out.append(line)
        if line.type == "turn_context" and not placed:
            out.append(_summary_line(line, text))
            placed = True
    if not placed:
        out.append(_summary_line(turn.lines[-1], text))
    return out


def _ancient_rest(turn: Turn) -> list[Line]:
    """A later ancient turn leaves only what is not conversation: context messages, world state."""
    return [line for line in turn.lines
            if line.type == "world_state" or (line.is_item and is_context_message(line.payload))]


def paired(lines: Iterable[Line]) -> list[Line]:
    """Without the calls that have no output and the outputs that have no call before them."""
    lines = list(lines)
    calls: set[str | None] = set()
    answered: set[str | None] = set()
    for line in lines:
        kind = line.kind if line.is_item else ""
        call_id = call_id_of(line.payload)
        if kind in CALLS:
            calls.add(call_id)
        elif kind in OUTPUTS and call_id in calls:
            answered.add(call_id)
    keep = calls & answered - {None}
    return [line for line in lines
            if not (line.is_item and (line.kind in CALLS or line.kind in OUTPUTS)
                    and call_id_of(line.payload) not in keep)]


def _renamed(line: Line, old_ids: Collection[str], new_id: str) -> Line:
    """0.166's events name their thread (``thread_id``): the copy's are the copy's."""
    payload = line.payload
    if payload.get("thread_id") not in old_ids:
        return line
    return _with_payload(line, {**payload, "thread_id": new_id})


def finish(lines: list[Line], old_id: str, new_id: str, *, also: Collection[str] = ()) -> tuple[bytes, ...]:
    """The rollout's bytes as ``new_id``: its ``session_meta`` renamed (``forked_from_id`` the
    old id), ordinals renumbered where the original had them, calls paired, checked. ``also``:
    the ids of other rollouts the lines came from (a cut across the thread's swaps), whose
    events are renamed too."""
    if not lines or lines[0].type != "session_meta":
        raise RolloutError("a rollout must start with session_meta")
    meta = dict(lines[0].payload)
    if meta.get("session_id") == meta.get("id"):
        meta["session_id"] = new_id
    meta["id"] = new_id
    meta["forked_from_id"] = old_id
    old_ids = {old_id, *also}
    lines = [_with_payload(lines[0], meta), *(_renamed(line, old_ids, new_id) for line in paired(lines[1:]))]
    numbered = lines[0].value is not None and "ordinal" in lines[0].value
    out: list[bytes] = []
    n = 0
    for line in lines:
        raw = line.raw
        # Only records are numbered, as Codex numbers them: a line it cannot read (kept as it
        # is) takes no ordinal, and the records around it stay contiguous.
        if numbered and line.is_record:
            found = _ORDINAL.match(raw)  # (a match and a splice: ``subn`` parsed its template per line)
            if found is not None:
                raw = found.group(1) + str(n).encode() + raw[found.end():]
            else:
                assert line.value is not None
                value = {k: v for k, v in line.value.items() if k != "ordinal"}
                value = {"timestamp": value.pop("timestamp", None), "ordinal": n, **value}
                raw = orjson.dumps(value) + b"\n"
            n += 1
        out.append(raw)
    check(out, new_id)
    return tuple(out)


def tokens_of(raw_lines: Sequence[bytes]) -> int:
    """What the response items among ``raw_lines`` cost the model."""
    return sum(item_tokens(line.payload) for line in parse_lines(b"".join(raw_lines)) if line.is_item)


def check(raw_lines: Sequence[bytes], new_id: str) -> None:
    """Refuse a rollout Codex would refuse or resume wrongly: raises ``RolloutError``."""
    lines = parse_lines(b"".join(raw_lines))
    if len(lines) != len(raw_lines) or not lines or lines[0].type != "session_meta":
        raise RolloutError("the rewrite does not start with session_meta")
    if lines[0].payload.get("id") != new_id:
        raise RolloutError("the rewrite's session_meta does not carry its new id")
    if len(paired(lines)) != len(lines):
        raise RolloutError("the rewrite has a call without its output, or an output without its call")
    ordinals = [line.value.get("ordinal") for line in lines if line.value is not None and line.is_record]
    if any(o is not None for o in ordinals) and ordinals != list(range(len(ordinals))):
        raise RolloutError("the rewrite's ordinals are not contiguous from 0")


def overhead(rollout: Rollout) -> int | None:
    """What the model is sent beyond the rollout's response items (instructions, tools): the
    last ``token_count`` less the items' estimate. None when the rollout has no ``token_count``
    (a rewrite or cut not resumed yet: ``finish`` copies no usage lines)."""
    counted = last_token_count(rollout.lines)
    if counted is None:
        return None
    return max(0, counted - sum(item_tokens(line.payload) for line in rollout.lines if line.is_item))


def _is_zone_line(line: Line) -> bool:
    p = line.payload
    return line.is_item and p.get("type") == "message" and p.get("role") == "user" \
        and is_zone(text_of(p))


def without_zones(rollout: Rollout) -> Rollout:
    """The rollout without the zones earlier swaps placed: each swap chooses its own."""
    return Rollout(rollout.head, [Turn([line for line in turn.lines if not _is_zone_line(line)])
                                  for turn in rollout.turns])


def _output_text(payload: dict[str, Any]) -> str:
    output = payload.get("output")
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(str(p.get("text") or "") for p in output if isinstance(p, dict))
    return ""


def choose_zone(rollout: Rollout, bands: Sequence[Band], memos: Sequence[Candidate], room: int,
                max_passages: int = 300) -> list[Placed]:
    """The zone: ``memos`` and the tool outputs of the turns not kept whole, matched against
    what the person and the model said in the recent band (``liminal.gradient.zone``)."""
    if room <= 0 or all(b is Band.RECENT for b in bands):
        return []
    said = [text_of(line.payload) for turn, band in zip(rollout.turns, bands, strict=True)
            if band is Band.RECENT for line in turn.items()
            if line.payload.get("type") == "message" and not is_context_message(line.payload)]
    outputs = [line.payload for turn, band in zip(rollout.turns, bands, strict=True)
               if band is not Band.RECENT for line in turn.items() if line.kind in OUTPUTS]
    passages: list[Candidate] = []
    for order, payload in enumerate(reversed(outputs[-max_passages:])):  # the nearest first on ties
        call_id = call_id_of(payload)
        text = _output_text(payload)
        if call_id is None or not text.strip() or already_cut(text):
            continue
        key = RecallKey(rollout.session_id, call_id, OUTPUT_BLOCK)
        if recallable(key):
            passages.append(Candidate(str(key), "passage", text, len(memos) + order))
    return select([*memos, *passages], "\n".join(said), room)


def _render(rollout: Rollout, target_tokens: int, overhead: int, settings: GradientSettings,
            edits: _Edits, summarizer: Summarizer | None = None,
            scratchpad: str | None = None) -> tuple[list[Band], list[Line], int | None]:
    """The bands under ``target_tokens``, the lines they give, and where the recent band begins.
    ``scratchpad``: at the head of the summary written, and of a previous one a kept turn holds."""
    head = scratchpad_chars(scratchpad, previous_summary(rollout) if scratchpad is None else None)
    bands = turn_bands(rollout.turns, target_tokens, overhead, settings, edits, head)
    out: list[Line] = list(rollout.head)
    ancient = [t for t, b in zip(rollout.turns, bands, strict=True) if b is Band.ANCIENT]
    recent_at: int | None = None
    for n, (turn, band) in enumerate(zip(rollout.turns, bands, strict=True)):
        if band is Band.RECENT and recent_at is None:
            recent_at = len(out)
        if band is Band.ANCIENT:
            if n == 0:
                summary = summary_text(ancient, settings, preamble_tokens(target_tokens, overhead, settings),
                                       summarizer, scratchpad)
                out.extend(_summary_turn(turn, summary))
            else:
                out.extend(_ancient_rest(turn))
        else:
            lines = _render_turn(turn, band, edits)
            out.extend(lines if scratchpad is None else (refreshed(line, scratchpad) for line in lines))
    return bands, out, recent_at


def rewrite(rollout: Rollout, target_tokens: int, new_id: str, settings: GradientSettings,
            memos: Sequence[Candidate] = (), summarizer: Summarizer | None = None,
            scratchpad: str | None = None) -> CodexRewrite:
    rollout = without_zones(rollout)
    items = [line for line in rollout.lines if line.is_item]
    estimate = sum(item_tokens(line.payload) for line in items)
    before = last_token_count(rollout.lines) or estimate
    overhead = max(0, before - estimate)  # instructions and tools: not in the file
    edits = _Edits(rollout.session_id, settings)
    bands, out, recent_at = _render(rollout, target_tokens, overhead, settings, edits, summarizer, scratchpad)
    zone = choose_zone(rollout, bands, memos, settings.zone_tokens)
    need = tokens(block(zone))
    if zone and target_tokens:
        # Under a target the zone must fit too: the bands are made again with its room taken
        # off, and it is chosen again for them (as for Claude Code: docs/gradient.md).
        planned = overhead + sum(item_tokens(line.payload) for line in out if line.is_item)
        if planned + need > target_tokens:
            edits = _Edits(rollout.session_id, settings)
            bands, out, recent_at = _render(rollout, max(1, target_tokens - need), overhead,
                                            settings, edits, summarizer, scratchpad)
            planned = overhead + sum(item_tokens(line.payload) for line in out if line.is_item)
            zone = choose_zone(rollout, bands, memos, min(settings.zone_tokens, target_tokens - planned))
    if zone and recent_at:
        # Between the compressed history and the recent band, a message Codex sends the model
        # as it sends the summary; liminal's readers take it for context, not a prompt.
        out.insert(recent_at, _summary_line(out[recent_at - 1], block(zone)))
    lines = finish(out, rollout.session_id, new_id)
    after = overhead + tokens_of(lines)
    return CodexRewrite(lines, before, after, tuple(bands), edits.cutter.keys, tuple(zone))


def by_band(rollout: Rollout, plan: CodexRewrite) -> dict[str, dict[str, int]]:
    """Each band's turns and what they weigh now, whole."""
    out: dict[str, dict[str, int]] = {b.value: {"turns": 0, "tokens": 0} for b in Band}
    for turn, band in zip(rollout.turns, plan.bands, strict=True):
        out[band.value]["turns"] += 1
        out[band.value]["tokens"] += sum(item_tokens(line.payload) for line in turn.items())
    return out


def band_table(path: Path, settings: GradientSettings) -> dict[str, dict[str, int]]:
    """The rollout's turns as a rewrite to ``settings.target_tokens`` would band them (``/context``)."""
    rollout = read_rollout(path)
    return by_band(rollout, rewrite(rollout, settings.target_tokens, str(uuid.uuid4()), settings))
