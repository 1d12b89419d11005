"""What went wrong, in words: the reasons the swap journal keeps for a move that did not happen,
which ``liminal swaps``, ``liminal history`` and the dashboard show as they are.

An exception's class name (``CancelledError``, ``TimeoutError``, ``OwnRequestError``) tells the
person reading those nothing, and an exception without a message tells nothing at all: each is
said here by what it means, its own message when it has one. The class and the traceback, for
whoever debugs liminal, go to the log.
"""

from __future__ import annotations

from typing import Any

from liminal.acp.port import OwnRequestError

MAX_CHARS = 300  # a store's error can run to pages (pymongo lists every server it tried)


def in_words(exc: BaseException) -> str:
    """``exc`` in words, without its class's name."""
    if isinstance(exc, OwnRequestError):
        return _answered(exc.method, exc.error)
    if isinstance(exc, TimeoutError) and not str(exc):
        return "no answer in time"
    if isinstance(exc, OSError) and exc.strerror:
        where = f" ({exc.filename})" if exc.filename else ""
        return f"{exc.strerror}{where}"
    text = str(exc).strip()
    if not text:
        return "an error inside liminal (its log has the details)"
    return _short(text)


def _answered(method: str, error: Any) -> str:
    """An own request the agent answered with an error, or that never got an answer."""
    if isinstance(error, dict):
        message = _short(str(error.get("message") or "an error"))
        code = error.get("code")
        data = error.get("data")
        if isinstance(data, dict) and isinstance(data.get("details"), str):
            message = f"{message}: {_short(data['details'])}"
        elif isinstance(data, str) and data:
            message = f"{message}: {_short(data)}"
        asked = f" {method}" if method else ""
        return f"the agent refused{asked}: {message}" + (f" (error {code})" if isinstance(code, int) else "")
    why = _short(str(error))
    return f"{method}: {why}" if method else why


def _short(text: str) -> str:
    line = (text.strip().splitlines() or [""])[0]
    return line if len(line) <= MAX_CHARS else line[:MAX_CHARS - 3] + "..."
