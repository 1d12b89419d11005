"""``liminal acp`` as a real process between a raw client and a scripted agent subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from tests.support.commands import (
    offered_liminal_server,
    offers_liminal_commands,
    without_liminal_commands,
    without_liminal_ids,
    without_liminal_server,
)
from tests.support.proxy_process import ProxyProcess, child_env, liminal_argv, scripted_agent_argv

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def running(tmp_path: Path, agent: Sequence[str], *options: str, **env: str) -> AsyncIterator[ProxyProcess]:
    process = await anyio.open_process(
        liminal_argv(agent, *options), env=child_env(tmp_path, **env), start_new_session=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    proxy = ProxyProcess(process)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(proxy.pump)
            tg.start_soon(proxy.pump_stderr)
            yield proxy
            with anyio.move_on_after(30):
                await process.wait()
            tg.cancel_scope.cancel()
    finally:
        await proxy.aclose()


def odd_params(i: int) -> str:
    return json.dumps({"i": i, "text": "é中\U0001f600 \\ \"quoted\"", "big": 10**30 + i,
                       "_meta": {"nested": [1, {"x": None}]}}, ensure_ascii=i % 2 == 0)


async def test_a_long_exchange_is_byte_exact_both_ways(tmp_path: Path) -> None:
    async with running(tmp_path, scripted_agent_argv()) as proxy:
        sent = bytearray()

        async def send(line: bytes) -> None:
            sent.extend(line)
            await proxy.send(line)

        await send(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\n')
        await proxy.wait_for(lambda m: m.get("id") == 0)
        await send(b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}\n')
        session = (await proxy.wait_for(lambda m: m.get("id") == 1))["result"]["sessionId"]
        for i in range(2, 202):
            if i % 3 == 0:
                line = (f'{{"jsonrpc":"2.0","id":{i},"method":"session/prompt","params":{{"sessionId":"{session}",'
                        '"prompt":[{"type":"text","text":"chunks:20 go"}]}}\n').encode()
            elif i % 3 == 1:
                line = f'{{ "jsonrpc" : "2.0", "id" : {i}, "method":"_echo", "params" : {odd_params(i)} }}\r\n'.encode()
            else:
                line = b'{"jsonrpc":"2.0","method":"_unknown/notification","params":{"n":%d}}\n' % i
            await send(line)
        await send(b"not json at all\n")
        await send(b'{"jsonrpc":"2.0","id":999,"method":"_say","params":{"raw":"  {\\"jsonrpc\\":\\"2.0\\",\\"method\\":\\"_auth/status_update\\"}  "}}\n')
        await proxy.wait_for(lambda m: m.get("id") == 999, timeout=60)
        await proxy.close_stdin()
        assert await proxy.wait_exit() == 0
    agent_in = (tmp_path / "agent_in.bin").read_bytes()
    agent_out = (tmp_path / "agent_out.bin").read_bytes()
    # Byte for byte, but for the session request, which reaches the agent with liminal's MCP
    # server added, and the command list, which reaches the client with liminal's added.
    lines = bytes(proxy.received).splitlines(keepends=True)
    assert [offers_liminal_commands(line) for line in lines] == [
        b'"available_commands_update"' in line for line in lines]
    assert b"".join(without_liminal_ids(without_liminal_commands(line)) for line in lines) == b"".join(
        without_liminal_commands(line) for line in agent_out.splitlines(keepends=True))
    forwarded = agent_in.splitlines(keepends=True)
    assert [offered_liminal_server(line) for line in forwarded] == [b'"session/new"' in line for line in forwarded]
    assert b"".join(without_liminal_server(line) for line in forwarded) == b"".join(
        without_liminal_server(line) for line in bytes(sent).splitlines(keepends=True))
    assert agent_out.count(b"agent_message_chunk") == 67 * 20


async def test_a_line_over_the_cap_gets_an_error_and_the_connection_stays_up(tmp_path: Path) -> None:
    async with running(tmp_path, scripted_agent_argv(), "--max-frame-bytes", "1000") as proxy:
        big = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "_echo", "params": {"x": "y" * 5000}}).encode()
        await proxy.send(big + b"\n")
        error = await proxy.wait_for(lambda m: m.get("id") == 5)
        assert error["error"]["code"] == -32600
        reply = await proxy.request("_echo", {"still": "alive"}, rpc_id=6)
        assert reply["result"] == {"still": "alive"}
        # the agent's own oversized answer: the client's request fails instead of hanging
        reply = await proxy.request("_echo", {"pad": 2000}, rpc_id=7)
        assert reply["error"]["code"] == -32603
        await proxy.close_stdin()
        assert await proxy.wait_exit() == 0
    assert b"over the 1000-byte cap" in proxy.stderr
    assert b"y" * 5000 not in (tmp_path / "agent_in.bin").read_bytes()


async def test_agent_death_fails_pending_requests_and_exits_non_zero(tmp_path: Path) -> None:
    async with running(tmp_path, scripted_agent_argv()) as proxy:
        await proxy.send(b'{"jsonrpc":"2.0","id":1,"method":"_hang","params":{}}\n')
        await proxy.send(b'{"jsonrpc":"2.0","id":2,"method":"_die","params":{"code":7}}\n')
        error = await proxy.wait_for(lambda m: m.get("id") == 1)
        assert error["error"]["code"] == -32603
        assert "exited" in error["error"]["message"]
        assert await proxy.wait_exit() == 7
    assert b"exited with code 7" in proxy.stderr


async def test_agent_stderr_reaches_liminals_stderr(tmp_path: Path) -> None:
    async with running(tmp_path, scripted_agent_argv()) as proxy:
        await proxy.request("_stderr", {"text": "adapter says hello"}, rpc_id=1)
        await proxy.close_stdin()
        await proxy.wait_exit()
    assert b"adapter says hello" in proxy.stderr


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def agent_pid(proxy: ProxyProcess) -> int:
    """The agent's pid, from liminal's own log line (stderr is JSON when it is not a terminal)."""
    with anyio.fail_after(10):
        while True:
            for line in bytes(proxy.stderr).splitlines():
                if b'"agent started"' in line:
                    return int(json.loads(line)["pid"])
            await anyio.sleep(0.05)


@pytest.mark.parametrize("flags", [("--ignore-eof",), ("--ignore-eof", "--ignore-term")])
async def test_client_leaving_stops_an_agent_that_ignores_eof(tmp_path: Path, flags: tuple[str, ...]) -> None:
    async with running(tmp_path, scripted_agent_argv(*flags), "--kill-grace", "1") as proxy:
        await proxy.request("initialize", {"protocolVersion": 1}, rpc_id=1)
        pid = await agent_pid(proxy)
        await proxy.close_stdin()
        assert await proxy.wait_exit(timeout=30) == 0
    with anyio.fail_after(10):
        while alive(pid):  # noqa: ASYNC110 - the agent is not our child: no event to wait on
            await anyio.sleep(0.05)


async def test_sigterm_to_liminal_stops_the_agent(tmp_path: Path) -> None:
    async with running(tmp_path, scripted_agent_argv("--ignore-eof"), "--kill-grace", "1") as proxy:
        await proxy.request("initialize", {"protocolVersion": 1}, rpc_id=1)
        pid = await agent_pid(proxy)
        proxy.process.send_signal(signal.SIGTERM)
        assert await proxy.wait_exit() == 128 + signal.SIGTERM
    assert not alive(pid)


async def test_an_agent_that_closes_its_output_but_keeps_running_counts_as_dead(tmp_path: Path) -> None:
    async with running(tmp_path, scripted_agent_argv(), "--kill-grace", "1") as proxy:
        pid = await agent_pid(proxy)
        await proxy.send(b'{"jsonrpc":"2.0","id":{"odd":"id"},"method":"_hang","params":{}}\n')
        await proxy.send(b'{"jsonrpc":"2.0","id":2,"method":"_close_stdout","params":{}}\n')
        for rpc_id in ({"odd": "id"}, 2):
            error = await proxy.wait_for(lambda m, i=rpc_id: m.get("id") == i)  # type: ignore[misc]
            assert error["error"]["code"] == -32603
        assert await proxy.wait_exit() == 128 + signal.SIGTERM
    assert not alive(pid)


@pytest.mark.parametrize("env", [
    {}, {"LIMINAL_SWAP_ENABLED": "false"}, {"LIMINAL_STORE_INDEX": "false"},
    {"LIMINAL_STORE_INDEXER": "inline"},
])
async def test_a_missing_agent_command_answers_every_request_and_exits_127(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """Before, the client's initialize got no answer at all: liminal said one line on stderr and
    exited, and the client was left to find the pipe closed."""
    missing = str(tmp_path / "no-such-adapter")
    async with running(tmp_path, [missing, "--flag"], **env) as proxy:
        first = await proxy.request("initialize", {"protocolVersion": 1}, rpc_id=0)
        after = await proxy.request("session/new", {"cwd": str(tmp_path), "mcpServers": []}, rpc_id=1)
        await proxy.close_stdin()
        assert await proxy.wait_exit() == 127
    for answer in (first, after):
        assert answer["error"]["code"] == -32603
        assert answer["error"]["message"] == (
            f"liminal could not start the agent `{missing} --flag`: no such file or directory")
    lines = bytes(proxy.stderr).decode().splitlines()
    assert [line for line in lines if not line.startswith("{")] == [
        f"liminal: could not start the agent `{missing} --flag`: no such file or directory"]
    assert "Traceback" not in proxy.stderr.decode()


async def test_an_agent_command_that_cannot_be_run_exits_126(tmp_path: Path) -> None:
    not_executable = tmp_path / "adapter"
    not_executable.write_text("#!/bin/sh\n")
    async with running(tmp_path, [str(not_executable)]) as proxy:
        answer = await proxy.request("initialize", {"protocolVersion": 1}, rpc_id=0)
        await proxy.close_stdin()
        assert await proxy.wait_exit() == 126
    assert answer["error"]["message"] == f"liminal could not start the agent `{not_executable}`: permission denied"
    assert b"could not start the agent" in proxy.stderr
    assert b"Traceback" not in proxy.stderr


NPX_404 = "npm error 404 Not Found - GET https://registry.npmjs.org/no-such-adapter"


async def test_an_agent_that_exits_before_answering_initialize_is_named_with_its_last_words(
    tmp_path: Path,
) -> None:
    """What ``npx -y no-such-adapter`` does: starts, says why on stderr, exits 1. The client's
    initialize got "the agent exited before answering (exit code 1)" at best, and none at all
    when it was sent after the exit."""
    agent = ["sh", "-c", f"read line; printf '\\033[31mnpm error code E404\\033[0m\\n{NPX_404}\\n' >&2; exit 1"]
    async with running(tmp_path, agent) as proxy:
        answer = await proxy.request("initialize", {"protocolVersion": 1}, rpc_id=0)
        after = await proxy.request("session/new", {"cwd": str(tmp_path), "mcpServers": []}, rpc_id=1)
        await proxy.close_stdin()
        assert await proxy.wait_exit() == 1
    said = f"npm error code E404 / {NPX_404}"
    assert answer["error"]["message"] == f"the agent exited before answering initialize (exit code 1); its stderr last said: {said}"
    assert after["error"]["message"] == f"the agent exited (exit code 1); its stderr last said: {said}"
    assert f"liminal: the agent (sh) exited with code 1; its stderr last said: {said}" in proxy.stderr.decode()


async def test_an_agent_that_exited_before_the_client_spoke_answers_its_initialize(tmp_path: Path) -> None:
    agent = ["sh", "-c", f"echo '{NPX_404}' >&2; exit 1"]
    async with running(tmp_path, agent) as proxy:
        with anyio.fail_after(30):
            while b"exited with code 1" not in proxy.stderr:  # noqa: ASYNC110 - no event for it
                await anyio.sleep(0.05)
        answer = await proxy.request("initialize", {"protocolVersion": 1}, rpc_id=0)
        await proxy.close_stdin()
        assert await proxy.wait_exit() == 1
    assert answer["error"]["message"] == f"the agent exited (exit code 1); its stderr last said: {NPX_404}"


async def test_sigkill_to_liminal_leaves_no_agent_behind(tmp_path: Path) -> None:
    from tests.support.processes import alive as running_still
    from tests.support.processes import group

    agent = scripted_agent_argv("--ignore-eof", "--ignore-term")
    async with running(tmp_path, agent, AGENT_CHILD_PER_SESSION="1") as proxy:
        await proxy.request("initialize", {"protocolVersion": 1}, rpc_id=1)
        await proxy.request("session/new", {"cwd": str(tmp_path), "mcpServers": []}, rpc_id=2)
        pid = await agent_pid(proxy)
        members = [p.pid for p in group(pid)]
        assert len(members) >= 2  # the adapter and the process it started for the session
        proxy.process.send_signal(signal.SIGKILL)  # liminal alone, not its group
        await proxy.wait_exit()
    with anyio.fail_after(30):
        while any(running_still(m) for m in members):  # noqa: ASYNC110 - not our children
            await anyio.sleep(0.05)


@pytest.mark.parametrize("indexer", ["inline", "worker"])
async def test_a_frame_queue_of_one_still_stores_initialize(tmp_path: Path, indexer: str) -> None:
    from liminal.store.sqlite import SqliteStore

    async with running(tmp_path, scripted_agent_argv(), LIMINAL_STORE_INDEXER=indexer,
                       LIMINAL_STORE_QUEUE_FRAMES="1") as proxy:
        await proxy.request("initialize", {"protocolVersion": 1}, rpc_id=1)
        session = (await proxy.request("session/new", {"cwd": str(tmp_path), "mcpServers": []},
                                       rpc_id=2))["result"]["sessionId"]
        await proxy.prompt(session, "chunks:30")
        await proxy.close_stdin()
        assert await proxy.wait_exit() == 0
    store = await SqliteStore.open(tmp_path / "liminal-home" / "liminal.db", create=False)
    try:
        stored = await store.frames(after_seq=-1, limit=1000)
    finally:
        await store.aclose()
    assert len({f.connection_id for f in stored}) == 1
    methods = [f.method for f in sorted(stored, key=lambda f: f.seq)]
    assert methods[:2] == ["initialize", "initialize"]  # the request and its answer
    assert len(methods) == 2 + 2 + 2 + 30


@pytest.mark.parametrize("broken", ["damaged database", "mongodb that does not answer"])
async def test_an_unusable_store_never_stops_forwarding_and_the_spool_keeps_every_frame(
    tmp_path: Path, broken: str
) -> None:
    from liminal.store.sqlite import SqliteStore

    home = tmp_path / "liminal-home"
    home.mkdir(mode=0o700)
    env: dict[str, str] = {}
    if broken == "damaged database":
        (home / "liminal.db").write_bytes(b"not a database at all" * 200)
    else:
        env["LIMINAL_STORE_URL"] = "mongodb://127.0.0.1:9/liminal?serverSelectionTimeoutMS=500"
    async with running(tmp_path, scripted_agent_argv(), **env) as proxy:
        await proxy.request("initialize", {"protocolVersion": 1}, rpc_id=1)
        session = (await proxy.request("session/new", {"cwd": str(tmp_path), "mcpServers": []},
                                       rpc_id=2))["result"]["sessionId"]
        answer = await proxy.request("session/prompt", {"sessionId": session, "prompt": [
            {"type": "text", "text": "chunks:10"}]}, rpc_id=3)
        assert answer["result"]["stopReason"] == "end_turn"
        await proxy.close_stdin()
        assert await proxy.wait_exit() == 0  # promptly: generous timeout, no timing assertion
    assert list((home / "spool").glob("*/*.spool"))  # the frames wait there
    # With a store that works, the next start replays them.
    (home / "liminal.db").unlink(missing_ok=True)
    async with running(tmp_path, scripted_agent_argv()) as proxy:
        await proxy.request("initialize", {"protocolVersion": 1}, rpc_id=1)
        await proxy.close_stdin()
        assert await proxy.wait_exit() == 0
    store = await SqliteStore.open(home / "liminal.db", create=False)
    try:
        methods = [f.method for f in await store.frames(after_seq=-1, limit=1000)]
    finally:
        await store.aclose()
    assert methods.count("session/prompt") == 2 and methods.count("session/update") == 10
