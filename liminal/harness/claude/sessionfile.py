"""Indexing a Claude Code session file (JSONL) as the CLI writes it.

The session file holds what frames do not: exact usage per API call and the full tool outputs
(``toolUseResult``), which recall needs. The watcher reads only complete lines (a line without
its newline is still being written), from a remembered offset: where the store says indexing of
that file stopped, so a restart picks up where it left off and re-reading a line is a no-op (a
record's id is its file and byte offset). ``watchfiles`` wakes it when the file changes.

liminal's own writes (a swap or a cut writes the new file before the CLI appends to it) are
indexed too, marked as liminal's (``SessionRecord.own``): the lines before ``own_bytes``, the size
of what liminal wrote (``rewrites.jsonl``, ``liminal.ingest.rewrites``). They are copies of lines
indexed from the older file, so search leaves them out; but the recall keys of the next rewrite
name this session and records liminal copied into it, and a key must resolve from the store
once the files are gone (docs/gradient.md, "Recall").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import orjson

from liminal import log
from liminal.harness.claude.records import loads
from liminal.store.base import Store
from liminal.store.records import Batch, SessionRecord

logger = log.get("liminal.harness.claude.sessionfile")
MAX_LINE = 64 * 1024 * 1024
READ_BYTES = 8 * 1024 * 1024


def _text_of(content: Any, tool_ids: list[str]) -> Iterable[str]:
    if isinstance(content, str):
        yield content
        return
    if not isinstance(content, list):
        return
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            yield str(block.get("text", ""))
        elif kind == "thinking":
            yield str(block.get("thinking", ""))
        elif kind == "tool_use":
            tool_ids.append(str(block.get("id", "")))
            yield f"{block.get('name', '')} {orjson.dumps(block.get('input')).decode()}"
        elif kind == "tool_result":
            tool_ids.append(str(block.get("tool_use_id", "")))
            yield from _text_of(block.get("content"), [])


# Which of Claude Code's lines are the conversation: what the person and the model said and what
# tools returned (the CLI's other lines are its bookkeeping: ``api-request-blob`` holds a copy of
# every message sent, ``attachment`` what it injected, ``last-prompt``, ``queue-operation`` ...).
# A prompt line the CLI wrote itself (``isMeta``: a caveat, a skill's text; ``isCompactSummary``:
# its own compaction's summary) is typed apart when indexed (``user:meta``, ``user:summary``).
CONVERSATION_TYPES = frozenset({"user", "assistant"})


def record_role(record_type: str | None, tool_ids: Sequence[str]) -> str | None:
    """Who a record of ``CONVERSATION_TYPES`` speaks for; None for the CLI's bookkeeping."""
    if record_type == "user":
        return "tool output" if tool_ids else "you"
    if record_type == "assistant":
        return "tool call" if tool_ids else "model"
    return None


def _type_of(obj: dict[str, Any]) -> str | None:
    kind = _opt_str(obj.get("type"))
    if kind == "user" and obj.get("isCompactSummary") is True:
        return "user:summary"
    if kind == "user" and obj.get("isMeta") is True:
        return "user:meta"
    return kind


def parse_line(raw: bytes, backing_id: str, thread_id: str | None, offset: int) -> SessionRecord:
    """One JSONL line as a record; a line that is not a JSON object is kept with no fields."""
    rid = SessionRecord.make_id(backing_id, offset)
    try:  # the stdlib's reading too: orjson refuses a lone surrogate, which the CLI writes
        obj: Any = loads(raw)
    except (ValueError, UnicodeDecodeError):
        obj = None
    if not isinstance(obj, dict):
        return SessionRecord(rid, backing_id, thread_id, offset, None, None, None, None, (), "",
                             raw)
    tool_ids: list[str] = []
    parts: list[str] = []
    message = obj.get("message")
    usage = None
    if isinstance(message, dict):
        parts.extend(_text_of(message.get("content"), tool_ids))
        if isinstance(message.get("usage"), dict):
            usage = message["usage"]
    result = obj.get("toolUseResult")
    if result is not None:  # the structured, often larger, copy of a tool's output
        if isinstance(result, dict):
            for key in ("stdout", "stderr", "content", "output"):
                value = result.get(key)
                if isinstance(value, str) and value not in parts:
                    parts.append(value)
            file = result.get("file")
            if isinstance(file, dict) and isinstance(file.get("content"), str):
                parts.append(file["content"])
        elif isinstance(result, str) and result not in parts:
            parts.append(result)
    for key in ("summary", "title", "customTitle", "aiTitle", "content"):
        value = obj.get(key)
        if isinstance(value, str):
            parts.append(value)
    return SessionRecord(
        rid, backing_id, thread_id, offset, _opt_str(obj.get("uuid")), _type_of(obj),
        _opt_str(obj.get("timestamp")), usage, tuple(t for t in tool_ids if t),
        "\n".join(p for p in parts if p), raw)


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def read_complete_lines(path: Path, offset: int,
                        max_bytes: int = READ_BYTES) -> tuple[list[tuple[int, bytes]], int]:
    """Complete lines from ``offset`` (about ``max_bytes`` at most) and the offset after them.

    A line longer than ``MAX_LINE`` is cut to its head and skipped past, so one runaway line
    cannot hold the indexer's memory hostage."""
    lines: list[tuple[int, bytes]] = []
    pos = offset
    with open(path, "rb") as f:
        f.seek(pos)
        while pos - offset < max_bytes:
            line = f.readline(MAX_LINE)
            if not line.endswith(b"\n"):
                if len(line) < MAX_LINE:
                    break  # still being written
                head, skipped = line, len(line)
                while not line.endswith(b"\n"):
                    line = f.readline(MAX_LINE)
                    if not line:
                        return lines, pos  # the runaway line is not finished yet
                    skipped += len(line)
                lines.append((pos, head))
                pos += skipped
                continue
            lines.append((pos, line[:-1]))
            pos += len(line)
    return lines, pos


