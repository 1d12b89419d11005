"""Logging: structlog to stderr, always. Stdout belongs to the protocol.

JSON lines when stderr is not a terminal (an editor capturing it, CI), coloured key=value
otherwise.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO, cast

import structlog

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}


def configure(level: str = "info", *, json: bool | None = None) -> None:
    number = _LEVELS.get(level.lower())
    if number is None:
        raise ValueError(f"unknown log level {level!r} (one of {', '.join(_LEVELS)})")
    if json is None:
        json = not sys.stderr.isatty()
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
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(number),
        # Looked up at every call, so tests that swap sys.stderr still capture the output.
        logger_factory=structlog.PrintLoggerFactory(file=cast(TextIO, _StderrProxy())),
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=number, stream=sys.stderr, format="%(name)s %(levelname)s %(message)s")


class _StderrProxy:
    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def get(name: str) -> Any:
    return structlog.get_logger(name)
