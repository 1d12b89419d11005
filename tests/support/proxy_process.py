"""Run ``liminal acp -- AGENT...`` as a real subprocess and talk raw NDJSON to it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process

REPO = Path(__file__).resolve().parents[2]
SCRIPTED_AGENT = Path(__file__).with_name("scripted_agent.py")


def liminal_argv(agent: Sequence[str], *options: str) -> list[str]:
    return [sys.executable, "-m", "liminal", "acp", *options, "--", *agent]


def scripted_agent_argv(*flags: str) -> list[str]:
    return [sys.executable, str(SCRIPTED_AGENT), *flags]


def child_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["LIMINAL_HOME"] = str(tmp / "liminal-home")
    env["AGENT_LOG_IN"] = str(tmp / "agent_in.bin")
    env["AGENT_LOG_OUT"] = str(tmp / "agent_out.bin")
    env.update(extra)
    return env


def agent_pids(tmp: Path) -> list[int]:
    """The scripted agent's processes started so far with ``child_env(tmp)`` (each notes its pid
    at start, in ``AGENT_LOG_IN``.pids)."""
    pids = tmp / "agent_in.bin.pids"
    return [int(p) for p in pids.read_text().split()] if pids.exists() else []


def json_objects(lines: Sequence[bytes | str]) -> list[dict[str, Any]]:
    """The lines that are JSON objects, parsed (the others left out)."""
    found = []
    for line in lines:
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


class LineClient:
    """The client's side of an NDJSON connection: lines in, JSON-RPC waits and requests."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.sent: list[bytes] = []  # every byte written to the other side, for the schema check
        self._changed = anyio.Event()
        self._ids = iter(range(1, 1 << 30))

    def _received(self, lines: list[bytes]) -> None:
        self.lines.extend(lines)
        self._changed.set()

    async def send(self, data: bytes) -> None:
        raise NotImplementedError

    def messages(self) -> list[dict[str, Any]]:
        return json_objects(self.lines)

    async def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 30) -> dict[str, Any]:
        with anyio.fail_after(timeout):
            while True:
                for message in self.messages():
                    if predicate(message):
                        return message
                self._changed = anyio.Event()
                await self._changed.wait()

    async def request(self, method: str, params: Any, timeout: float = 30, *,
                      rpc_id: Any = None) -> dict[str, Any]:
        rpc_id = next(self._ids) if rpc_id is None else rpc_id
        await self.send(json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params}).encode() + b"\n")
        return await self.wait_for(lambda m: m.get("id") == rpc_id and "method" not in m, timeout)

    async def prompt(self, session: str, text: str, timeout: float = 30) -> dict[str, Any]:
        return await self.request("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": text}]},
                                  timeout)


class ProxyProcess(LineClient):
    """``liminal acp`` as a subprocess: bytes in, lines out, stderr collected."""

    def __init__(self, process: Process) -> None:
        super().__init__()
        self.process = process
        self.received = bytearray()
        self.stderr = bytearray()

    async def pump(self) -> None:
        assert self.process.stdout is not None
        buffer = b""
        async for chunk in self.process.stdout:
            self.received += chunk
            buffer += chunk
            *complete, buffer = buffer.split(b"\n")
            self._received(complete)
        self._changed.set()

    async def pump_stderr(self) -> None:
        assert self.process.stderr is not None
        async for chunk in self.process.stderr:
            self.stderr += chunk

    async def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.sent.extend(data.splitlines())
        await self.process.stdin.send(data)

    async def close_stdin(self) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.aclose()

    async def wait_exit(self, timeout: float = 30) -> int:
        with anyio.fail_after(timeout):
            return await self.process.wait()

    def kill(self) -> None:
        """SIGKILL to liminal's process group and to its index worker, which runs in a session
        of its own (left alive, it would hold liminal's stderr, a pipe of the test's, open)."""
        from tests.support.processes import descendants

        for process in descendants(self.process.pid):
            if "liminal.ingest.worker" in process.cmdline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGKILL)
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    async def aclose(self) -> None:
        """``kill``, then the process reaped and its pipes closed, shielded from a cancelled
        test: its transport is closed here, while the event loop runs, not by the collector
        later, in another test, after the loop has closed."""
        self.kill()
        with anyio.CancelScope(shield=True):
            await self.process.aclose()


async def run_liminal(home: Path, body: Callable[[ProxyProcess], Awaitable[None]], **env: str) -> int:
    """``liminal acp`` over the scripted agent keeping Claude Code session files in
    ``home/claude`` (``tests.support.claude_files``): ``body(proxy)``, which ends by closing
    its stdin or killing it, then the exit code (in 30 s)."""
    process = await anyio.open_process(
        liminal_argv(scripted_agent_argv()),
        env=child_env(home, AGENT_CLAUDE_CONFIG_DIR=str(home / "claude"),
                      CLAUDE_CONFIG_DIR=str(home / "claude"), **env),
        start_new_session=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proxy = ProxyProcess(process)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(proxy.pump)
            tg.start_soon(proxy.pump_stderr)
            await body(proxy)
            code = await proxy.wait_exit()
            tg.cancel_scope.cancel()
    finally:
        await proxy.aclose()
    return code
