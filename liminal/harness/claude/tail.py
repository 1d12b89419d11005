"""Cheap questions about a live Claude Code session file, answered from its tail.

The swap manager asks them at every turn end, so they must not parse a 40 MB file: they read
the last few hundred KiB backwards and stop at the first record that answers.

Seen on loopback (see docs/facts.md): Claude Code 2.1.44 writes ``stop_reason: null`` on every
assistant line, so "the turn is finished" cannot be read from ``stop_reason``; and it writes a
turn's records *after* the adapter has answered the ACP prompt, so at the turn's end the file
may still end, cleanly, with the previous turn. "This turn is on disk" is therefore read from
the shape and the content: the last prompt record is the prompt the client sent, an assistant
line without a ``tool_use`` follows it (a turn never ends on a tool call), every line is
complete, and the size has held still since the previous look. 2.1.316 appends bookkeeping
records (``last-prompt``, ``cost-state``, ``mode``) after the answer; the stillness check
waits for those.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from liminal.harness.claude.paths import open_regular
from liminal.harness.claude.records import INTERRUPTED, loads
from liminal.sessionfiles import HeldStill

# How the line of a slash command's output begins (Claude Code 2.1.44 and 2.1.316).
COMMAND_OUTPUT = "<local-command-stdout>"

TAIL_BYTES = 512 * 1024


def _tail_records(path: Path, limit: int = TAIL_BYTES) -> Iterator[dict[str, Any]]:
    """Complete records from the end of the file backwards (a torn last line is skipped)."""
    with open_regular(path) as f:
        size = f.seek(0, os.SEEK_END)
        start = max(0, size - limit)
        f.seek(start)
        data = f.read()
    lines = data.split(b"\n")
    if start > 0:
        lines = lines[1:]  # the first piece is probably the end of a longer line
    for line in reversed(lines):
        if not line.strip():
            continue
        try:  # the stdlib's reading too: orjson refuses a lone surrogate, which the CLI writes
            value = loads(line)
        except (ValueError, UnicodeDecodeError):
            continue
        yield value


def _message(record: dict[str, Any]) -> dict[str, Any]:
    """The record's ``message``, or an empty one when it holds something else: a line of any
    shape is a line that says nothing, never an error."""
    message = record.get("message")
    return message if isinstance(message, dict) else {}


REWRITE_RECORD = "liminal-rewrite"  # the first line of a file liminal's gradient wrote


@dataclass(frozen=True, slots=True)
class RewriteNote:
    """What a rewrite says of itself. The records it kept unchanged carry usage measured on the
    longer original history, stale here: usage on records up to ``last_record_uuid`` (the last
    one it wrote) does not describe this file, and ``tokens_after`` stands in until the
    resumed session has made a model call of its own. The one rule for every reader of usage
    (``tokens._usage`` over a whole file, ``context_tokens`` over its tail)."""

    last_record_uuid: str | None
    tokens_after: int | None
    chars_per_token: float | None
    overhead_tokens: int | None


def rewrite_note(record: Any) -> RewriteNote | None:
    """The note, if ``record`` is one (values of the wrong type read as unknown)."""
    if not isinstance(record, dict) or record.get("type") != REWRITE_RECORD:
        return None

    def number(key: str, kind: type[int] | type[float]) -> Any:
        value = record.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        return kind(value)

    last = record.get("lastRecordUuid")
    return RewriteNote(last if isinstance(last, str) else None, number("tokensAfter", int),
                       number("charsPerToken", float), number("overheadTokens", int))


def _first_record(path: Path) -> Any:
    with open_regular(path) as f:
        line = f.readline(TAIL_BYTES)
    try:
        return loads(line)
    except (ValueError, UnicodeDecodeError):
        return None


def context_tokens(path: Path) -> int | None:
    """The context the model last saw: the newest main-chain assistant usage (see FACTS.md),
    except usage a rewrite carried over (``RewriteNote``)."""
    note = rewrite_note(_first_record(path))
    for limit in (TAIL_BYTES, 8 * TAIL_BYTES):
        for record in _tail_records(path, limit):
            if note is not None and note.last_record_uuid is not None \
                    and record.get("uuid") == note.last_record_uuid:
                return note.tokens_after  # everything from here back is the rewrite's, stale
            if record.get("type") == "system" and record.get("subtype") == "compact_boundary":
                return None
            if record.get("type") != "assistant" or record.get("isSidechain"):
                continue
            usage = _message(record).get("usage")
            if isinstance(usage, dict):
                total = 0
                for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
                    value = usage.get(key)
                    if isinstance(value, int):
                        total += value
                return total
    return note.tokens_after if note is not None else None


# How long the API keeps a prompt cache entry unused, by the ``usage.cache_creation`` field that
# says the call wrote one of them (the Messages API's ``ephemeral_<ttl>_input_tokens``).
CACHE_LIVES = (("ephemeral_1h_input_tokens", 3600.0), ("ephemeral_5m_input_tokens", 300.0))


def _written_life(usage: Any) -> float | None:
    """The life of the cache this call wrote, or None: it wrote none, or the usage does not
    say which (Claude Code 2.1.44 writes no ``cache_creation``)."""
    split = usage.get("cache_creation") if isinstance(usage, dict) else None
    if not isinstance(split, dict):
        return None
    for key, seconds in CACHE_LIVES:
        tokens = split.get(key)
        if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0:
            return seconds
    return None


def cache_life(path: Path) -> float | None:
    """How long the model's prompt cache of this session lives unused (seconds), as the usage
    of the newest main-chain call that wrote to it says: the server's answer, which is the
    truth whatever the CLI asked for (it may ask for an hour and be given 5 minutes). A call
    that only read the cache says nothing; an older one may. Usage a rewrite carried over is
    the same CLI's, on the same account, and counts: the life is no property of the context,
    so neither a rewrite's records nor a compaction's boundary stops the search."""
    for limit in (TAIL_BYTES, 8 * TAIL_BYTES):
        for record in _tail_records(path, limit):
            if record.get("type") != "assistant" or record.get("isSidechain"):
                continue
            life = _written_life(_message(record).get("usage"))
            if life is not None:
                return life
    return None


def _prompt_text(record: dict[str, Any]) -> str | None:
    """The text a person typed, if this is a prompt record (not a tool result or a reminder)."""
    if record.get("type") != "user" or record.get("isSidechain") or record.get("isMeta") \
            or record.get("isCompactSummary") or _interruption(record):
        return None
    content = _message(record).get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts = [b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text"
             and isinstance(b.get("text"), str) and not b["text"].startswith("<system-reminder>")]
    if not texts or any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
        return None
    return "\n".join(texts)


def _interruption(record: dict[str, Any]) -> bool:
    """The line Claude Code writes when the user cancels a turn: the turn ended there."""
    content = _message(record).get("content")
    texts = [content] if isinstance(content, str) else [
        b.get("text") for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    return len(texts) == 1 and isinstance(texts[0], str) and texts[0].startswith(INTERRUPTED)


def _command_output(record: dict[str, Any]) -> bool:
    """The line in which Claude Code says what a slash command it ran itself printed (after
    ``/compact``: its boundary, its summary, the command's line, then this one)."""
    content = _message(record).get("content")
    text = content if isinstance(content, str) else next(
        (b.get("text") for b in content if isinstance(b, dict)), None) if isinstance(content, list) else None
    return isinstance(text, str) and text.startswith(COMMAND_OUTPUT)


def _squash(text: str) -> str:
    return " ".join(text.split())


def ends_a_turn(path: Path, prompt: str | None = None) -> bool:
    """Every line is complete and the last conversational record is a finished answer, or the
    summary of a compaction with no turn after it (an ``/undo`` took out the one turn a swap
    left after its preamble: no turn is under way).

    With ``prompt``, also that answer follows the last prompt record, and that record is this
    prompt: the turn that just ended is on disk, not only the one before it.
    """
    with open_regular(path) as f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return False
        f.seek(size - 1)
        if f.read(1) != b"\n":
            return False
    answered = False
    for record in _tail_records(path):
        kind = record.get("type")
        if kind not in ("user", "assistant") or record.get("isSidechain"):
            continue
        if not answered:
            if kind == "user" and record.get("isCompactSummary") is True:
                return not prompt
            if kind == "user" and _command_output(record):
                answered = True  # a slash command the CLI ran itself (/compact): its turn ended
                if not prompt:
                    return True
                continue
            if kind == "user" and not _interruption(record):
                return False
            content = _message(record).get("content")
            if isinstance(content, list) and any(
                isinstance(b, dict) and b.get("type") == "tool_use" for b in content
            ):
                return False
            answered = True
            if not prompt:
                return True
            continue
        typed = _prompt_text(record)
        if typed is not None:
            assert prompt is not None
            return _squash(prompt)[:200] in _squash(typed)
    return answered and not prompt


class SettleWatch:
    """``settled(path, prompt)``: the file ends with this turn and has not grown since the last look."""

    def __init__(self) -> None:
        self._still = HeldStill()

    def settled(self, path: Path, prompt: str | None = None) -> bool:
        return self._still.held_still(path) and ends_a_turn(path, prompt)
