"""What went wrong, in words: every text about a failure that a person or the model reads (a
command's answer in the thread, a tool's answer, a reason the swap journal or the store keeps
and shows later, a line of a ``liminal`` command, the dashboard) says it through ``in_words``.

An exception's class name (``CancelledError``, ``TimeoutError``, ``OwnRequestError``) tells the
person reading those nothing, and an exception without a message tells nothing at all: each is
said here by what it means, its own message when it has one (an error of liminal's own says
itself: ``liminal.acp.port.OwnRequestError`` words the agent's refusal). The class and the
traceback, for whoever debugs liminal, go to the log (structlog's ``error=`` fields may keep it).
"""

from __future__ import annotations

MAX_CHARS = 300  # a store's error can run to pages (pymongo lists every server it tried)


def in_words(exc: BaseException) -> str:
    """``exc`` in words, without its class's name: one line of at most ``MAX_CHARS``."""
    if isinstance(exc, TimeoutError) and not str(exc):
        return "no answer in time"
    if isinstance(exc, OSError) and exc.strerror:
        where = f" ({exc.filename})" if exc.filename else ""
        return f"{exc.strerror}{where}"
    text = str(exc).strip()
    if isinstance(exc, KeyError) and exc.args:  # str() of a KeyError is its key's repr alone
        text = ""
    if not text:
        return "an error inside liminal (its log has the details)"
    return short(text)


def short(text: str) -> str:
    """The first line of ``text``, cut to ``MAX_CHARS``."""
    line = (text.strip().splitlines() or [""])[0]
    return line if len(line) <= MAX_CHARS else line[:MAX_CHARS - 3] + "..."
