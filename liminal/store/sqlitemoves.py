"""Where threads are, in a SQLite store (``liminal.store.base.MoveLog``), as ``mongomoves`` keeps
it in MongoDB.

Several sidecars may record into one SQLite file (two homes on one machine, two editor windows
with their own ``$LIMINAL_HOME``): each has its own swap journal, so the store is what tells
them where a thread is. Two tables, made at first use: ``moves`` (the journal's records, one row
each, a ``SwapRecord`` as JSON) and ``places`` (one row per thread: the session it is on, its
lineage, the attempt moving it and since when). Every change to a place is one
``BEGIN IMMEDIATE`` transaction, which SQLite serialises across processes: a move from session X
is claimed and committed only while the store has the thread on X (a compare-and-set on the
thread's tip), so of two sidecars that move one thread from one session, one commits and the
other is refused, and one that still has the thread on a session it has left is refused too.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from liminal.store.base import Place

# The store's writer and reader: each runs a function on its connection, under its lock, in a
# worker thread (``SqliteStore._run``).
Run = Callable[[Callable[[sqlite3.Connection], Any]], Awaitable[Any]]

_RECORD_FIELDS = ("thread_id", "old_backing_id", "new_backing_id", "outcome", "started_at")
_TABLES = """
CREATE TABLE IF NOT EXISTS places (
    thread_id TEXT PRIMARY KEY, backing_id TEXT NOT NULL, lineage TEXT NOT NULL,
    moving TEXT, since REAL);
