"""What a person or a log collector reads on liminal's stderr is one format: liminal's JSON lines
(stderr is not a terminal here), the libraries' logging rendered the same way, and their routine
INFO chatter at debug.

Before: a short session through ``liminal acp`` printed ``watchfiles.main INFO 1 change
detected`` between the JSON lines each time a session file changed, and ``liminal serve``
printed ``websockets.server INFO server listening on ...`` and the like.

The only other lines liminal writes there are its own sentences to a person, each starting with
``liminal``: the address ``liminal serve`` listens on, an agent that could not start or died.

The agent's stderr is liminal's to write too (``liminal.transport.agentlog``): before, it was
inherited, and the adapter's coloured lines sat between liminal's JSON lines.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from liminal.transport.agentlog import MAX_LINE_BYTES
from tests.support.proxy_process import (
    ProxyProcess,
    child_env,
    json_objects,
    liminal_argv,
    run_liminal,
    scripted_agent_argv,
)
from tests.support.served import rpc, serve

CWD = "/work/project"


def foreign_lines(stderr: str) -> list[str]:
    """Lines that are neither a JSON log record nor one of liminal's sentences."""
    found = []
    for line in stderr.splitlines():
        if line.startswith("liminal"):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            found.append(line)
            continue
        if not (isinstance(record, dict) and {"event", "level", "timestamp"} <= record.keys()):
            found.append(line)
    return found


def chatter(stderr: str) -> list[dict[str, object]]:
    """Library records at INFO or above that are routine (at the default level, none); the
    agent's lines are not a library's."""
    return [r for r in json_objects(stderr.splitlines())
            if str(r.get("logger", "liminal")).split(".")[0] not in ("liminal", "agent")
            and r.get("level") in ("debug", "info")]


def file_lines(tmp_path: Path, session: str) -> int:
    """The lines of the session file the scripted agent keeps for ``session``."""
    return sum(len(p.read_bytes().splitlines())
               for p in (tmp_path / "claude" / "projects").glob(f"*/{session}.jsonl"))


def indexed_lines(tmp_path: Path, session: str) -> int:
    """The lines of ``session``'s file the index worker has stored."""
    db = tmp_path / "liminal-home" / "liminal.db"
    with contextlib.closing(sqlite3.connect(db, timeout=30)) as conn:
        query = "SELECT count(*) FROM session_records WHERE backing_id = ?"
        return int(conn.execute(query, (session,)).fetchone()[0])


async def stderr_of(tmp_path: Path, session: Callable[[ProxyProcess], Awaitable[None]]) -> bytes:
    """liminal's stderr over ``session`` (which ends by closing its input), after a clean exit."""
    seen: list[ProxyProcess] = []

    async def body(proxy: ProxyProcess) -> None:
        seen.append(proxy)
        await session(proxy)

    assert await run_liminal(tmp_path, body, LIMINAL_MCP_ENABLED="false") == 0
    return bytes(seen[0].stderr)


@pytest.mark.anyio
async def test_a_liminal_acp_session_logs_in_one_format(tmp_path: Path) -> None:
    async def session(proxy: ProxyProcess) -> None:
        await proxy.request("initialize", {"protocolVersion": 1})
        thread = (await proxy.request("session/new", {"cwd": CWD, "mcpServers": []}))["result"]["sessionId"]
        await proxy.prompt(thread, "turn 0 chunks:3 used:1000")
        # The index worker tails the session file once it has stored the thread (a stdlib
        # library, watchfiles, tells it of each change): the turns after that are what it sees.
        with anyio.fail_after(60):
            while b"indexing session file" not in proxy.stderr:  # noqa: ASYNC110 - no event for it
                await anyio.sleep(0.05)
        for turn in range(1, 4):
            answer = await proxy.prompt(thread, f"turn {turn} chunks:3 used:{1000 * (turn + 1)}")
            assert answer["result"]["stopReason"] == "end_turn", answer
            with anyio.fail_after(60):  # a change seen per turn: the worker has read it whole
                while not 0 < file_lines(tmp_path, thread) <= indexed_lines(tmp_path, thread):  # noqa: ASYNC110 - another process
                    await anyio.sleep(0.05)
        await proxy.close_stdin()

    stderr = (await stderr_of(tmp_path, session)).decode()
    assert '"agent started"' in stderr
    assert foreign_lines(stderr) == [], stderr
    assert chatter(stderr) == [], stderr


