"""Tailing a CLI's session file (JSONL) into the store as the CLI writes it (a part of the indexer).

The watcher reads only complete lines (a line without its newline is still being written), from
a remembered offset: where the store says indexing of that file stopped, so a restart picks up
where it left off and re-reading a line is a no-op (a record's id is its file and byte offset).
``watchfiles`` wakes it when the file changes. Each line becomes a record by its CLI's parser
(``liminal.harness.known.line_parser``): the tailing is the same for every CLI.

liminal's own writes (a swap or a cut writes the new file before the CLI appends to it) are
indexed too, marked as liminal's (``SessionRecord.own``): the lines before ``own_bytes``, the size
of what liminal wrote (``rewrites.jsonl``, ``liminal.ingest.rewrites``). They are copies of lines
indexed from the older file, so search leaves them out; but the recall keys of the next rewrite
name this session and records liminal copied into it, and a key must resolve from the store
once the files are gone (docs/gradient.md, "Recall").

A line may refer to a file the CLI keeps beside the session (Claude Code's large tool outputs,
``<id>/tool-results/``: the line holds only a preview). Its harness says which
(``SessionHarness.beside_in``) and where it is; the file's bytes are stored before the line, as
one session record under the file's key (``Beside.store_key``) and the thread's id, in parts
where large like any raw bytes, at most ``MAX_BESIDE`` of them: so the store never has such a
line without its file, ``liminal.kernel.restore`` writes both back, and recall gives the whole
output with the file gone. Claude Code writes the file before the model is sent the preview,
and the line after (docs/facts.md): when the line is read, the file is whole.

Here, not beside Claude Code's line parser: it writes through the indexer's
``liminal.ingest.poison.write_batch``, and the harness may not import the indexer (the floors:
docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

import anyio

from liminal import log
from liminal.harness.base import Beside, SessionHarness
from liminal.harness.known import LineParser, harness_of, line_parser
from liminal.ingest.poison import write_batch
from liminal.store.base import Store
from liminal.store.records import Batch, SessionRecord

logger = log.get("liminal.ingest.tail")
MAX_LINE = 64 * 1024 * 1024
READ_BYTES = 8 * 1024 * 1024
# A file beside a session larger than a line may be is not kept (read whole into the worker's
# memory, written as one record): its line is, and a restore writes the session without it.
MAX_BESIDE = MAX_LINE


def read_bounded(path: Path, max_bytes: int) -> bytes | None:
    """The regular file's bytes, or None when it is larger than ``max_bytes``."""
    from liminal.sessionfiles import open_regular

    with open_regular(path) as handle:
        data = handle.read(max_bytes + 1)
    return None if len(data) > max_bytes else data


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
                 *, quarantine: Path, own_bytes: int = 0, harness: SessionHarness | None = None,
                 relocate: Callable[[], Path | None] | None = None) -> None:
        """A line becomes a record by the parser of the CLI whose file ``path`` is
        (``liminal.harness.known.line_parser``); the tailing is the same for all.
        ``harness``: the CLI's, which says what files beside the session a line refers to (by
        default the one whose file ``path`` is).
        ``own_bytes``: how much of the file liminal wrote (its lines are marked as liminal's).
        ``quarantine``: where a line the store refuses even cut is set aside.
        ``relocate``: where the session's file is now, when ``path`` is gone (a CLI's file
        written again under another name before a load, ``Rewriting.prepare_load``: the lines
        indexed are its start, so indexing goes on there)."""
        self.parse: LineParser = line_parser(path)
        self.harness = harness or harness_of(path)
        self._kept: set[Beside] = set()  # files beside the session stored by this watcher
        self.quarantine = quarantine
        self.store = store
        self.path = path
        self.backing_id = backing_id
        self.thread_id = thread_id
        self.own_bytes = own_bytes
        self.offset: int | None = None
        self.indexed = 0
        self._relocate = relocate

    def _moved(self) -> bool:
        """``path`` is gone and the session's file is elsewhere now: followed."""
        found = self._relocate() if self._relocate is not None else None
        if found is None or found == self.path:
            return False
        logger.info("session file moved; indexing goes on there", old=str(self.path), path=str(found))
        self.path = found
        return True

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
                if await anyio.to_thread.run_sync(self._moved):
                    continue
                return total
            if size < self.offset:
                logger.warning("session file shrank; indexing it again", path=str(self.path))
                self.offset = 0
            lines, end = await anyio.to_thread.run_sync(read_complete_lines, self.path,
                                                        self.offset)
            if not lines:
                return total
            records = [self._record(raw, at) for at, raw in lines]
            await self._keep_beside(raw for _, raw in lines)  # first: no line without its file
            # One line the store refuses as parsed (a lone surrogate, an integer past 64 bits,
            # nesting past orjson's 254 levels, a record past its size limit) would fail the
            # batch at every change: the file's indexing would stop there for good. Such values are made
            # storable, cut or set aside instead (``liminal.ingest.poison``).
            await write_batch(self.store, Batch(session_records=records), quarantine=self.quarantine)
            self.offset = end
            total += len(records)
            self.indexed += len(records)

    async def _keep_beside(self, lines: Iterable[bytes]) -> None:
        """Store each file beside a session that ``lines`` refer to, one record per batch (each
        at most ``MAX_BESIDE`` in memory). A file that is gone, too large or unreadable is said
        and left, and so is a line the harness cannot read: the lines are still stored (a
        failure here must not stop the session's indexing at that line for good)."""
        for ref in dict.fromkeys(ref for raw in lines for ref in self._named(raw)):
            if ref in self._kept:
                continue
            self._kept.add(ref)
            path = self.harness.beside_path(ref, self.path)
            why, data = "gone", None
            if path is not None:
                try:
                    data = await anyio.to_thread.run_sync(read_bounded, path, MAX_BESIDE)
                    why = f"larger than {MAX_BESIDE} bytes"
                except OSError as exc:
                    why = f"unreadable: {exc}"
            if data is None:
                logger.warning("file beside a session not kept", reason=why, session=ref.session_id,
                               name=ref.name, thread=self.thread_id)
                continue
            record = SessionRecord(ref.record_id(self.thread_id), ref.store_key, self.thread_id, 0,
                                   None, None, None, None, (), "", data)
            try:
                await write_batch(self.store, Batch(session_records=[record]),
                                  quarantine=self.quarantine)
            except BaseException:
                self._kept.discard(ref)  # the store failed: tried again with the lines
                raise

    def _named(self, raw: bytes) -> tuple[Beside, ...]:
        try:
            return self.harness.beside_in(raw)
        except Exception as exc:
            logger.warning("session line not read for files beside it", path=str(self.path),
                           error=f"{type(exc).__name__}: {exc}"[:200])
            return ()

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
            if any(Path(p) == self.path for _, p in changes) or not self.path.exists():
                await self._catch_up_or_log()

    async def _catch_up_or_log(self) -> None:
        """A failure (the store down, the file unreadable) waits for the next change: it must
        not take the watcher, and with it the index worker, down."""
        try:
            await self.catch_up()
        except Exception as exc:
            logger.warning("session file indexing failed; will retry on next change",
                           path=str(self.path), error=str(exc))
