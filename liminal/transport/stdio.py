"""The standard descriptors a process was started without (``liminal acp <&-``, ``>&-``).

A descriptor number the parent left closed is the first one the process opens next: the event
loop's epoll, the store, a lock file. liminal would then read its frames from the epoll (EINVAL,
a traceback, a hang) and, worse, write the protocol into whatever file took fd 1. So each of
0, 1 and 2 that is closed at start is opened on ``/dev/null`` before anything else is: a closed
stdin reads as an empty input, a closed stdout or stderr swallows what is written, as a client
that is not listening would. Python itself sets ``sys.stdin`` (and the others) to None for such
a descriptor; they get a file object again.

Light on purpose (no asyncio, no log): ``python -m liminal.mcp`` calls it first thing.
"""

from __future__ import annotations

import os
import sys


def reserve_standard_fds() -> list[int]:
    """Open ``/dev/null`` on each of fds 0, 1, 2 that is closed; returns those it opened."""
    opened = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        null = os.open(os.devnull, os.O_RDWR)
        if null != fd:  # the lowest free number is ``fd`` itself, unless a lower one was too
            os.dup2(null, fd)
            os.close(null)
        opened.append(fd)
    if sys.stdin is None:
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 - the process's own
    if sys.stdout is None:
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    if sys.stderr is None:
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace",  # noqa: SIM115
                          buffering=1, closefd=False)
    return opened