class SessionFileIndexer:
    def __init__(self, store: Store, path: Path, backing_id: str, thread_id: str | None = None,
                 *, own_bytes: int = 0,
                 parse: Callable[[bytes, str, str | None, int], SessionRecord] = parse_line,
                 quarantine: Path | None = None) -> None:
        """``parse`` makes a record of a line: Claude Code's by default (a Codex rollout's is
        ``liminal.harness.codex.records.parse_line``); the tailing is the same for both.
        ``own_bytes``: how much of the file liminal wrote (its lines are marked as liminal's).
        ``quarantine``: where a line the store refuses even cut is set aside."""
        self.parse = parse
        self.quarantine = quarantine
        self.store = store
        self.path = path
        self.backing_id = backing_id
        self.thread_id = thread_id
        self.own_bytes = own_bytes
        self.offset: int | None = None
        self.indexed = 0

    async def _start(self) -> int:
        """Where to go on: where the store says indexing stopped. A store indexed by a liminal
        that skipped its own bytes has the CLI's lines of a rewrite and not liminal's: then the
        file is read again from its start (lines already there are written again, unchanged)."""
        end = await self.store.session_file_end(self.backing_id)
        if 0 < self.own_bytes <= end:
            first = await self.store.session_records(self.backing_id, limit=1)
            if not first or first[0].offset > 0:
                return 0
        return end

    async def catch_up(self) -> int:
        """Index every complete line not indexed yet; returns how many were."""
        if self.offset is None:
            self.offset = await self._start()
        total = 0
        while True:
            try:
                size = self.path.stat().st_size
            except FileNotFoundError:
                return total
            if size < self.offset:
                logger.warning("session file shrank; indexing it again", path=str(self.path))
                self.offset = 0
            lines, end = await anyio.to_thread.run_sync(read_complete_lines, self.path,
                                                        self.offset)
            if not lines:
                return total
            records = [self._record(raw, at) for at, raw in lines]
            # One line the store refuses as parsed (a lone surrogate, an integer past 64 bits,
            # nesting past orjson's 254 levels, a record past its size limit) failed the batch
            # at every change: the file's indexing stopped there for good. Such values are made
            # storable, cut or set aside instead (``liminal.ingest.poison``).
            from liminal.ingest.poison import write_batch

            await write_batch(self.store, Batch(session_records=records),
                              quarantine=self.quarantine)
            self.offset = end
            total += len(records)
            self.indexed += len(records)

    def _record(self, raw: bytes, offset: int) -> SessionRecord:
        """The line as a record; one the parser cannot read (JSON too deep to write again) is
        kept like a line that is not JSON: its bytes, no fields. A line liminal wrote is marked
        so, without text: search finds the line it was copied from."""
        try:
            record = self.parse(raw, self.backing_id, self.thread_id, offset)
        except Exception as exc:
            logger.warning("session line kept unparsed", path=str(self.path), offset=offset,
                           error=f"{type(exc).__name__}: {exc}"[:200])
            record = SessionRecord(SessionRecord.make_id(self.backing_id, offset), self.backing_id,
                                   self.thread_id, offset, None, None, None, None, (), "", raw)
        return replace(record, own=True, text="") if offset < self.own_bytes else record

    async def run(self, stop: anyio.Event | None = None) -> None:
        """Catch up, then again every time the file changes, until ``stop`` is set."""
        import watchfiles

        await self._catch_up_or_log()
        async for changes in watchfiles.awatch(self.path.parent, stop_event=stop,
                                               debounce=100, step=50, recursive=False):
            if any(Path(p) == self.path for _, p in changes):
                await self._catch_up_or_log()

    async def _catch_up_or_log(self) -> None:
        """A failure (the store down, the file unreadable) waits for the next change: it must
        not take the watcher, and with it the index worker, down."""
        try:
            await self.catch_up()
        except Exception as exc:
            logger.warning("session file indexing failed; will retry on next change",
                           path=str(self.path), error=str(exc))


@dataclass(frozen=True, slots=True)
class ModelCall:
    t: float  # seconds since the epoch
    uncached: int
    cache_read: int
    cache_write: int
    output: int

    @property
    def input(self) -> int:
        """The whole prompt."""
        return self.uncached + self.cache_read + self.cache_write


def model_calls(records: Sequence[SessionRecord]) -> list[ModelCall]:
    """The model calls a session's records show, oldest first. Claude Code writes one line per
    content block of a response, each with the response's usage: a run of lines with the same
    usage is one call."""
    calls: list[ModelCall] = []
    previous: dict[str, Any] | None = None
    for record in sorted(records, key=lambda r: (r.time or "", r.offset)):
        usage = record.usage
        if record.type != "assistant" or not isinstance(usage, dict) or usage == previous:
            continue
        previous = usage
        try:
            t = datetime.fromisoformat((record.time or "").replace("Z", "+00:00")).timestamp()
            calls.append(ModelCall(t, int(usage.get("input_tokens") or 0),
                                   int(usage.get("cache_read_input_tokens") or 0),
                                   int(usage.get("cache_creation_input_tokens") or 0),
                                   int(usage.get("output_tokens") or 0)))
        except (TypeError, ValueError):
            continue
    return calls
