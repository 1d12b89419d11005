"""What a SQLite store holds, measured alike by the tests of per-prompt clients
(tests/integration/test_load_store.py, tests/acceptance/test_load_store.py).

Their bound: ``stored`` after N turns in N processes (each loads the thread, whose whole history
the agent replays, then prompts) is at most ``stored`` after the same turns in one process, plus
the per-prompt run's ``session_state`` bytes and its load's note: the frames that are no part of
the conversation (each process's ``initialize``, its ``session/load`` and the answer, the
notifications that describe the session: commands, modes, usage, titles), not a prompt, its
answer or a piece of history (``records.HISTORY_UPDATES``). No piece of history is stored
outside a turn. Before, each load stored the whole history again, as frames and as messages.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import NamedTuple

import orjson

from liminal.store.records import HISTORY_UPDATES


class Measured(NamedTuple):
    stored: int  # raw bytes of every frame, text and data of every message
    state: int  # raw bytes of the frames that are no part of the conversation
    note: int  # bytes of the load notes' data
    replayed: int  # pieces of history stored outside a turn (a load's replay)
    replayed_messages: int  # messages marked replayed


def measure(path: Path) -> Measured:
    with sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True) as db:
        stored = sum(db.execute(sql).fetchone()[0] or 0 for sql in (
            "SELECT SUM(length(raw)) FROM frames",
            "SELECT SUM(length(text) + length(data)) FROM messages"))
        note = int(db.execute("SELECT COALESCE(SUM(length(data)), 0) FROM messages "
                              "WHERE kind = 'load'").fetchone()[0])
        replayed_messages = int(db.execute(
            "SELECT COUNT(*) FROM messages WHERE replayed = 1").fetchone()[0])
        rows = db.execute("SELECT connection_id, kind, method, raw FROM frames "
                          "ORDER BY connection_id, seq").fetchall()
    state = replayed = 0
    in_turn, connection = False, None
    for conn, kind, method, raw in rows:
        if conn != connection:
            in_turn, connection = False, conn
        history = method == "session/update" and orjson.loads(raw)["params"]["update"].get(
            "sessionUpdate") in HISTORY_UPDATES
        if method == "session/prompt":
            in_turn = kind == "request"
        elif history and not in_turn:
            replayed += 1
        elif not history:
            state += len(raw)
    return Measured(stored, state, note, replayed, replayed_messages)
