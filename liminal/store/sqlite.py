"""The embedded default store: one SQLite file in WAL mode, FTS5 for search.

Why it is shaped this way:

* Blocking calls never run on the event loop: every call goes through ``anyio.to_thread``.
  There is exactly one writer (a lock around the write connection) and each ``Batch`` is one
  transaction, which is what makes tens of thousands of frames a second cheap. Readers use their
  own connection; WAL lets them read while the writer writes.
* FTS5 is probed when the store opens. Where the platform's SQLite lacks it, search falls back
  to ``LIKE`` over the same text (slower, unranked) and says so once in the log and in
  ``search_mode``; nothing else changes.
* The full-text tables are external-content FTS5 tables kept in step by triggers, so a message
  that grows (agent text arriving in chunks) is re-indexed in the same transaction that grows it.
* No string or blob may pass ``SQLITE_MAX_LENGTH`` (1e9 bytes by default, and a row no more):
  a frame's or a session line's raw bytes past ``INLINE_BYTES`` (or half the connection's limit)
  go to ``parts`` in pieces, and the record's ``raw`` is left empty. A 1.5 GB streamed answer
  failed its batch with "string or blob too big" at every retry. Bound in pieces, a value is
  never copied whole by SQLite either. Anything else the database refuses as such (a text past
  the limit, a value it cannot bind) is ``StoreRefused``; the writer cuts or sets it aside
  (``liminal.ingest.poison``).
"""

from __future__ import annotations

import io
import os
import sqlite3
import stat
import threading
import unicodedata
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import orjson

from liminal import log
from liminal.errors import in_words
from liminal.store import compaction
from liminal.store.base import (
    Census,
    MoveLog,
    StoreError,
    StoreRefused,
    ToolCallPlace,
    digest,
    fts_terms,
    head,
    place_tool_records,
    ranked,
    seconds,
    snippet,
    within,
)
from liminal.store.records import (
    DELETED,
    HISTORY_KINDS,
    LOAD,
    OWNED_ELSEWHERE,
    TO_LIMINAL,
    Batch,
    FrameRecord,
    MessageRecord,
    SearchHit,
    SessionRecord,
    Thread,
    ThreadSummary,
    ThreadUpdate,
    context_now,
    merge_thread,
    one_row_per_thread,
    summarised,
)
from liminal.store.sqlitemoves import SqliteMoves
from liminal.store.sqlitemoves import forget as forget_moves

T = TypeVar("T")
SCHEMA_VERSION = 1
# Raw bytes longer than this (or than half the connection's SQLITE_LIMIT_LENGTH) are stored in
# ``parts`` of ``PART_BYTES``: frames up to the default ``proxy.max_frame_bytes`` stay inline.
INLINE_BYTES = 64 * 1024 * 1024
PART_BYTES = 16 * 1024 * 1024
# SQLite's primary result codes that refuse what was written, not the write: SQLITE_TOOBIG,
# SQLITE_CONSTRAINT, SQLITE_MISMATCH, SQLITE_RANGE. The others (busy, locked, full, I/O,
# read-only, corrupt ...) are the database failing, and a write is tried again later.
_REFUSING_CODES = {18, 19, 20, 25}

