"""Put this folder first on ``PYTHONPATH`` and every Python process started with it (``liminal
acp``, the index worker it starts) opens SQLite with its length limit lowered to
``$LIMINAL_TEST_SQLITE_MAX_LENGTH`` bytes (SQLite's default is 1e9): a frame past what the store
takes, through the real processes, without a gigabyte of test data. Python imports
``sitecustomize`` at start-up by itself; nothing in liminal knows of it."""

from __future__ import annotations

import os
import sqlite3
from typing import Any

_LIMIT = int(os.environ.get("LIMINAL_TEST_SQLITE_MAX_LENGTH") or 0)
_connect = sqlite3.connect


def _limited(*args: Any, **kwargs: Any) -> sqlite3.Connection:
    conn = _connect(*args, **kwargs)
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, _LIMIT)
    return conn


if _LIMIT:
    sqlite3.connect = _limited
