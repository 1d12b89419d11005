"""Context size from the file's own usage numbers, and a token estimate by category.

The exact figure is the last main-chain assistant line's ``input_tokens +
cache_creation_input_tokens + cache_read_input_tokens``: what the model read on the last call.
Planning needs a figure per record, so we estimate from characters, and calibrate the estimate
against the file's usage: two API calls (the first and the last after the boundary) give the
characters-per-token ratio of this conversation and the fixed overhead (system prompt and tool
definitions) that no rewrite can remove. Without usage we fall back to 4 characters a token
and no overhead.
"""

from __future__ import annotations

from dataclasses import dataclass

from liminal.harness.claude import tail
from liminal.harness.claude.conversation import Conversation
from liminal.harness.claude.records import Record

CATEGORIES = ("tool_results", "tool_inputs", "thinking", "assistant_text", "user_text")
DEFAULT_CHARS_PER_TOKEN = 4.0


@dataclass(frozen=True, slots=True)
class Calibration:
    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN
    overhead_tokens: int = 0  # system prompt + tools: present whatever the conversation holds
    measured: bool = False

    def tokens(self, chars: int) -> int:
        return int(chars / self.chars_per_token + 0.5)


def record_chars(rec: Record) -> dict[str, int]:
    """Characters the model reads from this record, by category."""
    out = dict.fromkeys(CATEGORIES, 0)
    if rec.type == "attachment":
        out["user_text"] += rec.extra_chars
        return out
    if rec.type not in ("user", "assistant"):
        return out
    for block in rec.blocks:
        if block.kind == "tool_result":
            out["tool_results"] += block.chars
        elif block.kind == "tool_use":
            out["tool_inputs"] += block.chars
        elif block.kind in ("thinking", "redacted_thinking"):
            out["thinking"] += block.chars
        elif rec.type == "assistant":
            out["assistant_text"] += block.chars
        else:
            out["user_text"] += block.chars
    return out


def total_chars(rec: Record) -> int:
    return rec.chars  # the sum of record_chars, computed once when the line is indexed


REWRITE_RECORD = tail.REWRITE_RECORD


@dataclass(frozen=True, slots=True)
class _Usage:
    points: list[tuple[int, int]]  # (characters before the call, context of the call), fresh only
    prior: Calibration | None  # what the rewrite that wrote this file measured
    prior_tokens: int | None  # the context that rewrite left


def _usage(conversation: Conversation) -> _Usage:
    """Usage points that describe this file's own history.

    A rewritten file keeps the usage numbers of the records it kept unchanged, but they were
    measured on the longer original history: stale here. liminal's rewrite leaves a
    ``liminal-rewrite`` record naming the last record it wrote and the calibration it used;
    usage on records up to that one is ignored, and the stored calibration stands in until
    the resumed session has produced fresh numbers.
    """
    prior: Calibration | None = None
    prior_tokens: int | None = None
    stale_uuid: str | None = None
    session = conversation.session
    for rec in session.records:
        if rec.type == REWRITE_RECORD:
            note = tail.rewrite_note(session.parse(rec))
            if note is None:
                continue
            prior = None
            if None not in (note.chars_per_token, note.overhead_tokens, note.tokens_after):
                assert note.chars_per_token is not None and note.overhead_tokens is not None
                prior = Calibration(note.chars_per_token, note.overhead_tokens, measured=True)
                prior_tokens = note.tokens_after
            stale_uuid = note.last_record_uuid
    stale_until = -1
    if stale_uuid is not None:
        for pos, rec in enumerate(conversation.records):
            if rec.uuid == stale_uuid:
                stale_until = pos
    points: list[tuple[int, int]] = []
    seen: set[str] = set()
    chars = 0
    for pos, rec in enumerate(conversation.records):
        if rec.type == "assistant" and rec.context_tokens and rec.message_id not in seen:
            seen.add(rec.message_id or "")
            if pos > stale_until:
                points.append((chars, rec.context_tokens))
        chars += total_chars(rec)
    return _Usage(points, prior, prior_tokens)


def context_size(conversation: Conversation) -> int | None:
    """The context of the last API call on this file's own history (None if unknown)."""
    usage = _usage(conversation)
    if usage.points:
        return usage.points[-1][1]
    return usage.prior_tokens


def calibrate(conversation: Conversation) -> Calibration:
    return measure(conversation)[0]


def measure(conversation: Conversation) -> tuple[Calibration, int | None]:
    """The calibration and the context size, from one pass over the usage numbers."""
    usage = _usage(conversation)
    context = usage.points[-1][1] if usage.points else usage.prior_tokens
    return _calibrate(usage), context


def _calibrate(usage: _Usage) -> Calibration:
    points, prior = usage.points, usage.prior
    ratio = prior.chars_per_token if prior is not None else DEFAULT_CHARS_PER_TOKEN
    if not points:
        return prior or Calibration()
    first, last = points[0], points[-1]
    if last[0] - first[0] >= 4000 and last[1] > first[1]:
        ratio = min(max((last[0] - first[0]) / (last[1] - first[1]), 2.0), 6.0)
    else:
        first = last  # one usable point: trust the ratio we have, fit the overhead
    overhead = int(first[1] - first[0] / ratio)
    return Calibration(ratio, min(max(overhead, 0), 80_000), measured=True)


@dataclass(frozen=True, slots=True)
class Estimate:
    by_category: dict[str, int]  # tokens
    overhead: int

    @property
    def total(self) -> int:
        return self.overhead + sum(self.by_category.values())


def estimate(records: tuple[Record, ...] | list[Record], calibration: Calibration) -> Estimate:
    chars = dict.fromkeys(CATEGORIES, 0)
    for rec in records:
        for name, value in record_chars(rec).items():
            chars[name] += value
    return Estimate(
        {name: calibration.tokens(value) for name, value in chars.items()},
        calibration.overhead_tokens,
    )