# Made with the schema, or by the writer in a database made before it, when it first stores a
# record in parts (``_write_parts``, in its transaction: one statement).
_PARTS = ("CREATE TABLE IF NOT EXISTS parts (owner TEXT NOT NULL, n INTEGER NOT NULL, "
          "data BLOB NOT NULL, PRIMARY KEY (owner, n))")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS frames (
    id TEXT NOT NULL UNIQUE, connection_id TEXT NOT NULL, seq INTEGER NOT NULL,
    time REAL NOT NULL, direction TEXT NOT NULL, kind TEXT NOT NULL,
    thread_id TEXT, backing_id TEXT, method TEXT, rpc_id TEXT, size INTEGER NOT NULL,
    raw BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS frames_thread ON frames (thread_id, time);
CREATE TABLE IF NOT EXISTS messages (
    id TEXT NOT NULL UNIQUE, thread_id TEXT NOT NULL, turn_id TEXT, time REAL NOT NULL,
    ord TEXT NOT NULL, kind TEXT NOT NULL, text TEXT NOT NULL, tool_call_id TEXT, status TEXT,
    data TEXT NOT NULL, replayed INTEGER NOT NULL, backing_id TEXT);
CREATE INDEX IF NOT EXISTS messages_thread ON messages (thread_id, ord);
CREATE INDEX IF NOT EXISTS messages_kind ON messages (thread_id, kind);
CREATE INDEX IF NOT EXISTS messages_tool ON messages (tool_call_id);
CREATE TABLE IF NOT EXISTS threads (
    id TEXT PRIMARY KEY, title TEXT NOT NULL, cwd TEXT NOT NULL, harness TEXT NOT NULL,
    state TEXT NOT NULL, backing_ids TEXT NOT NULL, created REAL NOT NULL, updated REAL NOT NULL,
    named INTEGER NOT NULL DEFAULT 0, titled INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS session_records (
    id TEXT NOT NULL UNIQUE, backing_id TEXT NOT NULL, thread_id TEXT, offset INTEGER NOT NULL,
    uuid TEXT, type TEXT, time TEXT, usage TEXT, tool_ids TEXT NOT NULL, text TEXT NOT NULL,
    raw BLOB NOT NULL, own INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS session_records_file ON session_records (backing_id, offset);
""" + _PARTS + ";\n"


def _fts(index: str, table: str, prefix: str) -> str:
    """An external-content FTS5 index over ``table.text``, kept in step by triggers."""
    return f"""
CREATE VIRTUAL TABLE IF NOT EXISTS {index} USING fts5(text, content='{table}', content_rowid='rowid');
CREATE TRIGGER IF NOT EXISTS {prefix}_ai AFTER INSERT ON {table} BEGIN
    INSERT INTO {index} (rowid, text) VALUES (new.rowid, new.text); END;
CREATE TRIGGER IF NOT EXISTS {prefix}_ad AFTER DELETE ON {table} BEGIN
    INSERT INTO {index} ({index}, rowid, text) VALUES ('delete', old.rowid, old.text); END;
CREATE TRIGGER IF NOT EXISTS {prefix}_au AFTER UPDATE OF text ON {table} BEGIN
    INSERT INTO {index} ({index}, rowid, text) VALUES ('delete', old.rowid, old.text);
    INSERT INTO {index} (rowid, text) VALUES (new.rowid, new.text); END;
"""


_FTS = _fts("messages_fts", "messages", "messages") + _fts("session_fts", "session_records", "session")

_FRAME_COLS = "id, connection_id, seq, time, direction, kind, thread_id, backing_id, method, rpc_id, size, raw"
_MESSAGE_COLS = "id, thread_id, turn_id, time, ord, kind, text, tool_call_id, status, data, replayed, backing_id"
_SESSION_COLS = "id, backing_id, thread_id, offset, uuid, type, time, usage, tool_ids, text, raw"
# (``own`` is read through ``_own``: a database made before it has no such column.)
_THREAD_COLS = "id, title, cwd, harness, state, backing_ids, created, updated"


def fts5_available() -> bool:
    try:
        with sqlite3.connect(":memory:") as probe:
            probe.execute("CREATE VIRTUAL TABLE probe USING fts5(x)")
        return True
    except sqlite3.OperationalError:
        return False


def _ready(conn: sqlite3.Connection, fts: bool) -> bool:
    """Whether the schema is already there (checked by reading, so a busy writer elsewhere
    does not make opening wait)."""
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    if "meta" not in names or (fts and "messages_fts" not in names):
        return False
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return row is not None and row[0] == str(SCHEMA_VERSION)


def _add_indexes(conn: sqlite3.Connection) -> None:
    """Indexes added since a database was made, built by a process that writes (the index
    worker at its start), never by a reader such as ``liminal search``: building one on a big
    store takes a while and waits for the writer. A reader without them is slower, not wrong."""
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    if "messages_tool" not in names:
        conn.execute("CREATE INDEX IF NOT EXISTS messages_tool ON messages (tool_call_id)")


def _has_parts(conn: sqlite3.Connection) -> bool:
    """Whether the database has the ``parts`` table (one made before it has none until the
    writer adds it; with none, no record has parts)."""
    return conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'parts'").fetchone() is not None


def _join_parts(conn: sqlite3.Connection, owner: str) -> bytes:
    """The raw bytes of a record stored in parts (empty when it has none: its raw was empty).
    Joined as they are read, into one buffer that becomes the result: a 1.5 GB frame is held
    once, not once in pieces and again whole."""
    if not _has_parts(conn):
        return b""
    whole = io.BytesIO()
    for (data,) in conn.execute("SELECT data FROM parts WHERE owner = ? ORDER BY n", (owner,)):
        whole.write(data)
    return whole.getvalue()


def _parts_length(conn: sqlite3.Connection, owner: str) -> int:
    if not _has_parts(conn):
        return 0
    row = conn.execute("SELECT SUM(length(data)) FROM parts WHERE owner = ?", (owner,)).fetchone()
    return int(row[0] or 0)


def _refused(exc: BaseException) -> bool:
    """Whether SQLite refused what was written (``_REFUSING_CODES``) rather than failing. (A
    value that cannot be bound at all, text that is not UTF-8 or an integer past 64 bits, is
    not an ``sqlite3.Error``: ``SqliteStore.write`` takes it for a refusal itself.)"""
    if isinstance(exc, (sqlite3.DataError, sqlite3.IntegrityError)):
        return True
    if isinstance(exc, sqlite3.Error):
        return (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF in _REFUSING_CODES
    return False


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    # NORMAL in WAL: a commit survives a crash of liminal; an OS crash may lose the last
    # commits but never corrupts the database.
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=OFF")
    # A deleted row's bytes are overwritten, not left in the file's free pages: a thread the
    # person deleted must not be readable from the file. Some builds do this by default
    # (Debian's), others not (python.org's, macOS's).
    conn.execute("PRAGMA secure_delete=ON")
    return conn


class SqliteStore:
    backend = "sqlite"

    def __init__(self, path: Path, writer: sqlite3.Connection, reader: sqlite3.Connection,
                 fts: bool) -> None:
        self.path = path
        self._writer = writer
        self._reader = reader
        self._write_lock = threading.Lock()
        self._read_lock = threading.Lock()
        self.fts = fts
        self.search_mode = "fts5" if fts else "like"
        self._closed = False
        # Where threads are: several sidecars may record into one file (``liminal.store.sqlitemoves``).
        self.moves: MoveLog | None = SqliteMoves(
            lambda fn: self._run(self._write_lock, self._writer, fn), self._read)

    @classmethod
    async def open(cls, path: Path, *, create: bool = True,
                   fts: bool | None = None, readonly: bool = False) -> SqliteStore:
        """Open (creating if allowed) the database; ``fts=False`` forces the LIKE fallback.
        ``readonly``: an existing store, through connections SQLite itself keeps from writing
        (``mode=ro``, ``query_only``): ``write`` fails, nothing is created or changed (the
        dashboard)."""

        def _open() -> SqliteStore:
            if readonly:
                return cls._open_readonly(path, fts)
            if not path.exists() and not create:
                raise StoreError(f"no store at {path}")
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            _create_private(path)
            _make_private(path)
            writer = _connect(path)
            use_fts = fts5_available() if fts is None else fts
            if not _ready(writer, use_fts):  # only a new database is written to on open
                writer.executescript(_SCHEMA)
                if use_fts:
                    writer.executescript(_FTS)
                writer.execute(
                    "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)",
                    (str(SCHEMA_VERSION),),
                )
            elif create:
                _add_indexes(writer)
            return cls(path, writer, _connect(path), use_fts)

        try:
            store = await anyio.to_thread.run_sync(_open)
        except (sqlite3.Error, OSError) as exc:  # a folder, a file on the way, no permission
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise StoreError(f"cannot open {path}: {reason}") from exc
        if not store.fts:
            log.get("liminal.store").warning(
                "search degraded: this SQLite has no FTS5; using LIKE", path=str(path)
            )
        return store

    @classmethod
    def _open_readonly(cls, path: Path, fts: bool | None) -> SqliteStore:
        if not path.is_file():
            raise StoreError(f"no store at {path}")
        def connect() -> sqlite3.Connection:
            conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True,
                                   check_same_thread=False, isolation_level=None, timeout=30)
            conn.execute("PRAGMA query_only=ON")
            return conn

        conn = connect()
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        if "messages" not in names:
            conn.close()
            raise StoreError(f"{path} is not a liminal store (no messages table)")
        use_fts = ("messages_fts" in names and fts5_available()) if fts is None else fts
        # Two connections, as a writing store has: each is used under its own lock.
        return cls(path, connect(), conn, use_fts)

    async def _run(self, lock: threading.Lock, conn: sqlite3.Connection,
                   fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._closed:
            raise StoreError("store is closed")

        def call() -> T:
            with lock:
                return fn(conn)

        try:
            return await anyio.to_thread.run_sync(call)
        except sqlite3.Error as exc:
            raise StoreError(str(exc)) from exc

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await self._run(self._read_lock, self._reader, fn)

    # -- writing ------------------------------------------------------------------------------

    async def write(self, batch: Batch) -> None:
        if not batch:
            return
        try:
            await self._run(self._write_lock, self._writer, lambda c: _write(c, batch))
        except StoreError as exc:
            if exc.__cause__ is not None and _refused(exc.__cause__):
                raise StoreRefused(str(exc)) from exc.__cause__
            raise
        except (UnicodeError, OverflowError, ValueError, TypeError) as exc:
            raise StoreRefused(in_words(exc)) from exc

    # -- reading ------------------------------------------------------------------------------

    async def frames(self, *, connection_id: str | None = None, thread_id: str | None = None,
                     after_seq: int = -1, limit: int = 10_000,
                     max_bytes: int | None = None) -> list[FrameRecord]:
        where, args = ["seq > ?"], [after_seq]
        if connection_id is not None:
            where.append("connection_id = ?")
            args.append(connection_id)  # type: ignore[arg-type]
        if thread_id is not None:
            where.append("thread_id = ?")
            args.append(thread_id)  # type: ignore[arg-type]
        sql = (f"SELECT {_FRAME_COLS} FROM frames WHERE {' AND '.join(where)} "
               "ORDER BY time, connection_id, seq LIMIT ?")
        if connection_id is not None:
            sql = sql.replace("ORDER BY time, connection_id, seq", "ORDER BY seq")

        def read(c: sqlite3.Connection) -> list[FrameRecord]:
            count = limit
            if max_bytes is not None:  # their sizes first (no blob is read for its length)
                sizes = c.execute(sql.replace(_FRAME_COLS, "MAX(size, length(raw))"),
                                  (*args, limit)).fetchall()
                count = within(max_bytes, [row[0] for row in sizes])
            rows = c.execute(sql, (*args, count)).fetchall()
            # A frame stored in parts has no raw of its own (``_write``).
            return [FrameRecord(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7],
                                row[8], row[9], row[10], row[11] or _join_parts(c, f"frame:{row[0]}"))
                    for row in rows]

        return await self._read(read)

    async def frame_count(self) -> int:
        row = await self._read(lambda c: c.execute("SELECT COUNT(*) FROM frames").fetchone())
        return int(row[0])

    async def delete_thread(self, thread_id: str, sessions: Collection[str] = ()) -> int:
        def delete(c: sqlite3.Connection) -> int:
            gone = 0
            # One transaction: all of it, or nothing. (``with c:`` began none: the connection
            # is in autocommit, so a failure part way left the thread listed with its
            # messages gone and its frames and session lines kept.) The lineage is read inside
            # it, so a backing id another writer adds meanwhile is deleted too.
            c.execute("BEGIN IMMEDIATE")
            try:
                row = c.execute("SELECT backing_ids FROM threads WHERE id = ?", (thread_id,)).fetchone()
                backings = list(dict.fromkeys([thread_id, *(orjson.loads(row[0]) if row else []), *sessions]))
                marks = ", ".join("?" for _ in backings)
                if _has_parts(c):  # the parts of its frames and lines first, found by them
                    for owner, table in (("frame:", "frames"), ("session:", "session_records")):
                        c.execute(f"DELETE FROM parts WHERE owner IN (SELECT '{owner}' || id "
                                  f"FROM {table} WHERE thread_id = ? OR backing_id IN ({marks}))",
                                  (thread_id, *backings))
                # The model's summaries of it and its parts of lessons, kept under their own
                # pseudo-threads.
                summaries = [mid for mid, data in c.execute(
                    "SELECT id, data FROM messages WHERE thread_id IN (?, ?)", OWNED_ELSEWHERE).fetchall()
                    if summarised(orjson.loads(data)) == thread_id]
                for start in range(0, len(summaries), 500):  # within SQLite's variables limit
                    chunk = summaries[start:start + 500]
                    gone += c.execute(f"DELETE FROM messages WHERE id IN ({', '.join('?' for _ in chunk)})",
                                      chunk).rowcount
                for sql, args in (
                    ("DELETE FROM messages WHERE thread_id = ?", (thread_id,)),
                    (f"DELETE FROM frames WHERE thread_id = ? OR backing_id IN ({marks})", (thread_id, *backings)),
                    (f"DELETE FROM session_records WHERE thread_id = ? OR backing_id IN ({marks})",
                     (thread_id, *backings)),
                    # And a record an older liminal kept under a session of its lineage. Its
                    # tombstone stays: written first (``liminal.kernel.owned``), it keeps out
                    # every record of the thread still on its way while the rest goes.
                    (f"DELETE FROM threads WHERE id IN ({marks}) AND NOT (id = ? AND state = ?)",
                     (*backings, thread_id, DELETED)),
                ):
                    gone += c.execute(sql, args).rowcount
                gone += forget_moves(c, thread_id)  # where it was and its moves
                c.execute("COMMIT")
            except BaseException:
                _rollback(c)
                raise
            _scrub(c, self.fts)
            return gone

        return await self._run(self._write_lock, self._writer, delete)

    async def said_before(self, thread_id: str, frame_id: str) -> bool:
        # Message ids are frame ids (``<connection>:<seq, 10 digits>``): those of the frame's
        # connection sort from ``<connection>:`` to before ``<connection>;``.
        connection = frame_id.rpartition(":")[0]
        sql = (f"SELECT 1 FROM messages WHERE thread_id = ? AND kind IN "
               f"({', '.join('?' for _ in HISTORY_KINDS)}) AND (id < ? OR id >= ?) LIMIT 1")
        row = await self._read(lambda c: c.execute(
            sql, (thread_id, *HISTORY_KINDS, frame_id, connection + ";")).fetchone())
        return row is not None

    async def liminal_turns(self, thread_id: str) -> set[str]:
        rows = await self._read(lambda c: c.execute(
            "SELECT DISTINCT m.turn_id FROM messages m JOIN frames f ON f.id = m.turn_id "
            "WHERE m.thread_id = ? AND m.kind = 'user' AND m.replayed = 0 AND f.direction = ?",
            (thread_id, TO_LIMINAL)).fetchall())
        return {row[0] for row in rows}

    async def census(self) -> Census:
        def count(c: sqlite3.Connection) -> Census:
            listed = _listed(c)
            messages = int(c.execute("SELECT COUNT(*) FROM messages").fetchone()[0])
            repeated = sum(len(ids) for ids in _plan(c).repeated.values())
            pages = c.execute("PRAGMA page_size").fetchone()[0]
            free = int(c.execute("PRAGMA freelist_count").fetchone()[0]) * int(pages)
            size = 0
            for name in (self.path, self.path.with_name(self.path.name + "-wal")):
                try:
                    size += name.stat().st_size
                except OSError:
                    pass
            return Census(size, listed, messages, repeated, free)

        return await self._read(count)

    async def compact(self) -> int:
        gone = await self._run(self._write_lock, self._writer, _compact)
        if gone:
            log.get("liminal.store").info(
                "store compacted: loads' copies of what it had removed", records=gone,
                path=str(self.path))
            await self._run(self._write_lock, self._writer, _vacuum)
        return gone

    async def deleted_threads(self) -> list[Thread]:
        rows = await self._read(lambda c: c.execute(
            f"SELECT {_THREAD_COLS}, {_flags(c)} FROM threads WHERE state = ?", (DELETED,)).fetchall())
        return [_thread(row[:8], bool(row[8]), bool(row[9])) for row in rows]

    async def messages(self, thread_id: str, kind: str | None = None) -> list[MessageRecord]:
        where, args = ("thread_id = ? AND kind = ?", (thread_id, kind)) if kind else ("thread_id = ?", (thread_id,))
        rows = await self._read(lambda c: c.execute(
            f"SELECT {_MESSAGE_COLS} FROM messages WHERE {where} ORDER BY ord", args).fetchall())
        return [_message(row) for row in rows]

    async def thread(self, thread_id: str) -> Thread | None:
        row = await self._read(lambda c: c.execute(
            f"SELECT {_THREAD_COLS}, {_flags(c)} FROM threads WHERE id = ?", (thread_id,)).fetchone())
        return _thread(row[:8], bool(row[8]), bool(row[9])) if row else None

    async def threads(self, limit: int = 1000, *, empty: bool = False) -> list[ThreadSummary]:
        sql = """
            SELECT {cols},
              (SELECT COUNT(*) FROM (SELECT DISTINCT turn_id FROM messages m WHERE m.thread_id = t.id
                 AND m.replayed = 0 AND m.turn_id IS NOT NULL) d LEFT JOIN frames f ON f.id = d.turn_id
                 WHERE COALESCE(f.direction, '') != '{command}'),
              (SELECT ord || char(10) || data FROM messages m WHERE m.thread_id = t.id
                 AND m.kind = 'usage' ORDER BY ord DESC LIMIT 1),
              (SELECT ord || char(10) || data FROM messages m WHERE m.thread_id = t.id
                 AND m.kind = 'swap' AND m.status = 'committed' ORDER BY ord DESC LIMIT 1),
              (SELECT MAX(time) FROM messages m WHERE m.thread_id = t.id),
              EXISTS (SELECT 1 FROM messages m WHERE m.thread_id = t.id
                 AND m.kind IN ('user', 'agent')), {flags}
            FROM threads t"""
        rows = await self._read(lambda c: c.execute(sql.format(
            cols=_THREAD_COLS, flags=_flags(c), command=TO_LIMINAL)).fetchall())
        out = []
        for row in rows:
            thread = _thread(row[:8], bool(row[13]), bool(row[14]))
            used, size = context_now(_ordered(row[9]), _ordered(row[10]))
            last = max(thread.updated, row[11] or 0.0)
            out.append(ThreadSummary(thread, int(row[8]), used, size, last,
                                     empty=not (row[12] or thread.title)))
        return one_row_per_thread(out, empty=empty)[:limit]

    async def session_records(self, backing_id: str, *, uuid: str | None = None,
                              limit: int | None = None) -> list[SessionRecord]:
        where, args = ("backing_id = ? AND uuid = ?", (backing_id, uuid)) if uuid is not None \
            else ("backing_id = ?", (backing_id,))

        def read(c: sqlite3.Connection) -> list[SessionRecord]:
            rows = c.execute(
                f"SELECT {_SESSION_COLS}, {_own(c)} FROM session_records WHERE {where} "
                "ORDER BY offset LIMIT ?", (*args, -1 if limit is None else max(0, limit))).fetchall()
            return [_session(row, row[10] or _join_parts(c, f"session:{row[0]}")) for row in rows]

        return await self._read(read)

    async def session_file_end(self, backing_id: str) -> int:
        def end(c: sqlite3.Connection) -> int:
            row = c.execute(
                "SELECT id, offset, length(raw) FROM session_records WHERE backing_id = ? "
                "ORDER BY offset DESC LIMIT 1", (backing_id,)).fetchone()
            if row is None:
                return 0
            length = row[2] or _parts_length(c, f"session:{row[0]}")
            return int(row[1]) + int(length) + 1

        return await self._read(end)

    async def search(self, query: str, *, thread_id: str | None = None, limit: int = 20,
                     kinds: Collection[str] | None = None,
                     record_types: Collection[str] | None = None) -> list[SearchHit]:
        terms = fts_terms(query)
        if not terms:
            return []
        where = _Where(thread_id, kinds, record_types)
        fn = _search_fts if self.fts else _search_like
        return await self._read(lambda c: ranked(_place_tools(c, fn(c, terms, where, limit)), limit))

    async def aclose(self) -> None:
        if self._closed:
            return

        def close() -> None:
            with self._write_lock, self._read_lock:
                self._writer.close()
                self._reader.close()

        await anyio.to_thread.run_sync(close)
        self._closed = True


def _create_private(path: Path) -> None:
    """A new database file made 0600 before SQLite opens it (its -wal and -shm take the
    database's mode); an existing path checked to be a regular file, never opened.

    Never opened, because closing any descriptor of the database file drops every POSIX lock
    this process holds on it, SQLite's included (SQLite's own "how to corrupt" note, 2.2): with
    the shared lock of this process's open stores gone, the next process to close its last
    connection believes itself the last user, checkpoints and deletes the -wal and -shm. The
    stores open here go on with the deleted files: they read a snapshot that never moves again,
    and what they write goes to a file nobody else reads."""
    try:
        # Not blocking: a FIFO there would hold this open for good (ENXIO instead).
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NONBLOCK, 0o600)
    except FileExistsError:
        if not stat.S_ISREG(path.stat().st_mode):
            raise StoreError(f"cannot open {path}: not a regular file") from None
        return
    os.close(fd)  # a file no connection has open yet


def _make_private(path: Path) -> None:
    """An existing database readable by others (an older liminal's, a copy restored under
    umask 022) is made 0600 with the files SQLite keeps beside it: SQLite gives a new -wal and
    -shm the database's mode, so every conversation written from then on was readable too."""
    for file in (path, *(path.with_name(path.name + s) for s in ("-wal", "-shm", "-journal"))):
        try:
            mode = stat.S_IMODE(file.stat().st_mode)
            if mode & 0o077:
                file.chmod(0o600)
                log.get("liminal.store").warning("store file was readable by others; now 0600",
                                                 path=str(file), was=oct(mode))
        except FileNotFoundError:
            continue
        except OSError as exc:  # not ours to change: said, and the store still opens
            log.get("liminal.store").warning("cannot make the store file private",
                                             path=str(file), error=str(exc))


def _write(c: sqlite3.Connection, batch: Batch) -> None:
    # What fits in one value: a row may be no longer than the limit either, so half of it.
    room = max(1, c.getlimit(sqlite3.SQLITE_LIMIT_LENGTH) // 2)
    inline, piece = min(INLINE_BYTES, room), min(PART_BYTES, room)
    c.execute("BEGIN IMMEDIATE")
    try:
        batch = batch.without(_deleted(c, batch.thread_ids()), _deleted_sessions(c, batch.unowned_sessions()))
        if batch.frames:
            insert = f"INSERT OR IGNORE INTO frames ({_FRAME_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
            c.executemany(insert, [
                (f.id, f.connection_id, f.seq, f.time, f.direction, f.kind, f.thread_id,
                 f.backing_id, f.method, f.rpc_id, f.size, f.raw)
                for f in batch.frames if len(f.raw) <= inline])
            for f in batch.frames:
                # Its parts only if the frame is new: a frame is written once.
                if len(f.raw) > inline and c.execute(insert, (
                        f.id, f.connection_id, f.seq, f.time, f.direction, f.kind, f.thread_id,
                        f.backing_id, f.method, f.rpc_id, f.size, b"")).rowcount:
                    _write_parts(c, f"frame:{f.id}", f.raw, piece)
        if batch.messages:
            c.executemany(
                f"INSERT INTO messages ({_MESSAGE_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?) "
                "ON CONFLICT (id) DO UPDATE SET thread_id = excluded.thread_id, "
                "turn_id = excluded.turn_id, time = excluded.time, ord = excluded.ord, "
                "kind = excluded.kind, text = excluded.text, tool_call_id = excluded.tool_call_id,"
                " status = excluded.status, data = excluded.data, replayed = excluded.replayed, "
                "backing_id = excluded.backing_id",
                [(m.id, m.thread_id, m.turn_id, m.time, m.order, m.kind, m.text, m.tool_call_id,
                  m.status, orjson.dumps(m.data).decode(), int(m.replayed), m.backing_id)
                 for m in batch.messages])
        for update in batch.threads:
            _merge_thread(c, update)
        if batch.session_records:
            if _own(c) == "0":
                c.execute("ALTER TABLE session_records ADD COLUMN own INTEGER NOT NULL DEFAULT 0")
            c.executemany(
                f"INSERT INTO session_records ({_SESSION_COLS}, own) VALUES (?,?,?,?,?,?,?,?,?,?,?,?) "
                "ON CONFLICT (id) DO UPDATE SET thread_id = excluded.thread_id, "
                "uuid = excluded.uuid, type = excluded.type, time = excluded.time, "
                "usage = excluded.usage, tool_ids = excluded.tool_ids, text = excluded.text, "
                "raw = excluded.raw, own = excluded.own",
                [(r.id, r.backing_id, r.thread_id, r.offset, r.uuid, r.type, r.time,
                  orjson.dumps(r.usage).decode() if r.usage is not None else None,
                  orjson.dumps(list(r.tool_ids)).decode(), r.text,
                  r.raw if len(r.raw) <= inline else b"", int(r.own))
                 for r in batch.session_records])
            for r in batch.session_records:
                if len(r.raw) > inline:
                    _write_parts(c, f"session:{r.id}", r.raw, piece, replace=True)
                elif not r.raw and _has_parts(c):  # an empty line: no parts of an earlier one
                    c.execute("DELETE FROM parts WHERE owner = ?", (f"session:{r.id}",))
        c.execute("COMMIT")
    except BaseException:
        _rollback(c)
        raise


def _listed(c: sqlite3.Connection) -> int:
    """How many threads ``threads(empty=True)`` lists: not deleted, and not a row an older
    liminal kept under a session of another thread's lineage (``records.one_row_per_thread``)."""
    rows = [(tid, state, orjson.loads(backing)) for tid, state, backing
            in c.execute("SELECT id, state, backing_ids FROM threads")]
    backing = {b for tid, _, ids in rows for b in ids if b != tid}
    return sum(1 for tid, state, _ in rows if tid not in backing and state != DELETED)


def _plan(c: sqlite3.Connection) -> compaction.Plan:
    """Which replayed rows repeat a thread's history (``compaction.plan``), read without the
    live rows but each thread's first."""
    rows = [compaction.Row(thread, "", first, False, "") for thread, first in c.execute(
        "SELECT thread_id, MIN(ord) FROM messages WHERE replayed = 0 AND kind != ? "
        "GROUP BY thread_id", (LOAD,))]
    rows += [compaction.Row(thread, mid, order, True, "") for thread, mid, order in c.execute(
        "SELECT thread_id, id, ord FROM messages WHERE replayed = 1")]
    return compaction.plan(rows)


def _compact(c: sqlite3.Connection) -> int:
    """``SqliteStore.compact``: a thread at a time, each in a transaction; the marker last."""
    if c.execute("SELECT value FROM meta WHERE key = ?", (compaction.MARKER,)).fetchone():
        return 0
    found = _plan(c)
    loads = compaction.windows(compaction.LoadFrame(*row) for row in c.execute(
        "SELECT connection_id, seq, direction, thread_id, rpc_id, method FROM frames "
        f"WHERE method IN ({', '.join('?' for _ in compaction.WINDOW_METHODS)})",
        compaction.WINDOW_METHODS))
    dropped = compaction.repeated_loads(loads, found.kept)
    gone = 0
    for thread in sorted(set(found.repeated) | {w.thread for w in dropped}):
        c.execute("BEGIN IMMEDIATE")
        try:
            ids = found.repeated.get(thread, [])
            for start in range(0, len(ids), 500):  # within SQLite's limit on variables
                chunk = ids[start:start + 500]
                gone += c.execute(f"DELETE FROM messages WHERE id IN ({', '.join('?' for _ in chunk)})",
                                  chunk).rowcount
            for window in (w for w in dropped if w.thread == thread):
                low, high = window.ids()
                frames = [fid for fid, raw in c.execute(
                    "SELECT id, raw FROM frames WHERE id > ? AND id < ? AND thread_id = ? "
                    "AND method = 'session/update'", (low, high, thread)).fetchall()
                    if compaction.history_update(raw or _join_parts(c, f"frame:{fid}"))]
                for fid in frames:
                    if _has_parts(c):
                        c.execute("DELETE FROM parts WHERE owner = ?", (f"frame:{fid}",))
                    gone += c.execute("DELETE FROM frames WHERE id = ?", (fid,)).rowcount
            c.execute("COMMIT")
        except BaseException:
            _rollback(c)
            raise
    c.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, '1')", (compaction.MARKER,))
    return gone


def _vacuum(c: sqlite3.Connection) -> None:
    """The file made as small as what it holds, once compaction left a quarter of it free:
    deleted rows leave their pages to the file, which only VACUUM gives back (it copies the
    database, so it needs as much free disk for a while; readers go on meanwhile). A VACUUM
    that fails leaves the store as it was, only larger."""
    pages = int(c.execute("PRAGMA page_count").fetchone()[0])
    free = int(c.execute("PRAGMA freelist_count").fetchone()[0])
    if not pages or free * 4 < pages:
        return
    try:
        c.execute("VACUUM")
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.Error as exc:
        log.get("liminal.store").warning("store not vacuumed after its compaction",
                                         error=str(exc))


def _scrub(c: sqlite3.Connection, fts: bool) -> None:
    """What a delete left of the words outside the rows: the full-text indexes keep a deleted
    row's terms in their segments until these are merged ('optimize' merges them all, dropping
    the deleted), and the WAL keeps the pages as they were until a checkpoint copies it back and
    truncates it. Best effort: a reader inside the WAL holds the truncation off (the next
    checkpoint does it), and a failure leaves the delete done."""
    try:
        if fts:
            for index in ("messages_fts", "session_fts"):
                c.execute(f"INSERT INTO {index}({index}) VALUES ('optimize')")
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.Error as exc:
        log.get("liminal.store").warning("a deleted thread's words may stay in the store's file "
                                         "until its next checkpoint", error=str(exc))


def _deleted(c: sqlite3.Connection, thread_ids: set[str]) -> set[str]:
    """Which of these threads the client deleted (their tombstones, ``DELETED``)."""
    if not thread_ids:
        return set()
    ids = sorted(thread_ids)
    found: set[str] = set()
    for start in range(0, len(ids), 500):  # within SQLite's limit on a statement's variables
        chunk = ids[start:start + 500]
        found |= {row[0] for row in c.execute(
            f"SELECT id FROM threads WHERE state = ? AND id IN ({', '.join('?' for _ in chunk)})",
            (DELETED, *chunk))}
    return found


def _deleted_sessions(c: sqlite3.Connection, sessions: set[str]) -> set[str]:
    """Which of these sessions a deleted thread's tombstone names."""
    if not sessions:
        return set()
    found: set[str] = set()
    for (backing_ids,) in c.execute("SELECT backing_ids FROM threads WHERE state = ?", (DELETED,)):
        found |= sessions.intersection(orjson.loads(backing_ids))
    return found


def _write_parts(c: sqlite3.Connection, owner: str, data: bytes, piece: int, *,
                 replace: bool = False) -> None:
    """``data`` as parts of ``piece`` bytes, bound as views of it (no copy of the whole)."""
    if not _has_parts(c):
        c.execute(_PARTS)
    view = memoryview(data)
    count = (len(data) + piece - 1) // piece
    c.executemany(f"INSERT OR {'REPLACE' if replace else 'IGNORE'} INTO parts (owner, n, data) "
                  "VALUES (?, ?, ?)",
                  ((owner, n, view[n * piece:(n + 1) * piece]) for n in range(count)))
    if replace:  # a line rewritten shorter leaves no piece of its earlier version
        c.execute("DELETE FROM parts WHERE owner = ? AND n >= ?", (owner, count))


def _rollback(c: sqlite3.Connection) -> None:
    # SQLite may have rolled back already (a full disk, an I/O error): a second ROLLBACK would
    # raise "no transaction is active" and hide the error that says what happened.
    if c.in_transaction:
        c.execute("ROLLBACK")


_FLAGS = ("named", "titled")  # thread columns added after schema version 1 was released


def _flags(c: sqlite3.Connection) -> str:
    """The ``named`` and ``titled`` columns, where they exist: a database made before they were
    added has them only once the writer adds them (``_merge_thread``); until then its threads
    read as neither named nor titled."""
    columns = {row[1] for row in c.execute("PRAGMA table_info(threads)")}
    return ", ".join(flag if flag in columns else "0" for flag in _FLAGS)


def _own(c: sqlite3.Connection) -> str:
    """The ``own`` column of session records where it exists: a database made before it was
    added has none until the writer adds it (``_write``); its lines are all the CLI's."""
    columns = {row[1] for row in c.execute("PRAGMA table_info(session_records)")}
    return "own" if "own" in columns else "0"


def _own_sql(c: sqlite3.Connection) -> str:
    """``s.own`` in a query of session records aliased ``s``; ``0`` before the column exists."""
    return "s.own" if _own(c) == "own" else "0"


def _merge_thread(c: sqlite3.Connection, update: ThreadUpdate) -> None:
    for flag, present in zip(_FLAGS, _flags(c).split(", "), strict=True):
        if present == "0":
            c.execute(f"ALTER TABLE threads ADD COLUMN {flag} INTEGER NOT NULL DEFAULT 0")
    row = c.execute(f"SELECT {_THREAD_COLS}, named, titled FROM threads WHERE id = ?",
                    (update.id,)).fetchone()
    t = merge_thread(_thread(row[:8], bool(row[8]), bool(row[9])) if row else None, update)
    c.execute(
        f"INSERT OR REPLACE INTO threads ({_THREAD_COLS}, named, titled) VALUES (?,?,?,?,?,?,?,?,?,?)",
        (t.id, t.title, t.cwd, t.harness, t.state, orjson.dumps(list(t.backing_ids)).decode(),
         t.created, t.updated, int(t.named), int(t.titled)))


def _thread(row: Sequence[Any], named: bool = False, titled: bool = False) -> Thread:
    return Thread(row[0], row[1], row[2], row[3], row[4], tuple(orjson.loads(row[5])),
                  row[6], row[7], named, titled)


def _message(row: Sequence[Any]) -> MessageRecord:
    return MessageRecord(
        id=row[0], thread_id=row[1], turn_id=row[2], time=row[3], order=row[4], kind=row[5],
        text=row[6], tool_call_id=row[7], status=row[8], data=orjson.loads(row[9]),
        replayed=bool(row[10]), backing_id=row[11])


def _ordered(value: str | None) -> tuple[str, dict[str, Any]] | None:
    """A message's (order, data), read as ``ord || char(10) || data`` (an order holds no newline)."""
    if not value:
        return None
    order, _, data = value.partition("\n")
    found = orjson.loads(data)
    return order, found if isinstance(found, dict) else {}


def _session(row: Sequence[Any], raw: bytes) -> SessionRecord:
    return SessionRecord(
        id=row[0], backing_id=row[1], thread_id=row[2], offset=row[3], uuid=row[4], type=row[5],
        time=row[6], usage=orjson.loads(row[7]) if row[7] else None,
        tool_ids=tuple(orjson.loads(row[8])), text=row[9], raw=raw, own=bool(row[11]))


def _forms(term: str) -> list[str]:
    """The term as composed (NFC) and as taken apart (NFD), when they differ. Neither
    tokenizer nor ``LIKE`` equates the two: a word a tool printed decomposed (macOS file names)
    was not found by the same word typed, for kana, Hangul and, with ``LIKE``, every accent."""
    return sorted({unicodedata.normalize("NFC", term), unicodedata.normalize("NFD", term)})


def _match(terms: Sequence[str]) -> str:
    # Every term quoted: the user's words are words, never FTS5 operators.
    parts = []
    for term in terms:
        forms = ['"' + f.replace('"', '""') + '"' for f in _forms(term)]
        parts.append(forms[0] if len(forms) == 1 else "(" + " OR ".join(forms) + ")")
    return " ".join(parts)


@dataclass(frozen=True, slots=True)
class _Where:
    """What a search is narrowed to, as SQL after the full-text match."""

    thread_id: str | None
    kinds: Collection[str] | None
    record_types: Collection[str] | None

    def messages(self) -> tuple[str, list[Any]]:
        return self._sql("m", "kind", self.kinds)

    def records(self) -> tuple[str, list[Any]]:
        return self._sql("s", "type", self.record_types)

    def _sql(self, alias: str, column: str, values: Collection[str] | None) -> tuple[str, list[Any]]:
        sql, args = "", []
        if self.thread_id:
            sql, args = f" AND {alias}.thread_id = ?", [self.thread_id]
        if values is not None:
            chosen = sorted(values)
            sql += f" AND {alias}.{column} IN ({', '.join('?' for _ in chosen) or 'NULL'})"
            args += chosen
        return sql, args


# A message hit's columns: the frame that started it says whose it is (liminal's own commands
# and notes have directions of their own).
_MESSAGE_HIT = ("m.id, m.thread_id, m.kind, m.time, m.text, {score}, m.turn_id, m.tool_call_id, "
                "f.direction FROM {source} LEFT JOIN frames f ON f.id = m.id")
_RECORD_HIT = "s.id, s.thread_id, s.type, s.time, s.text, {score}, s.tool_ids FROM {source}"


def _message_hit(row: Sequence[Any], terms: Sequence[str], score: float) -> SearchHit:
    return SearchHit("message", row[0], row[1], row[2], row[3], snippet(row[4], terms), score,
                     message_id=row[0], turn_id=row[6], head=head(row[4]), direction=row[8],
                     tool_ids=(row[7],) if row[7] else (), digest=digest(row[4]))


def _record_hit(row: Sequence[Any], terms: Sequence[str], score: float) -> SearchHit:
    return SearchHit("session", row[0], row[1], row[2] or "", seconds(row[3]),
                     snippet(row[4], terms), score, tool_ids=tuple(orjson.loads(row[6])),
                     digest=digest(row[4]))


def _search_fts(c: sqlite3.Connection, terms: Sequence[str], where: _Where,
                limit: int) -> list[SearchHit]:
    match = _match(terms)
    terms = [f for t in terms for f in _forms(t)]  # for the snippet: the form the text holds
    hits: list[SearchHit] = []
    # More than asked from each source: duplicates across them are merged (``ranked``).
    sql, args = where.messages()
    source = "messages_fts JOIN messages m ON m.rowid = messages_fts.rowid"
    for row in c.execute(
        f"SELECT {_MESSAGE_HIT.format(score='bm25(messages_fts)', source=source)} "
        f"WHERE messages_fts MATCH ? AND m.replayed = 0{sql} "
        "ORDER BY bm25(messages_fts) LIMIT ?", (match, *args, limit * 3)):
        hits.append(_message_hit(row, terms, -row[5]))
    sql, args = where.records()
    source = "session_fts JOIN session_records s ON s.rowid = session_fts.rowid"
    for row in c.execute(
        f"SELECT {_RECORD_HIT.format(score='bm25(session_fts)', source=source)} "
        # liminal's own lines copy lines found already (under the session they came from).
        f"WHERE session_fts MATCH ? AND {_own_sql(c)} = 0{sql} ORDER BY bm25(session_fts) LIMIT ?",
            (match, *args, limit * 3)):
        hits.append(_record_hit(row, terms, -row[5]))
    return hits


def _search_like(c: sqlite3.Connection, terms: Sequence[str], where: _Where,
                 limit: int) -> list[SearchHit]:
    """Without FTS5: every term must appear (case-insensitive); scored by occurrences."""
    forms = [_forms(t) for t in terms]
    # The user's words are words: "a_b" must not find "axb", nor "100%" find "1000 apples".
    pats = ["%" + f.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            for fs in forms for f in fs]
    terms = [f for fs in forms for f in fs]  # for the score and the snippet

    def like(alias: str) -> str:
        return " AND ".join("(" + " OR ".join(f"{alias}.text LIKE ? ESCAPE '\\'" for _ in f) + ")"
                            for f in forms)

    def score(text: str) -> float:
        return float(sum(text.lower().count(t.lower()) for t in terms))

    hits: list[SearchHit] = []
    sql, args = where.messages()
    for row in c.execute(
        f"SELECT {_MESSAGE_HIT.format(score='0', source='messages m')} "
        f"WHERE m.replayed = 0 AND {like('m')}{sql} LIMIT ?", (*pats, *args, limit * 5)):
        hits.append(_message_hit(row, terms, score(row[4])))
    sql, args = where.records()
    for row in c.execute(
        f"SELECT {_RECORD_HIT.format(score='0', source='session_records s')} "
        f"WHERE {_own_sql(c)} = 0 AND {like('s')}{sql} LIMIT ?", (*pats, *args, limit * 5)):
        hits.append(_record_hit(row, terms, score(row[4])))
    return hits


def _place_tools(c: sqlite3.Connection, hits: list[SearchHit]) -> list[SearchHit]:
    """A session record of a tool call (its input, its full output) is that tool call's
    message where the store has it (``place_tool_records``)."""
    wanted = sorted({t for h in hits if h.source == "session" for t in h.tool_ids})
    calls: list[ToolCallPlace] = []
    for at in range(0, len(wanted), 500):
        part = wanted[at:at + 500]
        calls += [ToolCallPlace(*row) for row in c.execute(
            "SELECT m.tool_call_id, m.thread_id, m.id, m.turn_id, m.time, substr(m.text, 1, 400), "
            "f.direction, m.replayed FROM messages m LEFT JOIN frames f ON f.id = m.id "
            f"WHERE m.tool_call_id IN ({', '.join('?' for _ in part)}) AND m.kind = 'tool_call'",
            part)]
    return place_tool_records(hits, calls)
