"""``liminal acp`` with a scripted agent: the conversation lands in the store, byte-exact."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import orjson
import pytest

from liminal import cli
from liminal.store.base import Store
from liminal.store.sqlite import SqliteStore
from tests.support.commands import (
    offered_liminal_server,
    without_liminal_additions,
    without_liminal_server,
)
from tests.support.mongo import KINDS, fresh_database
from tests.support.proxy_process import ProxyProcess, child_env, liminal_argv, scripted_agent_argv

pytestmark = pytest.mark.anyio


def lines(data: bytes) -> list[bytes]:
    return [line for line in data.split(b"\n") if line]


@pytest.fixture(params=KINDS)
async def store_url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """Empty for SQLite in liminal's home; else a MongoDB database of its own."""
    if request.param == "sqlite":
        yield ""
        return
    async with fresh_database() as url:
        yield url


async def open_recorded(home: Path, url: str) -> Store:
    if url:
        from liminal.store.mongo import MongoStore

        return await MongoStore.open(url)
    return await SqliteStore.open(home / "liminal.db", create=False)


async def test_a_conversation_through_liminal_acp_is_recorded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], store_url: str) -> None:
    env = child_env(tmp_path)
    env.pop("LIMINAL_STORE_URL", None)
    if store_url:
        env["LIMINAL_STORE_URL"] = store_url
    home = Path(env["LIMINAL_HOME"])
    process = await anyio.open_process(
        liminal_argv(scripted_agent_argv()), env=env, start_new_session=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proxy = ProxyProcess(process)
    sent = bytearray()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(proxy.pump)
            tg.start_soon(proxy.pump_stderr)

            async def request(rpc_id: int, method: str, params: object) -> dict[str, object]:
                line = orjson.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": method,
                                     "params": params}) + b"\n"
                sent.extend(line)
                await proxy.send(line)
                return await proxy.wait_for(lambda m: m.get("id") == rpc_id and "method" not in m)

            await request(0, "initialize", {"protocolVersion": 1})
            new = await request(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []})
            session = new["result"]["sessionId"]  # type: ignore[index]
            await request(2, "session/prompt", {"sessionId": session, "prompt": [
                {"type": "text", "text": "Explain the quasar ledger chunks:5"}]})
            await request(3, "session/prompt", {"sessionId": session, "prompt": [
                {"type": "text", "text": "and once more used:4321"}]})
            await proxy.close_stdin()
            assert await proxy.wait_exit() == 0
            tg.cancel_scope.cancel()
    finally:
        await proxy.aclose()

    store = await open_recorded(home, store_url)
    frames = await store.frames(limit=100_000)
    await store.aclose()
    # Every frame, both directions, byte-exact and in order.
    # (The session request as forwarded: with liminal's MCP server added.)
    stored = [f.raw for f in frames if f.direction == "c2a"]
    assert sum(offered_liminal_server(raw) for raw in stored) == 1
    assert [without_liminal_server(raw) for raw in stored] == [without_liminal_server(raw)
                                                               for raw in lines(bytes(sent))]
    agent_out = lines((tmp_path / "agent_out.bin").read_bytes())
    assert [f.raw for f in frames if f.direction == "a2c"] == agent_out
    # What the client got is the agent's bytes, but for liminal's message ids and the capabilities
    # liminal answers for (issue 25).
    assert [without_liminal_additions(f.raw + b"\n") for f in frames if f.direction == "a2c"] == [
        without_liminal_additions(line) for line in bytes(proxy.received).splitlines(keepends=True)]

    monkeypatch.setenv("LIMINAL_HOME", str(home))
    monkeypatch.delenv("LIMINAL_STORE_URL", raising=False)
    if store_url:
        monkeypatch.setenv("LIMINAL_STORE_URL", store_url)
    assert await anyio.to_thread.run_sync(cli.main, ["threads", "--json"]) == 0
    [thread] = orjson.loads(capsys.readouterr().out)
    assert (thread["id"], thread["turns"], thread["context_used"]) == (session, 2, 4321)
    assert thread["title"] == "Explain the quasar ledger chunks:5"
    assert await anyio.to_thread.run_sync(cli.main, ["history", session]) == 0
    out = capsys.readouterr().out
    assert "> Explain the quasar ledger chunks:5" in out
    assert "".join(f"chunk {i} é中" for i in range(5)) in out
    assert "context 4.3k of 200k tokens" in out  # the turn's heading: its last usage point
    assert await anyio.to_thread.run_sync(cli.main, ["search", "quasar", "--json"]) == 0
    hits = orjson.loads(capsys.readouterr().out)
    assert hits and hits[0]["thread_id"] == session
    assert not list((home / "spool").glob("*/*.spool"))
