"""The stdio shell of liminal's MCP server: lines in, ``McpServer`` answers out.

Newline-delimited JSON-RPC on stdin and stdout; nothing else is ever written to stdout. The main
thread reads lines and answers what needs no tool (``initialize``, ``tools/list``) itself: the
CLI waits for those before its next prompt, and asyncio (a good part of a start-up) is not
imported for them. Tool calls run on an event loop in a second thread, started at the first,
and are answered concurrently (a slow search does not hold up a recall). The server ends when
stdin closes, after the calls under way are answered.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import orjson

from liminal.mcp.args import add_binding, checked
from liminal.mcp.protocol import Call, McpServer, internal_error, parse_error, too_large
from liminal.mcp.tools import INSTRUCTIONS, LiminalTools
from liminal.transport.stdio import reserve_standard_fds

if TYPE_CHECKING:
    import asyncio

# One message at most (a memo, a search); a longer line is dropped unread and answered -32600.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
CLOSE_SECONDS = 30.0  # what the calls under way get once stdin has closed


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="liminal mcp", description="liminal's tools for the model (MCP, stdio)")
    p.add_argument("--home", type=Path, help="liminal's home folder")
    p.add_argument("--config", type=Path, help="config file")
    add_binding(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    reserve_standard_fds()  # a closed stdin or stdout: before anything takes its number
    # Private by default, as ``liminal.private.tighten_umask`` makes liminal (not imported: it
    # loads the log): the agent starts this server with the user's umask, and it creates
    # folders under liminal's home (mcp/slash) and opens the store.
    os.umask(0o077)
    args = parser().parse_args(argv)
    problem = checked(args.thread, args.bind)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    tools = LiminalTools(args.home.expanduser() if args.home else None, args.config, args.thread, args.bind)
    return serve(tools)


class _Writer:
    def __init__(self, out: IO[bytes]) -> None:
        self._out = out
        self._lock = threading.Lock()

    def __call__(self, answer: dict[str, Any]) -> None:
        try:
            data = orjson.dumps(answer) + b"\n"
        except TypeError:  # an integer id past 64 bits, a lone surrogate: the stdlib writes both
            try:
                data = json.dumps(answer).encode() + b"\n"
            except (TypeError, ValueError):
                data = json.dumps(internal_error(answer.get("id"), "the answer could not be written")).encode() + b"\n"
        with self._lock:  # one answer's bytes at a time
            self._out.write(data)
            self._out.flush()


class _Calls:
    """An event loop in a thread of its own, for the tools (the store and cache are async)."""

    def __init__(self, write: _Writer) -> None:
        import asyncio

        self._write = write
        self._loop: asyncio.AbstractEventLoop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="liminal-mcp-calls",
                                        daemon=True)
        self._thread.start()
        self._running: set[Future[None]] = set()

    def submit(self, call: Call) -> None:
        import asyncio

        async def run() -> None:
            self._write(await call.run())

        future = asyncio.run_coroutine_threadsafe(run(), self._loop)
        self._running.add(future)
        future.add_done_callback(self._running.discard)

    def close(self, tools: LiminalTools) -> None:
        """The calls under way get ``CLOSE_SECONDS`` to answer; then the server ends all the
        same (a call stuck on a store that does not answer must not keep it alive forever)."""
        import asyncio

        deadline = time.monotonic() + CLOSE_SECONDS
        for future in list(self._running):
            try:
                future.result(timeout=max(0.0, deadline - time.monotonic()))
            except Exception:  # answered as the tool's failure already, or still stuck
                pass
        for future in list(self._running):
            future.cancel()  # a stuck call: its task is cancelled on the loop, not left pending
        try:
            asyncio.run_coroutine_threadsafe(tools.aclose(), self._loop).result(timeout=5)
        except Exception:
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()


def _exact_id(line: bytes, parsed: float) -> Any:
    """An integer id past what a float holds, as the client wrote it (orjson rounds it)."""
    try:
        found = json.loads(line).get("id")
    except (ValueError, RecursionError):
        return parsed
    return found if isinstance(found, int | float) else parsed


def serve(tools: LiminalTools, stdin: IO[bytes] | None = None, stdout: IO[bytes] | None = None) -> int:
    server = McpServer(tools.tools(), INSTRUCTIONS)
    write = _Writer(stdout or sys.stdout.buffer)
    source = stdin or sys.stdin.buffer
    calls: _Calls | None = None
    try:
        while line := source.readline(MAX_MESSAGE_BYTES + 1):
            if len(line) > MAX_MESSAGE_BYTES and not line.endswith(b"\n"):
                while (rest := source.readline(MAX_MESSAGE_BYTES)) and not rest.endswith(b"\n"):
                    pass  # the rest of the line, read and dropped a piece at a time
                write(too_large(MAX_MESSAGE_BYTES))
                continue
            if not line.strip():
                continue
            try:
                message = orjson.loads(line)
            except orjson.JSONDecodeError:
                write(parse_error())
                continue
            if isinstance(message, dict) and isinstance(message.get("id"), float):
                message["id"] = _exact_id(line, message["id"])
            answer = server.answer(message)
            if isinstance(answer, Call):
                calls = calls or _Calls(write)
                calls.submit(answer)
            elif answer is not None:
                write(answer)
    finally:
        if calls is not None:
            calls.close(tools)
    return 0
