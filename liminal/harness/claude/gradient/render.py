"""Turning a Plan into the lines of the new session file.

A record the plan keeps unchanged is written from its original bytes: only its ``sessionId``
(every ``"sessionId":"<old>"``, nested ones included) and, where the chain is re-pointed, its
``parentUuid`` are patched in place. Everything else in the line stays byte for byte, and the
patch costs no parse. A record the plan edits is parsed, edited and serialised compactly, as
Claude Code writes it. The chain is laid at the end: every kept record with a uuid, in output
order, hangs off the one before it, so the pure parent walk from the leaf sees all of them.
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from liminal.config import GradientSettings
from liminal.gradient.bands import MARKER_CHARS, Band, Cutter
from liminal.gradient.summarize import (
    PREAMBLE_INTRO,
    ExtractiveSummarizer,
    Summarizer,
    split_scratchpad,
    with_scratchpad,
)
from liminal.gradient.zone import Candidate
from liminal.harness.claude.conversation import Conversation
from liminal.harness.claude.gradient.plan import Edit, Plan
from liminal.harness.claude.gradient.zone import is_zone_record
from liminal.harness.claude.gradient.zone import record as zone_record
from liminal.harness.claude.records import Record, dumps, loads

_LIMINAL_NS = uuidlib.UUID("5f0c8a52-2d0e-4b8e-9d35-6c1b8a0f7e11")


@dataclass(frozen=True, slots=True)
class Preamble:
    """What a rewrite's preamble is made of besides the file: the summarizer of the turns it
    consolidates (None: the extractive one), the candidates for the dynamic zone (``memos``), and
    the thread's scratchpad at its head (None: the one an earlier preamble holds)."""

    summarizer: Summarizer | None = None
    memos: Sequence[Candidate] = ()
    scratchpad: str | None = None


NO_PREAMBLE = Preamble()


@dataclass(frozen=True, slots=True)
class Rendered:
    lines: tuple[bytes, ...]
    recall_keys: int
    first_recent_uuid: str | None
    preamble: str | None




def apply_edit(value: dict[str, Any], edit: Edit, cutter: Cutter) -> bool:
    """Edit a parsed record in place; False when nothing of it is left to keep."""
    message = value.get("message")
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        return True
    uuid = str(value.get("uuid", ""))
    kept: list[Any] = []
    touched_results = False
    for index, block in enumerate(message["content"]):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind in ("thinking", "redacted_thinking") and edit.drop_thinking:
            continue
        if kind in ("tool_use", "tool_result"):
            tool_id = block.get("id") if kind == "tool_use" else block.get("tool_use_id")
            if edit.strip_tools or tool_id in edit.drop_ids:
                touched_results = True
                continue
            if edit.truncate and kind == "tool_result":
                new = cutter.result(block, uuid, index)
                touched_results |= new is not block
                block = new
            elif edit.truncate and kind == "tool_use" and "input" in block:
                block = {**block, "input": cutter.leaves(block["input"], uuid, index, ("input",))}
        kept.append(block)
    if not kept:
        return False
    message["content"] = kept
    if touched_results:
        # The structured copy of the output the UI renders; the model never reads it.
        value.pop("toolUseResult", None)
    return True


def _renamed(line: bytes, old_ids: tuple[bytes, ...], new_id: str) -> bytes:
    """Every ``"sessionId":"<old>"`` in the line, nested ones too, naming the new session.

    Inside a JSON string a quote is escaped, so the pattern only ever matches a real key.
    """
    new = b'"sessionId":"' + new_id.encode() + b'"'
    for old in old_ids:
        if old in line:
            line = line.replace(old, new)
    return line


def _patch(
    raw: bytes, rec: Record, new_id: str, parent: str | None, old_ids: tuple[bytes, ...] = ()
) -> bytes | None:
    """The original line with sessionId and parentUuid replaced, or None if it must be re-dumped."""
    if not raw.endswith(b"\n"):
        raw += b"\n"
    raw = _renamed(raw, old_ids, new_id)
    if rec.uuid is None or parent == rec.parent:
        return raw
    if raw.count(b'"parentUuid":') != 1:
        return None
    old = b"null" if rec.parent is None else b'"' + rec.parent.encode() + b'"'
    new = b"null" if parent is None else b'"' + parent.encode() + b'"'
    needle = b'"parentUuid":' + old
    if raw.count(needle) != 1:
        return None
    return raw.replace(needle, b'"parentUuid":' + new)


