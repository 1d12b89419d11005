"""The index worker (``python -m liminal.ingest.worker``) with SQLite's length limit lowered on
every connection it opens, to ``LIMINAL_TEST_SQLITE_MAX_LENGTH`` bytes: a frame past the limit
without a gigabyte of test data (``sqlite3.Connection.setlimit``; SQLite's default is 1e9)."""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

from liminal.store import sqlite as backend

_connect = backend._connect
LIMIT = int(os.environ.get("LIMINAL_TEST_SQLITE_MAX_LENGTH", "0"))


def _limited(path: Path) -> sqlite3.Connection:
    conn = _connect(path)
    if LIMIT:
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, LIMIT)
    return conn


backend._connect = _limited  # type: ignore[assignment]

if __name__ == "__main__":
    from liminal.ingest.worker import main

    sys.exit(main())