def test_a_liminal_serve_run_logs_in_one_format(tmp_path: Path) -> None:
    server = serve(tmp_path)
    try:
        for _ in range(2):
            with server.connect() as ws:
                assert rpc(ws, 1, "initialize", {"protocolVersion": 1})["result"]
                thread = rpc(ws, 2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["result"]["sessionId"]
                assert rpc(ws, 3, "session/prompt", {"sessionId": thread, "prompt": [
                    {"type": "text", "text": "chunks:3"}]})["result"]["stopReason"] == "end_turn"
                assert rpc(ws, 4, "_stderr", {"text": "\x1b[1mthe adapter of a connection\x1b[0m"})["result"] == {}
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(60) == 128 + signal.SIGTERM
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait(10)
    stderr = (tmp_path / "serve.log").read_text()
    assert '"connection opened"' in stderr and '"serving ACP over WebSocket"' in stderr
    agents = [r for r in records(stderr.encode()) if r.get("logger") == "agent"]
    assert [r["event"] for r in agents] == ["the adapter of a connection"] * 2
    assert len({r["agent"] for r in agents}) == 2  # each connection's own agent process
    assert foreign_lines(stderr) == [], stderr
    assert chatter(stderr) == [], stderr


def records(stderr: bytes) -> list[dict[str, Any]]:
    return json_objects(stderr.decode().splitlines())


@pytest.mark.anyio
async def test_the_agents_stderr_is_liminals_records_bounded_and_without_colour(tmp_path: Path) -> None:
    async def body(proxy: ProxyProcess) -> None:
        await proxy.request("initialize", {"protocolVersion": 1})
        await proxy.request("_stderr", {"text": "\x1b[32mINFO\x1b[0m adapter ready \x1b]0;title\x07"})
        # A line that never ends, the next one after it (a hostile or broken agent).
        await proxy.request("_stderr", {"text": "y" * 1_000_000, "end": "", "times": 5})
        await proxy.request("_stderr", {"text": "\nafter the flood"})
        await proxy.close_stdin()

    stderr = await stderr_of(tmp_path, body)
    assert b"\x1b" not in stderr
    assert foreign_lines(stderr.decode()) == [], stderr[-3000:]
    found = records(stderr)
    [started] = [r for r in found if r["event"] == "agent started"]
    agent = [r for r in found if r.get("logger") == "agent"]
    assert {r["agent"] for r in agent} == {started["pid"]}
    assert {r["level"] for r in agent} == {"info"}
    said = [r["event"] for r in agent]
    assert "INFO adapter ready " in said
    [flood] = [e for e in said if isinstance(e, str) and e.startswith("yyy")]
    assert flood == "y" * MAX_LINE_BYTES + f" … (cut at {MAX_LINE_BYTES:,} bytes)"
    assert said[-1] == "after the flood"


@pytest.mark.anyio
async def test_a_stderr_no_one_reads_stalls_neither_the_agent_nor_the_client(tmp_path: Path) -> None:
    """liminal's stderr is a pipe nobody reads while the agent writes megabytes to its own: the
    client's requests are all answered (the agent is never left blocked on its stderr, nor the
    forwarding on liminal's), and what could not be written is counted once it can be."""
    process = await anyio.open_process(
        liminal_argv(scripted_agent_argv()), start_new_session=True, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=child_env(tmp_path, LIMINAL_MCP_ENABLED="false", LIMINAL_STORE_INDEX="false",
                      LIMINAL_SWAP_ENABLED="false"))
    client = ProxyProcess(process)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.pump)
            await client.request("initialize", {"protocolVersion": 1})
            for n in range(20):  # 20 MB of stderr, in lines of 1 kB
                answer = await client.request("_stderr", {"text": f"{n} " + "z" * 1000, "times": 1000},
                                              timeout=120)
                assert answer["result"] == {}
            assert (await client.request("_echo", {"still": "here"}))["result"] == {"still": "here"}
            tg.start_soon(client.pump_stderr)  # a reader at last
            await client.close_stdin()
            assert await client.wait_exit(60) == 0
            tg.cancel_scope.cancel()
    finally:
        await client.aclose()
    found = records(bytes(client.stderr))
    dropped = [r for r in found if r.get("dropped")]
    assert dropped and all(r["logger"] == "agent" and r["level"] == "warning" for r in dropped)
    written = sum(1 for r in found if r.get("logger") == "agent" and "dropped" not in r)
    assert written + sum(int(r["dropped"]) for r in dropped) == 20_000
