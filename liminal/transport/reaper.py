"""No agent outlives liminal, even when liminal is killed with SIGKILL.

The agent runs in a process group of its own (so that a terminal's Ctrl-C reaches liminal, which
then stops the agent in order), and the older Claude adapter ignores the end of its stdin. So
when liminal dies without a chance to clean up (SIGKILL, the OOM killer, a crash in the
interpreter), nothing would ever stop the adapter and the Claude Code processes it drives.

The reaper is a small process of its own that liminal starts next to its first agent. It reads
lines from a pipe whose only writer is liminal: ``watch PGID`` when a process group of an agent
starts, ``forget PGID`` when liminal has stopped it itself, ``bye`` when liminal exits in good
order. The end of the pipe without ``bye`` means liminal is gone: the reaper sends SIGTERM to
every group it still watches, SIGKILL after the grace, and exits. It runs in a session of its
own, so a signal to liminal's process group does not take it too, and it imports nothing but
the standard library (a few milliseconds to start).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import sys

from liminal import log

logger = log.get("liminal.transport.reaper")

# Kept as source (run with ``python -c``) so the reaper starts without importing liminal.
_SOURCE = r"""
import os, signal, sys, time
groups = set()
for line in sys.stdin:
    word, _, arg = line.strip().partition(" ")
    if word == "watch":
        groups.add(int(arg))
    elif word == "forget":
        groups.discard(int(arg))
    elif word == "bye":
        sys.exit(0)

def signal_all(sig):
    alive = False
    for group in groups:
        try:
            os.killpg(group, sig)
            alive = True
        except OSError:
            pass
    return alive

if signal_all(signal.SIGTERM):
    deadline = time.monotonic() + float(sys.argv[1])
    while time.monotonic() < deadline and signal_all(0):
        time.sleep(0.05)
    signal_all(signal.SIGKILL)
"""

GRACE_SECONDS = 2.0


class Reaper:
    def __init__(self, grace: float = GRACE_SECONDS) -> None:
        self.grace = grace
        self._process: subprocess.Popen[bytes] | None = None
        self._watched: set[int] = set()
        self._registered = False

    def _say(self, line: str) -> None:
        process = self._process
        if process is None or process.poll() is not None:
            process = self._start()
            if process is None:
                return
            # A reaper that died (someone killed it) is replaced and told the whole picture.
            for group in self._watched:
                self._write(process, f"watch {group}")
        self._write(process, line)

    def _write(self, process: subprocess.Popen[bytes], line: str) -> None:
        assert process.stdin is not None
        try:
            process.stdin.write(line.encode() + b"\n")
            process.stdin.flush()
        except OSError:
            logger.warning("the reaper is gone; agents may outlive a killed liminal")

    def _start(self) -> subprocess.Popen[bytes] | None:
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-S", "-c", _SOURCE, str(self.grace)],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True, close_fds=True,
            )
        except OSError as exc:
            logger.warning("cannot start the reaper; agents may outlive a killed liminal",
                           error=str(exc))
            self._process = None
            return None
        if not self._registered:
            self._registered = True
            atexit.register(self.close)
        return self._process

    def watch(self, group: int) -> None:
        self._watched.add(group)
        self._say(f"watch {group}")

    def forget(self, group: int) -> None:
        if group in self._watched:
            self._watched.discard(group)
            self._say(f"forget {group}")

    def close(self) -> None:
        """liminal exits: the reaper leaves at once if every agent was stopped in order, and
        otherwise stops what is still watched (what a dead agent left in its group) itself."""
        process, self._process = self._process, None
        if process is None or process.stdin is None:
            return
        with contextlib.suppress(OSError):
            if not self._watched:
                self._write(process, "bye")
            process.stdin.close()


# One per liminal process: every agent process group it starts is watched by it.
reaper = Reaper()


def watch(pid: int) -> None:
    """Watch the process group ``pid`` leads (the agent runs with ``start_new_session``)."""
    if os.name == "posix":
        reaper.watch(pid)


def forget(pid: int) -> None:
    reaper.forget(pid)


def watched() -> list[int]:
    """The agent process groups this process started and has not stopped yet."""
    return sorted(reaper._watched)
