"""What Codex keeps beside its rollouts, read by the real-CLI tests: its SQLite databases under
``CODEX_HOME`` (the state database's ``threads``, the app server's log database) and what it
logged to its stderr (liminal's stderr log holds the adapter's)."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

STALE = "stale rollout path"  # Codex's words for a thread its state database names a missing file of


def _rows(database: Path, query: str, *params: str) -> list[tuple[object, ...]]:
    try:
        with contextlib.closing(sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True, timeout=5)) as db:
            return list(db.execute(query, params).fetchall())
    except sqlite3.Error:
        return []


def complaints(codex_home: Path, logs: Path, words: str = STALE) -> list[str]:
    """Codex's log lines holding ``words``: in the stderr logs in ``logs`` and in the log
    database the app server behind codex-acp 2.6 writes instead of its stderr."""
    said = [line for log in sorted(logs.glob("*.log"))
            for line in log.read_text(errors="replace").splitlines() if words in line]
    for database in sorted(codex_home.glob("logs_*.sqlite")):
        said += [str(row[1]) for row in _rows(
            database, "SELECT level, feedback_log_body FROM logs WHERE feedback_log_body LIKE ?", f"%{words}%")]
    return said


def threads_in(codex_home: Path, folder: Path) -> list[str]:
    """The thread ids Codex's state database keeps with a working folder under ``folder``."""
    return [str(row[0]) for database in sorted(codex_home.glob("state_*.sqlite"))
            for row in _rows(database, "SELECT id FROM threads WHERE cwd LIKE ?", f"{folder}/%")]


def rows_of(codex_home: Path, thread_id: str) -> int:
    """Rows keyed by the thread in Codex's state and history databases (``threads.id``, any
    table's ``thread_id``)."""
    found = 0
    for pattern in ("state_*.sqlite", "thread_history_*.sqlite"):
        for database in sorted(codex_home.glob(pattern)):
            tables = [str(row[0]) for row in _rows(database, "SELECT name FROM sqlite_master WHERE type = 'table'")]
            for table in tables:
                columns = {row[1] for row in _rows(database, f'PRAGMA table_info("{table}")')}
                key = "id" if table == "threads" else "thread_id"
                if key in columns:
                    found += sum(int(str(row[0])) for row in _rows(
                        database, f'SELECT count(*) FROM "{table}" WHERE "{key}" = ?', thread_id))
    return found