CREATE TABLE IF NOT EXISTS moves (
    id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, started_at REAL NOT NULL, at REAL NOT NULL,
    data BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS moves_by_thread ON moves (thread_id, started_at, at);
"""


def _tables(c: sqlite3.Connection) -> None:
    c.executescript(_TABLES)


def left_behind(lineage: list[str], thread_id: str, old: str) -> str | None:
    """The session a thread's lineage (the index's, oldest first; its own id first) ends in when
    ``old`` is one it has left, else None (``old`` is its tip, or one the index does not know
    yet: it derives the lineage a little after each move)."""
    known = list(dict.fromkeys([thread_id, *lineage]))
    return known[-1] if old in known and known[-1] != old else None


def _indexed(c: sqlite3.Connection, thread_id: str) -> list[str]:
    row = c.execute("SELECT backing_ids FROM threads WHERE id = ?", (thread_id,)).fetchone()
    return [b for b in (orjson.loads(row[0]) if row and row[0] else []) if isinstance(b, str)]


class _Tx:
    """One ``BEGIN IMMEDIATE`` transaction (the connection is in autocommit)."""

    def __init__(self, c: sqlite3.Connection) -> None:
        self.c = c

    def __enter__(self) -> sqlite3.Connection:
        self.c.execute("BEGIN IMMEDIATE")
        return self.c

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        if kind is None:
            self.c.execute("COMMIT")
        else:
            try:
                self.c.execute("ROLLBACK")
            except sqlite3.Error:
                pass


class SqliteMoves:
    def __init__(self, write: Run, read: Run) -> None:
        self._writer, self._reader = write, read
        self._made = False

    async def _write(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        def run(c: sqlite3.Connection) -> Any:
            if not self._made:
                _tables(c)
                self._made = True
            return fn(c)

        return await self._writer(run)

    async def _read(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        def run(c: sqlite3.Connection) -> Any:
            if c.execute("SELECT 1 FROM sqlite_master WHERE name = 'places'").fetchone() is None:
                return None  # no move went through the store yet
            return fn(c)

        return await self._reader(run)

    async def claim(self, thread_id: str, old: str, attempt: str, *, now: float,
                    stale_before: float) -> tuple[bool, str | None]:
        def claim(c: sqlite3.Connection) -> tuple[bool, str | None]:
            with _Tx(c):
                row = c.execute("SELECT backing_id, moving, since FROM places WHERE thread_id = ?",
                                (thread_id,)).fetchone()
                if row is None:
                    # Never moved through the store: the index's lineage is the word (a move a
                    # sidecar made before the store kept places).
                    tip = left_behind(_indexed(c, thread_id), thread_id, old)
                    if tip is not None:
                        return False, (f"another liminal on the same store moved this thread: it "
                                       f"is on session {tip}")
                    c.execute("INSERT INTO places (thread_id, backing_id, lineage, moving, since) "
                              "VALUES (?, ?, ?, ?, ?)",
                              (thread_id, old, orjson.dumps([old] if old != thread_id else []), attempt, now))
                    return True, None
                backing, moving, since = row
                if backing != old:
                    return False, (f"another liminal on the same store moved this thread: it is on "
                                   f"session {backing}")
                if moving is not None and (since or 0.0) >= stale_before:
                    return False, "another liminal on the same store is moving this thread"
                c.execute("UPDATE places SET moving = ?, since = ? WHERE thread_id = ?",
                          (attempt, now, thread_id))
                return True, moving or None

        return await self._write(claim)  # type: ignore[no-any-return]

    async def commit(self, thread_id: str, old: str, attempt: str) -> bool:
        def commit(c: sqlite3.Connection) -> bool:
            with _Tx(c):
                row = c.execute("SELECT lineage FROM places WHERE thread_id = ? AND backing_id = ? "
                                "AND moving = ?", (thread_id, old, attempt)).fetchone()
                if row is None:
                    return False
                lineage = [*orjson.loads(row[0]), attempt]
                c.execute("UPDATE places SET backing_id = ?, lineage = ?, moving = NULL, since = NULL "
                          "WHERE thread_id = ?", (attempt, orjson.dumps(lineage), thread_id))
                return True

        return await self._write(commit)  # type: ignore[no-any-return]

    async def release(self, thread_id: str, attempt: str) -> bool:
        def release(c: sqlite3.Connection) -> bool:
            return c.execute("UPDATE places SET moving = NULL, since = NULL WHERE thread_id = ? "
                             "AND moving = ?", (thread_id, attempt)).rowcount > 0

        return await self._write(release)  # type: ignore[no-any-return]

    async def place(self, thread_id: str) -> Place | None:
        def read(c: sqlite3.Connection) -> Place | None:
            row = c.execute("SELECT backing_id, lineage, moving, since FROM places WHERE thread_id = ?",
                            (thread_id,)).fetchone()
            if row is None:
                return None
            lineage = tuple(b for b in orjson.loads(row[1]) if isinstance(b, str))
            return Place(row[0], lineage, row[2], row[3])

        return await self._read(read)  # type: ignore[no-any-return]

    async def append(self, record: dict[str, Any]) -> None:
        missing = [f for f in _RECORD_FIELDS if f not in record]
        if missing:
            raise ValueError(f"not a journal record: no {', '.join(missing)}")
        data = orjson.dumps(record)
        await self._write(lambda c: c.execute(
            "INSERT INTO moves (id, thread_id, started_at, at, data) VALUES (?, ?, ?, ?, ?)",
            (uuid.uuid4().hex, record["thread_id"], float(record["started_at"] or 0.0), time.time(), data)))

    async def records(self, thread_id: str | None = None) -> list[dict[str, Any]]:
        def read(c: sqlite3.Connection) -> list[dict[str, Any]]:
            where, args = ("", ()) if thread_id is None else (" WHERE thread_id = ?", (thread_id,))
            rows = c.execute(f"SELECT data FROM moves{where} ORDER BY started_at, at", args).fetchall()
            return [orjson.loads(row[0]) for row in rows]

        return await self._read(read) or []


def forget(c: sqlite3.Connection, thread_id: str) -> int:
    """The thread's place and records gone, inside ``SqliteStore.delete_thread``'s transaction;
    how many."""
    if c.execute("SELECT 1 FROM sqlite_master WHERE name = 'places'").fetchone() is None:
        return 0
    gone = c.execute("DELETE FROM places WHERE thread_id = ?", (thread_id,)).rowcount
    return int(gone + c.execute("DELETE FROM moves WHERE thread_id = ?", (thread_id,)).rowcount)
