"""Private by default: what liminal writes is readable by the user alone.

liminal keeps whole conversations: the store, the spool, the cache, the journal, the rewritten
session files. Each place that creates a file could pass a mode, and most do; one that forgets
(a library's file, SQLite's ``-wal`` and ``-shm``, a folder made on the way) would leak. So the
process sets its umask to 077 at start, which covers every file and folder it creates, and the
places that create files pass 0600 as well, so that liminal used as a library is private too.

The agent is the exception: what it writes is the user's work (files in their project), which
must get the permissions the user's own umask gives. It is started with the umask liminal
started with (``agent_umask``).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from liminal import log

logger = log.get("liminal.private")

PRIVATE_UMASK = 0o077
_user_umask: int | None = None


def tighten_umask() -> None:
    """From now on this process creates files 0600 and folders 0700 (called once, at start)."""
    global _user_umask
    previous = os.umask(PRIVATE_UMASK)
    if _user_umask is None:
        _user_umask = previous


def agent_umask() -> int:
    """The umask for the agent's process: the user's own (-1: leave it as it is)."""
    return -1 if _user_umask is None else _user_umask


def secure_home(home: Path) -> None:
    """``LIMINAL_HOME`` is 0700: created so, and tightened (once, said in the log) if an older
    liminal or a person made it readable by others. Nothing else of the user's is touched."""
    try:
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        mode = stat.S_IMODE(home.stat().st_mode)
        if mode & 0o077:
            home.chmod(0o700)
            logger.warning("liminal's home was readable by others; now 0700", home=str(home),
                           was=oct(mode))
    except OSError as exc:
        logger.warning("cannot make liminal's home private", home=str(home), error=str(exc))
