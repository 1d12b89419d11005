"""Writing a session file for a CLI: the same care whichever CLI reads it."""

from __future__ import annotations

import os
from pathlib import Path


class RewriteError(RuntimeError):
    """The session could not be rewritten; nothing was written."""


def write_atomically(path: Path, lines: tuple[bytes, ...]) -> None:
    """Temp file, fsync, no-clobber link to the final name, fsync of the folder."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        # 0600 whatever the umask: the CLI writes its own sessions so, and a rewrite holds the
        # same conversation (``compress`` wrote 0644 even from a 0600 original).
        with os.fdopen(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as handle:
            handle.writelines(lines)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temp, path)
        except FileExistsError as exc:
            raise RewriteError(f"{path} already exists") from exc
    finally:
        temp.unlink(missing_ok=True)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)