def _preamble(
    conversation: Conversation,
    plan: Plan,
    new_id: str,
    text: str,
    reference: dict[str, Any],
) -> list[dict[str, Any]]:
    boundary_uuid = str(uuidlib.uuid5(_LIMINAL_NS, f"{new_id}:boundary"))
    summary_uuid = str(uuidlib.uuid5(_LIMINAL_NS, f"{new_id}:summary"))
    common = {
        "isSidechain": False,
        "userType": reference.get("userType", "external"),
        "cwd": reference.get("cwd", ""),
        "sessionId": new_id,
        "version": reference.get("version", ""),
        "gitBranch": reference.get("gitBranch", ""),
    }
    stamp = str(reference.get("timestamp", ""))
    boundary = {
        "parentUuid": None,
        "logicalParentUuid": None,
        **common,
        "type": "system",
        "subtype": "compact_boundary",
        "content": "Conversation compacted",
        "isMeta": False,
        "timestamp": stamp,
        "uuid": boundary_uuid,
        "level": "info",
        "compactMetadata": {"trigger": "manual", "preTokens": plan.tokens_before},
    }
    source = conversation.session.location
    footer = (
        f"\n\nThe full earlier transcript is in {source.path} (session {source.session_id}). "
        "Tool output cut from the conversation below ends in a marker with a key: liminal's recall "
        "tool (mcp__liminal__recall) returns the full text for it."
    )
    summary = {
        "parentUuid": boundary_uuid,
        **common,
        "type": "user",
        "message": {"role": "user", "content": PREAMBLE_INTRO + text + footer},
        "isVisibleInTranscriptOnly": True,
        "isCompactSummary": True,
        "uuid": summary_uuid,
        "timestamp": stamp,
    }
    return [boundary, summary]


def render(
    conversation: Conversation,
    plan: Plan,
    new_id: str,
    settings: GradientSettings,
    *,
    preamble: Preamble = NO_PREAMBLE,
    previous_summary: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    zone: str = "",
) -> Rendered:
    """``preamble.scratchpad``: the thread's, at the head of the preamble written (None: the one
    the earlier preamble had), and in place of the one an earlier preamble that stays holds;
    ``zone``: the dynamic zone chosen from ``preamble.memos``, as written."""
    summarizer, scratchpad = preamble.summarizer, preamble.scratchpad
    session = conversation.session
    wanted = [i.record for i in plan.items if i.record is not None]
    raw = session.raw(wanted)
    cutter = Cutter(session.location.session_id, settings)
    # Every session id the file's lines carry (a copy made without rewriting them has two).
    found = {r.session_id for r in session.records if r.session_id} | {
        session.location.session_id
    }
    old_ids = tuple(b'"sessionId":"' + i.encode() + b'"' for i in sorted(found) if i != new_id)
    lines: list[bytes] = []
    prev_uuid: str | None = None
    prev_mid: str | None = None  # message.id of the last line written, when an assistant's
    prev_mid_line: bytes = b""  # the line that message.id came from (for its requestId)
    # A record whose content the rewrite changed gets a fresh uuid (tools that key on uuid,
    # renderers, must not show a cut copy in place of the original); its children follow.
    renamed: dict[str, str] = {}
    first_recent: str | None = None
    preamble_text: str | None = None
    total = len(plan.items)
    for n, item in enumerate(plan.items):
        if progress is not None and n % 2000 == 0:
            progress(n, total)
        if item.record is None:
            first = next((i.record for i in plan.items if i.record is not None and i.chain), None)
            reference = loads(raw[first.line]) if first is not None else {}
            carried, previous = split_scratchpad(previous_summary or "")
            preamble_text = with_scratchpad((summarizer or ExtractiveSummarizer()).summarize(
                plan.digests, previous or None, plan.summary_chars
            ), carried if scratchpad is None else scratchpad)
            for value in _preamble(conversation, plan, new_id, preamble_text, reference):
                lines.append(dumps(value))
                prev_uuid = value["uuid"]
            prev_mid = None
            continue
        rec = item.record
        if is_zone_record(rec):
            continue  # an earlier swap's zone: this one's is chosen afresh (``zone``)
        if zone and item.band is Band.RECENT:
            # The dynamic zone, between the compressed history and the recent band.
            value = zone_record(zone, new_id, prev_uuid, loads(raw[rec.line]))
            lines.append(dumps(value))
            prev_uuid, prev_mid, zone = value["uuid"], None, ""
        parent = prev_uuid if item.chain and rec.uuid else renamed.get(rec.parent or "", rec.parent)
        # With its tool calls and results gone, an old turn's assistant messages would follow
        # one another, and Claude Code can write two in a row itself (an API error, then the
        # answer); the API wants roles to alternate, and Claude Code joins the lines of one
        # message.id into one message, so they take the id of the first. The recent band stays
        # as the CLI wrote it.
        merge_into = (
            prev_mid
            if item.band in (Band.OLD, Band.MIDDLE)
            and rec.type == "assistant"
            and prev_mid is not None
            and rec.message_id != prev_mid
            else None
        )
        line: bytes | None = None
        # An earlier preamble that stays (nothing new to consolidate): its scratchpad the thread's now.
        fresh = (_refreshed(raw[rec.line], scratchpad) if scratchpad is not None and item.band is None
                 and rec.compact_summary else None)
        edit_needed = item.edit.changes and _needs_edit(rec, item.edit, settings.truncate_chars)
        changed = bool(edit_needed) or merge_into is not None or fresh is not None
        if not changed:
            line = _patch(raw[rec.line], rec, new_id, parent, old_ids)
        if line is None:
            value = fresh if fresh is not None else loads(raw[rec.line])
            if not apply_edit(value, item.edit, cutter):  # recall keys name the original uuid
                continue
            if changed and rec.uuid:
                renamed[rec.uuid] = str(uuidlib.uuid5(_LIMINAL_NS, f"{new_id}:{rec.uuid}"))
                value["uuid"] = renamed[rec.uuid]
            if merge_into is not None:
                _merge_usage_keys(value, merge_into, prev_mid_line)
            if "sessionId" in value:
                value["sessionId"] = new_id
            if rec.uuid and (item.chain or parent != rec.parent):
                value["parentUuid"] = parent
            line = _renamed(dumps(value), old_ids, new_id)
        if item.chain and rec.uuid:
            prev_uuid = renamed.get(rec.uuid, rec.uuid)
            if rec.type == "assistant":
                if merge_into is None:
                    prev_mid_line = line
                prev_mid = merge_into or rec.message_id
            elif rec.type in ("user", "attachment"):
                prev_mid = None
            if first_recent is None and item.band is Band.RECENT:
                first_recent = rec.uuid
        lines.append(line)
    return Rendered(tuple(lines), cutter.keys, first_recent, preamble_text)


