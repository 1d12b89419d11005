"""The agent's stderr, read by liminal and written to its own stderr in liminal's log format.

An adapter logs as it likes (coloured text, its own timestamps, a CLI's panics); inherited, those
lines would sit between liminal's JSON lines and no log collector could read the whole. So the
agent's stderr is a pipe liminal reads, and each line becomes one log record of liminal's:
``{"event": "<the line>", "logger": "agent", "agent": <pid>, "level": "info", ...}`` when stderr
is not a terminal (its colour codes stripped), the same rendered for a person on a terminal. A
line that says a credential is scrubbed like any other (``liminal.log.redact``).

What it must never do, whatever the agent writes:

- **hold up the agent or the forwarding path.** The pipe is read as the event loop reads the
  agent's stdout, always (the agent never waits to write its stderr); the records are written by
  one thread of the process (``_Writer``), so a slow reader of liminal's stderr stalls neither.
  Past ``QUEUED_LINES`` or ``QUEUED_BYTES`` waiting, lines are dropped and counted; the count is
  logged when the writer catches up.
- **hold a line without end.** A line is cut at ``MAX_LINE_BYTES`` (said at its end) and the
  rest of it, up to the next newline, skipped: a gigabyte without a newline is read and dropped.

The last lines are kept (``AgentLog.last_words``): what an agent that exits before answering
last said (npx's "404 Not Found") is the reason liminal gives the client.
"""

from __future__ import annotations

import atexit
import re
import sys
import threading
import time
from collections import deque
from typing import Any

from liminal import log

MAX_LINE_BYTES = 8192
QUEUED_LINES = 2000
QUEUED_BYTES = 1 << 20
KEPT_LINES = 20
SAID_LINES = 3  # of them, what names why an agent ended (``AgentLog.last_words``)
SAID_CHARS = 300
# At exit, what is queued gets this long to be written (a stderr no one reads must not hold
# liminal's exit).
DRAIN_SECONDS = 2.0
# A terminal's escape sequences: colours and cursor moves (CSI), titles and links (OSC), others.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?")


def plain(text: str) -> str:
    """``text`` without terminal escape sequences."""
    return _ESCAPES.sub("", text) if "\x1b" in text else text


class AgentLog:
    """One agent process's stderr: bytes in (``feed``, ``close``), log records out."""

    def __init__(self, agent: int | None = None) -> None:
        self.agent = agent  # its pid, once known: the records' ``agent``
        self._partial = bytearray()
        self._skipping = False  # past the cap of the line being read: until its newline
        self._kept: deque[str] = deque(maxlen=KEPT_LINES)
        self._colours = _stderr_is_terminal()

    def feed(self, data: bytes) -> None:
        start = 0
        while start < len(data):
            end = data.find(b"\n", start)
            piece = data[start:] if end < 0 else data[start:end]
            start = len(data) if end < 0 else end + 1
            if not self._skipping:
                room = MAX_LINE_BYTES - len(self._partial)
                self._partial += piece[:room]
                if len(piece) > room:
                    self._line(bytes(self._partial), cut=True)
                    self._partial.clear()
                    self._skipping = end < 0
                    continue
            elif end >= 0:
                self._skipping = False
                continue
            if end >= 0:
                self._line(bytes(self._partial))
                self._partial.clear()

    def close(self) -> None:
        """The pipe has ended: a last line without its newline is a line."""
        if self._partial:
            self._line(bytes(self._partial))
            self._partial.clear()

    def last_words(self) -> str:
        """Why the agent ended, as its last lines say it (without colours): from the first of
        them that speaks of an error (npm's "npm error code E404", then what it did not find;
        Python's "ModuleNotFoundError: ..."), a few lines, else its last line; "" if it said
        nothing."""
        kept = list(self._kept)
        start = next((n for n, line in enumerate(kept) if "error" in line.lower()), len(kept) - 1)
        said = " / ".join(kept[start:start + SAID_LINES])
        return said if len(said) <= SAID_CHARS else said[:SAID_CHARS - 1] + "…"

    def _line(self, raw: bytes, *, cut: bool = False) -> None:
        text = raw.decode("utf-8", "replace").rstrip("\r")
        if cut:
            text += f" … (cut at {MAX_LINE_BYTES:,} bytes)"
        bare = plain(text)
        if bare.strip():
            self._kept.append(bare.strip())
        _writer.put(text if self._colours else bare, self.agent)


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class _Writer:
    """The process's one writer of agents' lines: a bounded queue and the thread that logs it."""

    def __init__(self) -> None:
        self._queue: deque[tuple[str, int | None]] = deque()
        self._bytes = 0
        self._dropped = 0
        self._busy = False  # a line taken, not yet written
        self._ready = threading.Condition()
        self._thread: threading.Thread | None = None

    def put(self, text: str, agent: int | None) -> None:
        with self._ready:
            if len(self._queue) >= QUEUED_LINES or self._bytes + len(text) > QUEUED_BYTES:
                self._dropped += 1
                return
            self._queue.append((text, agent))
            self._bytes += len(text)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="liminal-agent-log", daemon=True)
                self._thread.start()
                atexit.register(self.drain)
            self._ready.notify()

    def _run(self) -> None:
        import structlog

        # Unconfigured (a library's caller that never set liminal's log up), structlog would
        # print to stdout, which may be a protocol: plain prefixed lines on stderr then.
        logger: Any = log.get("agent") if structlog.is_configured() else _Plain()
        while True:
            with self._ready:
                while not self._queue and not self._dropped:
                    self._ready.wait()
                dropped, self._dropped = self._dropped, 0
                item = self._queue.popleft() if self._queue else None
                if item is not None:
                    self._bytes -= len(item[0])
                self._busy = True
            try:
                if dropped:
                    logger.warning("lines of the agent's stderr dropped: liminal's own stderr is "
                                   "not read as fast as the agent writes", logger="agent", dropped=dropped)
                if item is not None:
                    logger.info(item[0], logger="agent", agent=item[1])
            except Exception:  # a stderr that cannot be written: nothing to tell it
                pass
            finally:
                with self._ready:
                    self._busy = False
                    self._ready.notify_all()

    def drain(self, seconds: float = DRAIN_SECONDS) -> bool:
        """Wait (at most ``seconds``) until every queued line is written; False if some are not."""
        deadline = time.monotonic() + seconds
        with self._ready:
            while self._queue or self._busy or self._dropped:
                left = deadline - time.monotonic()
                if left <= 0 or self._thread is None or not self._thread.is_alive():
                    return False
                self._ready.wait(left)
        return True


class _Plain:
    def info(self, event: str, **fields: Any) -> None:
        sys.stderr.write(f"agent {fields.get('agent')}| {event}\n")
        sys.stderr.flush()

    def warning(self, event: str, **fields: Any) -> None:
        self.info(f"{event} ({fields.get('dropped')} lines)", agent=None)


_writer = _Writer()
