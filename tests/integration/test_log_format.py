"""What a person or a log collector reads on liminal's stderr is one format: liminal's JSON lines
(stderr is not a terminal here), the libraries' logging rendered the same way, and their routine
INFO chatter at debug.

Before: a short session through ``liminal acp`` printed ``watchfiles.main INFO 1 change
detected`` between the JSON lines each time a session file changed, and ``liminal serve``
printed ``websockets.server INFO server listening on ...`` and the like.

The only other lines liminal writes there are its own sentences to a person, each starting with
``liminal``: the address ``liminal serve`` listens on, an agent that could not start or died.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import anyio
import pytest

from tests.support.proxy_process import ProxyProcess, run_liminal
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
    """Library records at INFO or above that are routine (at the default level, none)."""
    records = []
    for line in stderr.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("logger", "liminal").split(".")[0] != "liminal":
            records.append(record)
    return [r for r in records if r.get("level") in ("debug", "info")]


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
            await anyio.sleep(0.3)  # past watchfiles' debounce: a change seen per turn
        await proxy.close_stdin()

    seen: list[ProxyProcess] = []

    async def body(proxy: ProxyProcess) -> None:
        seen.append(proxy)
        await session(proxy)

    assert await run_liminal(tmp_path, body, LIMINAL_MCP_ENABLED="false") == 0
    stderr = seen[0].stderr.decode()
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
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(60) == 128 + signal.SIGTERM
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait(10)
    stderr = (tmp_path / "serve.log").read_text()
    assert '"connection opened"' in stderr and '"serving ACP over WebSocket"' in stderr
    assert foreign_lines(stderr) == [], stderr
    assert chatter(stderr) == [], stderr