def _refreshed(raw: bytes, scratchpad: str) -> dict[str, Any] | None:
    """A preamble's summary record of liminal's (its text starts with ``PREAMBLE_INTRO``) with
    ``scratchpad`` at its head, or None: not one of liminal's, or it holds that one already."""
    value = loads(raw)
    message = value.get("message")
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    if isinstance(content, str):
        if not content.startswith(PREAMBLE_INTRO):
            return None
        new = PREAMBLE_INTRO + with_scratchpad(content[len(PREAMBLE_INTRO):], scratchpad)
        if new == content:
            return None
        message["content"] = new
        return value
    for block in content if isinstance(content, list) else []:
        text = block.get("text") if isinstance(block, dict) and block.get("type") == "text" else None
        if isinstance(text, str) and text.startswith(PREAMBLE_INTRO):
            new = PREAMBLE_INTRO + with_scratchpad(text[len(PREAMBLE_INTRO):], scratchpad)
            if new == text:
                return None
            block["text"] = new
            return value
    return None


def _merge_usage_keys(value: dict[str, Any], into: str, into_line: bytes) -> None:
    """An old assistant line joined to the message before it takes that message's id, and with
    it that line's ``requestId``, so the pair usage reporters count a model call by names a call
    they already counted (a new pair would count its spend again). Its own usage goes: the
    rewrite made no model call, and the call it came from is counted in the original file."""
    value["message"]["id"] = into
    request_id = loads(into_line).get("requestId") if into_line else None
    if request_id is None:
        value.pop("requestId", None)
    else:
        value["requestId"] = request_id
    value["message"].pop("usage", None)


def _needs_edit(rec: Record, edit: Edit, cut: int) -> bool:
    """Whether the edit would change this record at all (most middle-band prose would not)."""
    limit = cut + MARKER_CHARS
    for block in rec.blocks:
        if block.kind in ("thinking", "redacted_thinking") and edit.drop_thinking:
            return True
        if block.kind in ("tool_use", "tool_result"):
            if edit.strip_tools or block.tool_id in edit.drop_ids:
                return True
            if edit.truncate and block.kind == "tool_result" and block.chars > limit:
                return True
            if edit.truncate and block.kind == "tool_use" and any(n > limit for n in block.leaves):
                return True
    return False
