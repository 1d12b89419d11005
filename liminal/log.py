"""Logging: structlog to stderr, always. Stdout belongs to the protocol.

JSON lines when stderr is not a terminal (an editor capturing it, CI), coloured key=value
otherwise. One format for everything the process logs: the libraries' stdlib logging
(websockets, watchfiles, asyncio), Python's warnings and an uncaught exception in a thread go
through the same renderer (structlog's ``ProcessorFormatter``), so a reader of liminal's stderr
never meets a plain ``watchfiles.main INFO 1 change detected`` between its JSON lines. A
library's INFO is its routine chatter (a change seen, a connection opened) and is logged at
debug; its warnings and errors keep their level.

No credential reaches the log, whoever logs it and at any level: at debug the WebSocket library
logs every request line and header of a handshake (``GET /acp?token=...``, ``Authorization:
Bearer ...``). Every line is scrubbed just before it is rendered (``redact``): the forms a
credential takes (a bearer credential, an ``Authorization`` header's value, a ``token`` query
parameter, a ``liminal.token.`` subprotocol offer), wrong ones included, and every secret
registered with ``secret`` wherever it appears.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import threading
from typing import Any, TextIO, cast
from urllib.parse import unquote

import structlog

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}
_OWN = "liminal"  # loggers under this name are liminal's own: their INFO stays INFO
_HANDLER = "liminal"
REDACTED = "[redacted]"
_SECRETS: set[str] = set()
# An Authorization header's value: to the end of the line in a header line (a scheme other than
# Bearer has its credential after a space), to the closing quote in a mapping's repr; a
# ``Bearer`` credential anywhere; a ``liminal.token.`` subprotocol offer (a token may hold any
# of ``!#$%&'*+.^_`|~-``: only what cannot be in one ends it).
_CREDENTIAL = re.compile(r"(?i:(\bauthorization:\s*))[^\r\n]*"
                         r"|(?i:(\bauthorization[\"']\s*[:=]\s*[\"']))[^\"'\r\n]*"
                         r"|(\bBearer\s+)[^\s\"]+"
                         r"|(?i:(liminal\.token\.))[^\s,;\"]*")
# A query parameter (its key percent-decoded, as the server reads it, decides), its value up to
# the next parameter (a fragment after it too: a client may have meant it as part of the token).
_PARAMETER = re.compile(r"(?<=[?&;])([^=&;#\s?\"']+)=([^&;\s\"]*)")


def secret(value: str) -> None:
    """Never log ``value``, in any line, from now on (the serve token)."""
    if value:
        _SECRETS.add(value)


def redact(text: str) -> str:
    for value in _SECRETS:
        if value in text:
            text = text.replace(value, REDACTED)
    if "=" in text:
        text = _PARAMETER.sub(_parameter, text)
    return _CREDENTIAL.sub(lambda m: next(g for g in m.groups() if g) + REDACTED, text)


def _parameter(match: re.Match[str]) -> str:
    key = match.group(1)
    return f"{key}={REDACTED}" if unquote(key).strip().lower() == "token" else match.group(0)


def _scrubbed(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_scrubbed(v) for v in value)
    if isinstance(value, dict):
        return {k: _scrubbed(v) for k, v in value.items()}
    return value


def _redact(_logger: Any, _method: str, event_dict: Any) -> Any:
    """A structlog processor: every value of the line, scrubbed (after the exception is
    formatted, so a traceback is scrubbed too)."""
    return {key: _scrubbed(value) for key, value in event_dict.items()}


def configure(level: str = "info", *, json: bool | None = None) -> None:
    number = _LEVELS.get(level.lower())
    if number is None:
        raise ValueError(f"unknown log level {level!r} (one of {', '.join(_LEVELS)})")
    if json is None:
        json = not sys.stderr.isatty()
    renderer = _structlog_to_stderr(number, json)
    stamp = structlog.processors.TimeStamper(fmt="iso", utc=True)
    handler = logging.StreamHandler(cast(TextIO, _StderrProxy()))
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[structlog.stdlib.add_log_level, structlog.stdlib.add_logger_name, stamp],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info, _redact, renderer],
    ))
    handler.addFilter(_LibraryChatter(number))
    handler.set_name(_HANDLER)
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER]:  # configured again: one
        root.removeHandler(old)
    root.addHandler(handler)
    # Records below INFO are not even made unless liminal logs at debug.
    root.setLevel(min(number, logging.INFO))
    logging.captureWarnings(True)
    threading.excepthook = _thread_died


def _structlog_to_stderr(number: int, json: bool) -> Any:
    """structlog rendering to stderr, scrubbed, from ``number`` up; the renderer."""
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if json
        else structlog.dev.ConsoleRenderer(colors=True)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            _redact,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(number),
        # Looked up at every call, so tests that swap sys.stderr still capture the output.
        logger_factory=structlog.PrintLoggerFactory(file=cast(TextIO, _StderrProxy())),
        cache_logger_on_first_use=False,
    )
    return renderer


class _LibraryChatter(logging.Filter):
    """A library's INFO record is debug; then the configured level decides."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.INFO and not (record.name == _OWN or record.name.startswith(_OWN + ".")):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return record.levelno >= self.level


def _thread_died(args: threading.ExceptHookArgs) -> None:
    """An exception nothing caught in a thread: a log line like any other, not a bare traceback."""
    if args.exc_type is SystemExit:
        return
    exc = args.exc_value if args.exc_value is not None else args.exc_type()
    get("liminal.thread").error("a thread died", thread=getattr(args.thread, "name", None),
                                exc_info=(args.exc_type, exc, args.exc_traceback))


class _StderrProxy:
    """``sys.stderr``, whose reader may be gone (a conductor keeps a component's stderr and
    exits before the index worker has drained): a log line is then lost, never the process."""

    def write(self, text: str) -> int:
        try:
            return sys.stderr.write(text)
        except OSError:
            return 0

    def flush(self) -> None:
        with contextlib.suppress(OSError):
            sys.stderr.flush()


def get(name: str) -> Any:
    return structlog.get_logger(name)


# Before ``configure`` too (a line logged while a process starts, or by a library user that
# never calls it): structlog's own default prints to stdout, the protocol's, unscrubbed.
_structlog_to_stderr(_LEVELS["info"], json=not sys.stderr.isatty())
