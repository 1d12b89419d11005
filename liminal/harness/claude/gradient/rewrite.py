"""The library entry point: rewrite a Claude Code session along the gradient, safely.

``rewrite_session`` is what the swap manager and ``liminal compress`` call. It reads the file
once, plans, renders, validates the exact bytes, and only then writes them, atomically, beside
the original under a new uuid: a temp file, fsync, a no-clobber link to the final name, fsync
of the folder. On any failure it raises and leaves nothing behind. The original is only read.
"""

from __future__ import annotations

import gc
import time
import uuid as uuidlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from liminal import __version__
from liminal.config import GradientSettings
from liminal.gradient.bands import Band
from liminal.gradient.summarize import PREAMBLE_INTRO, scratchpad_chars
from liminal.gradient.zone import Placed, block
from liminal.harness.claude.conversation import Conversation, build
from liminal.harness.claude.gradient.plan import Plan
from liminal.harness.claude.gradient.render import NO_PREAMBLE, Preamble, Rendered, render
from liminal.harness.claude.gradient.validate import validate, validate_note
from liminal.harness.claude.gradient.zone import planned
from liminal.harness.claude.paths import SessionLocation, locate
from liminal.harness.claude.records import dumps, loads, read_session
from liminal.harness.claude.tokens import REWRITE_RECORD, total_chars
from liminal.sessionfiles import RewriteError, is_session_id, write_atomically

Progress = Callable[[str, int, int], None]  # (phase, done, total)


@dataclass(frozen=True, slots=True)
class RewriteResult:
    source: Path
    source_session_id: str
    new_session_id: str
    path: Path  # the new file (not created on a dry run)
    written: bool
    tokens_before: int  # the file's own last usage when it has one, else an estimate
    tokens_after: int  # estimated, calibrated on the file's usage
    target_tokens: int
    turns: dict[str, int]  # turns per band
    records_before: int
    records_after: int
    bytes_before: int
    bytes_after: int
    recall_keys: int
    seconds: float
    cwd: str  # the project directory, where `claude --resume` must run
    notes: tuple[str, ...] = field(default=())
    zone: tuple[Placed, ...] = ()  # the dynamic zone's entries (docs/gradient.md)

    def as_json(self) -> dict[str, object]:
        return {
            "new_session_id": self.new_session_id,
            "path": str(self.path),
            "written": self.written,
            "source": str(self.source),
            "source_session_id": self.source_session_id,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "target_tokens": self.target_tokens,
            "turns": self.turns,
            "records_before": self.records_before,
            "records_after": self.records_after,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            "recall_keys": self.recall_keys,
            "seconds": round(self.seconds, 3),
            "cwd": self.cwd,
            "notes": list(self.notes),
            # What was placed, by key (the texts are in the file): one line stays short.
            "zone": [{"key": p.key, "kind": p.kind, "score": p.score} for p in self.zone],
        }


@dataclass(frozen=True, slots=True)
class Prepared:
    """A validated rewrite held in memory, not yet written."""

    conversation: Conversation
    plan: Plan
    rendered: Rendered
    result: RewriteResult


def _previous_summary(conversation: Conversation) -> str | None:
    for rec in conversation.head:
        if rec.compact_summary:
            content = (conversation.session.parse(rec).get("message") or {}).get("content")
            text = content if isinstance(content, str) else ""
            if isinstance(content, list):
                text = "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
            text = text.removeprefix(PREAMBLE_INTRO)
            return text.split("\n\nThe full earlier transcript is in ", 1)[0]
    return None


def prepare(
    source: str | Path | SessionLocation,
    target_tokens: int | None = None,
    *,
    new_id: str | None = None,
    settings: GradientSettings | None = None,
    preamble: Preamble = NO_PREAMBLE,
    progress: Progress | None = None,
    env: Mapping[str, str] | None = None,
) -> Prepared:
    """``preamble``: what the preamble is made of besides the file (``render``)."""
    started = time.perf_counter()
    # Indexing builds tens of thousands of small acyclic objects; the cycle collector would
    # walk them again and again for nothing (about 15% of the time on a 40 MB session).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _prepare(source, target_tokens, new_id, settings, preamble, progress, env, started)
    finally:
        if collecting:
            gc.enable()


