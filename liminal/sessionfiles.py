"""What every CLI's session files get from liminal alike: ids checked before they become paths,
the stillness a settled turn shows, and careful writing.

Beneath ``harness/`` and ``gradient/`` both (it knows no CLI's format): a recall key names a
session by the same id the harnesses check, and in ``harness/`` it would make the gradient import
the package that imports the gradient.
"""

from __future__ import annotations

import io
import os
import re
import stat
from pathlib import Path

# Both CLIs name sessions by a uuid. An id from a frame or the command line becomes part of a
# path only once it matches: nothing else (``../x``, ``a/b``) ever does.
_SESSION_ID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


class SessionNotFound(LookupError):
    """No session file matches the reference given."""


def is_session_id(text: str) -> bool:
    return isinstance(text, str) and _SESSION_ID.fullmatch(text) is not None


def open_regular(path: Path) -> io.BufferedReader:
    """Open ``path`` for reading only if it is a regular file (after symlinks): a FIFO would
    block the reader forever and a device such as ``/dev/zero`` would never end. Checked on
    the open descriptor, so the file cannot be swapped between the check and the read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SessionNotFound(f"{path}: not a regular file")
        os.set_blocking(fd, True)
        return io.open(fd, "rb")  # noqa: UP020 - a buffered reader, typed as one
    except BaseException:
        os.close(fd)
        raise


class HeldStill:
    """``held_still(path)``: the file has the size it had at the previous look (the CLI may
    still be appending its turn's last records when it has answered)."""

    def __init__(self) -> None:
        self._sizes: dict[Path, int] = {}

    def held_still(self, path: Path) -> bool:
        try:
            size = path.stat().st_size
        except OSError:
            return False
        previous = self._sizes.get(path)
        self._sizes[path] = size
        return previous == size


def make_private_folder(folder: Path) -> None:
    """``folder`` and each missing parent, 0700: ``mkdir(mode, parents=True)`` gives the parents
    the umask's mode (0777 under umask 0: a folder anyone may put a session file in)."""
    missing: list[Path] = []
    while not folder.is_dir():
        missing.append(folder)
        folder = folder.parent
    for each in reversed(missing):
        # exist_ok: made meanwhile (by the CLI), it is not ours to change.
        each.mkdir(mode=0o700, exist_ok=True)


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