def _prepare(
    source: str | Path | SessionLocation,
    target_tokens: int | None,
    new_id: str | None,
    settings: GradientSettings | None,
    preamble: Preamble,
    progress: Progress | None,
    env: Mapping[str, str] | None,
    started: float,
) -> Prepared:
    settings = settings or GradientSettings()
    location = source if isinstance(source, SessionLocation) else locate(source, env=env)
    new_id = new_id or str(uuidlib.uuid4())
    if not is_session_id(new_id):  # it becomes the new file's name
        raise RewriteError(f"{new_id!r} is not a session id")
    if new_id == location.session_id:
        raise RewriteError("the new session id must differ from the source's")
    session = read_session(
        location, None if progress is None else lambda d, t: progress("read", d, t)
    )
    conversation = build(session)
    previous = _previous_summary(conversation)
    plan, zone = planned(conversation, settings, target_tokens, preamble.memos,
                         scratchpad_chars(preamble.scratchpad, previous))
    rendered = render(
        conversation,
        plan,
        new_id,
        settings,
        preamble=preamble,
        previous_summary=previous if plan.consolidate_head else None,
        progress=None if progress is None else lambda d, t: progress("write", d, t),
        zone=block(zone),
    )
    old_ids = sorted({r.session_id for r in session.records if r.session_id})
    checked = validate(
        rendered.lines, new_id, old_ids=old_ids, thinking_from=rendered.first_recent_uuid
    )
    after_chars = sum(total_chars(r) for r in checked.records if r.uuid)
    tokens_after = plan.calibration.overhead_tokens + plan.calibration.tokens(after_chars)
    last_uuid = next((r.uuid for r in reversed(checked.records) if r.uuid), None)
    note = {
        "type": REWRITE_RECORD,
        "sessionId": new_id,
        "sourceSessionId": location.session_id,
        "sourcePath": str(location.path),
        "timestamp": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "lastRecordUuid": last_uuid,
        "charsPerToken": round(plan.calibration.chars_per_token, 4),
        "overheadTokens": plan.calibration.overhead_tokens,
        "tokensBefore": plan.tokens_before,
        "tokensAfter": tokens_after,
        "liminalVersion": __version__,
    }
    # The note has no uuid and takes no part in the chain: checking it alone is enough.
    validate_note(dumps(note), new_id)
    rendered = replace(rendered, lines=(dumps(note), *rendered.lines))
    reference = loads(session.raw([conversation.leaf])[conversation.leaf.line])
    notes = list(plan.notes)
    if session.torn_tail is not None:
        notes.append(f"torn last line ignored ({session.torn_tail.length} bytes)")
    if session.corrupt_lines:
        notes.append(f"{len(session.corrupt_lines)} unparsable lines skipped")
    result = RewriteResult(
        source=location.path,
        source_session_id=location.session_id,
        new_session_id=new_id,
        path=location.sibling(new_id).path,
        written=False,
        tokens_before=plan.tokens_before,
        tokens_after=tokens_after,
        target_tokens=plan.target_tokens,
        turns={b.value: len(plan.bands[b]) for b in Band},
        records_before=len(session.records),
        records_after=len(rendered.lines),
        bytes_before=session.size,
        bytes_after=sum(len(line) for line in rendered.lines),
        recall_keys=rendered.recall_keys,
        seconds=time.perf_counter() - started,
        cwd=str(reference.get("cwd", "")),
        notes=tuple(notes),
        zone=tuple(zone),
    )
    return Prepared(conversation, plan, rendered, result)


def rewrite_session(
    source: str | Path | SessionLocation,
    target_tokens: int | None = None,
    new_id: str | None = None,
    *,
    settings: GradientSettings | None = None,
    preamble: Preamble = NO_PREAMBLE,
    dry_run: bool = False,
    progress: Progress | None = None,
    env: Mapping[str, str] | None = None,
) -> RewriteResult:
    """Plan, validate and write a compressed copy of a session; raise on any failure.

    Raises SessionNotFound, SessionFormatError, ConversationError, ValidationError or
    RewriteError; in every case no file has been created.
    """
    prepared = prepare(
        source,
        target_tokens,
        new_id=new_id,
        settings=settings,
        preamble=preamble,
        progress=progress,
        env=env,
    )
    result = prepared.result
    if dry_run:
        return result
    write_atomically(result.path, prepared.rendered.lines)
    return replace(result, written=True)
