"""``liminal serve`` as a real process with the scripted agent behind it, and a real
``websockets`` client: the handshake's refusals, the three token forms, ACP through it, an
oversized message, the token file, SIGTERM (issue 15)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.request import urlopen

import pytest
from websockets.exceptions import ConnectionClosed, ConnectionClosedError, InvalidStatus

from tests.support.proxy_process import agent_pids, child_env, scripted_agent_argv
from tests.support.served import Served, rpc, serve


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = serve(tmp_path, config="[proxy]\nmax_frame_bytes = 4096\n")
    try:
        yield server
    finally:
        server.stop()


def test_acp_over_a_websocket(served: Served, tmp_path: Path) -> None:
    with served.connect() as ws:
        assert ws.response is not None and len(ws.response.headers["Acp-Connection-Id"]) == 32
        init = rpc(ws, 1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        assert init["result"]["protocolVersion"] == 1
        session = rpc(ws, 2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["result"]["sessionId"]
        ws.send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
            "sessionId": session, "prompt": [{"type": "text", "text": "chunks:3"}]}}))
        updates = []
        while True:
            message = json.loads(ws.recv(timeout=30))
            if message.get("id") == 3:
                break
            updates.append(message)
        assert message["result"]["stopReason"] == "end_turn"
        assert sum(1 for u in updates if u.get("method") == "session/update") >= 3
    with urlopen(f"http://127.0.0.1:{served.port}/healthz", timeout=10) as answer:
        assert answer.status == 200 and answer.read() == b"ok\n"


@pytest.mark.parametrize("form", ["subprotocol", "query"])
def test_the_token_in_the_forms_a_browser_can_send(served: Served, form: str) -> None:
    if form == "subprotocol":
        ws = served.connect(headers={}, subprotocols=["acp", f"liminal.token.{served.token}"])
    else:
        ws = served.connect(headers={}, url=f"{served.url}?token={served.token}")
    with ws:
        assert rpc(ws, 1, "initialize", {"protocolVersion": 1})["result"]
        if form == "subprotocol":
            assert ws.subprotocol == "acp"


@pytest.mark.parametrize(("headers", "status"), [
    ({}, 401),
    ({"Authorization": "Bearer wrong"}, 401),
    ("origin", 403),
])
def test_refused_before_the_socket_opens(served: Served, headers: Any, status: int) -> None:
    if headers == "origin":
        headers = {"Authorization": f"Bearer {served.token}", "Origin": "https://evil.example"}
    with pytest.raises(InvalidStatus) as refused:
        served.connect(headers=headers)
    assert refused.value.response.status_code == status
    # The server is still there for the next one.
    with served.connect() as ws:
        assert rpc(ws, 1, "initialize", {"protocolVersion": 1})["result"]


def test_an_allowed_origin_connects(tmp_path: Path) -> None:
    server = serve(tmp_path, config='[serve]\norigins = "http://localhost:3000"\n')
    try:
        with server.connect(headers={"Authorization": f"Bearer {server.token}",
                                     "Origin": "http://localhost:3000"}) as ws:
            assert rpc(ws, 1, "initialize", {"protocolVersion": 1})["result"]
    finally:
        server.stop()


def test_an_oversized_message_gets_an_error_and_the_server_stays(served: Served) -> None:
    with served.connect() as ws:
        assert rpc(ws, 1, "initialize", {"protocolVersion": 1})["result"]
        answer = rpc(ws, 7, "_echo", {"blob": "x" * 10_000})  # max_frame_bytes is 4096
        assert answer["error"]["code"] in (-32600, -32700, -32603), answer
        assert rpc(ws, 8, "_echo", {"small": 1})["result"] == {"small": 1}
    with served.connect() as ws:  # far past the limit: this connection closes, not the server
        ws.send("y" * 40_000)
        # Closed by the server with 1009 (message too big): not any exception (a timeout of
        # the recv passed too), and not the client giving up.
        with pytest.raises(ConnectionClosedError) as closed:
            ws.recv(timeout=30)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009, closed.value
        assert closed.value.rcvd_then_sent is True  # the server closed first
    with served.connect() as ws:
        assert rpc(ws, 1, "initialize", {"protocolVersion": 1})["result"]


def test_the_token_file_is_private(served: Served) -> None:
    assert (served.home / "serve-token").stat().st_mode & 0o777 == 0o600
    assert served.home.stat().st_mode & 0o777 == 0o700
    assert len(served.token) >= 40


def test_sigterm_closes_connections_and_exits(served: Served) -> None:
    with served.connect() as ws:
        assert rpc(ws, 1, "initialize", {"protocolVersion": 1})["result"]
        started = time.monotonic()
        served.proc.send_signal(signal.SIGTERM)
        assert served.proc.wait(60) == 128 + signal.SIGTERM
        assert time.monotonic() - started < 30


def test_a_remote_listen_needs_the_flag(tmp_path: Path) -> None:
    env = child_env(tmp_path)
    done = subprocess.run([sys.executable, "-m", "liminal", "serve", "--listen", "0.0.0.0:0", "--",
                           *scripted_agent_argv()], env=env, capture_output=True, timeout=60, check=False)
    assert done.returncode == 2
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "serve.listen" in lines[0] and "--allow-remote" in lines[0]
    assert "Traceback" not in done.stderr.decode()
    assert not (Path(env["LIMINAL_HOME"]) / "serve-token").exists()


def test_a_thread_open_in_one_connection_is_locked_in_another(tmp_path: Path) -> None:
    server = serve(tmp_path, config="[serve]\nbusy_wait_seconds = 1\n")
    try:
        with server.connect() as first:
            rpc(first, 1, "initialize", {"protocolVersion": 1})
            thread = rpc(first, 2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["result"]["sessionId"]
            with server.connect() as second:
                rpc(second, 1, "initialize", {"protocolVersion": 1})
                refused = rpc(second, 2, "session/load", {"sessionId": thread, "cwd": str(tmp_path),
                                                          "mcpServers": []})
                assert refused["error"]["code"] == -32002 and "another connection" in refused["error"]["message"]
                # Other threads are not held up.
                assert "result" in rpc(second, 3, "session/new", {"cwd": str(tmp_path), "mcpServers": []})
        # The first closed: the thread is free.
        with server.connect() as third:
            rpc(third, 1, "initialize", {"protocolVersion": 1})
            loaded = rpc(third, 2, "session/load", {"sessionId": thread, "cwd": str(tmp_path), "mcpServers": []})
            assert "result" in loaded, loaded
        lock_files = list((server.home / "locks").glob("*.lock"))
        assert lock_files and all(p.stat().st_mode & 0o777 == 0o600 for p in lock_files)
    finally:
        server.stop()


def test_a_turn_under_way_when_the_client_leaves_finishes(served: Served, tmp_path: Path) -> None:
    with served.connect() as ws:
        rpc(ws, 1, "initialize", {"protocolVersion": 1})
        thread = rpc(ws, 2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["result"]["sessionId"]
        ws.send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
            "sessionId": thread, "prompt": [{"type": "text", "text": "ask chunks:2"}]}}))
        while "session/request_permission" not in ws.recv(timeout=30):
            pass
    # Gone without answering: liminal answers for the client, the turn ends, the agent says so.
    agent_in = tmp_path / "agent_in.bin"
    deadline = time.monotonic() + 30
    while b'"cancelled"' not in agent_in.read_bytes() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert b'"outcome":{"outcome":"cancelled"}' in agent_in.read_bytes()
    # And the thread is free for the next connection, which loads it.
    with served.connect() as ws:
        rpc(ws, 1, "initialize", {"protocolVersion": 1})
        assert "result" in rpc(ws, 2, "session/load", {"sessionId": thread, "cwd": str(tmp_path), "mcpServers": []})


def test_a_client_that_takes_over_a_running_turn_can_cancel_it(served: Served, tmp_path: Path) -> None:
    """The turn goes on after its client left; the client that comes back while it runs gets
    the thread, stops the turn with session/cancel, and prompts again."""
    with served.connect() as ws:
        rpc(ws, 1, "initialize", {"protocolVersion": 1})
        thread = rpc(ws, 2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["result"]["sessionId"]
        ws.send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
            "sessionId": thread, "prompt": [{"type": "text", "text": "until-cancel"}]}}))
        while '"working"' not in ws.recv(timeout=30):
            pass
    with served.connect() as ws:
        rpc(ws, 1, "initialize", {"protocolVersion": 1})
        assert "result" in rpc(ws, 3, "session/load", {"sessionId": thread, "cwd": str(tmp_path), "mcpServers": []})
        ws.send(json.dumps({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": thread}}))
        agent_in = tmp_path / "agent_in.bin"
        deadline = time.monotonic() + 30
        while b'"session/cancel"' not in agent_in.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert b'"session/cancel"' in agent_in.read_bytes()
        ws.send(json.dumps({"jsonrpc": "2.0", "id": 4, "method": "session/prompt", "params": {
            "sessionId": thread, "prompt": [{"type": "text", "text": "again chunks:1"}]}}))
        seen = []
        while not any(m.get("id") == 4 and "method" not in m for m in seen):
            seen.append(json.loads(ws.recv(timeout=30)))
        assert (seen[-1].get("result") or {}).get("stopReason") == "end_turn", seen[-1]
        # The agent ended the old turn as cancelled; that answer (to the gone client's id 3) is
        # dropped, never taken for this client's own id 3 (its load, answered before).
        assert b'"stopReason":"cancelled"' in (tmp_path / "agent_out.bin").read_bytes()
        assert not any(m.get("id") == 3 for m in seen), seen


def test_the_agent_dying_mid_conversation_is_started_again(tmp_path: Path) -> None:
    claude = tmp_path / "claude"
    claude.mkdir()
    server = serve(tmp_path, env={"AGENT_CLAUDE_CONFIG_DIR": str(claude), "CLAUDE_CONFIG_DIR": str(claude)})
    try:
        with server.connect() as ws:
            rpc(ws, 1, "initialize", {"protocolVersion": 1})
            thread = rpc(ws, 2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["result"]["sessionId"]
            prompt = {"sessionId": thread, "prompt": [{"type": "text", "text": "hello there"}]}
            assert rpc(ws, 3, "session/prompt", prompt)["result"]["stopReason"] == "end_turn"
            died = rpc(ws, 4, "_die", {"code": 3})
            assert "error" in died
            # The next prompt works, on a new agent process that resumed the thread, and the
            # turn says once what happened.
            ws.send(json.dumps({"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": {
                **prompt, "prompt": [{"type": "text", "text": "still there?"}]}}))
            frames = []
            while True:
                message = json.loads(ws.recv(timeout=60))
                frames.append(message)
                if message.get("id") == 5:
                    break
            assert message["result"]["stopReason"] == "end_turn", (tmp_path / "serve.log").read_text()[-2000:]
            notes = [m for m in frames if "started it again" in json.dumps(m)]
            assert len(notes) == 1 and notes[0]["params"]["sessionId"] == thread
        pids = agent_pids(tmp_path)
        assert len(pids) == 2
        resumed = (tmp_path / f"agent_in.bin.{pids[1]}").read_text()
        assert "session/resume" in resumed or "session/load" in resumed
    finally:
        server.stop()


def test_two_servers_on_one_home_see_each_others_locks(tmp_path: Path) -> None:
    config = "[serve]\nbusy_wait_seconds = 1\n"
    one = serve(tmp_path, config=config)
    two = serve(tmp_path)  # the same LIMINAL_HOME, its config and token
    try:
        assert one.token == two.token
        with one.connect() as first:
            rpc(first, 1, "initialize", {"protocolVersion": 1})
            thread = rpc(first, 2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["result"]["sessionId"]
            with two.connect() as second:
                rpc(second, 1, "initialize", {"protocolVersion": 1})
                refused = rpc(second, 2, "session/load", {"sessionId": thread, "cwd": str(tmp_path),
                                                          "mcpServers": []})
                assert refused["error"]["code"] == -32002
        with two.connect() as second:  # the first connection closed: free in the other server too
            rpc(second, 1, "initialize", {"protocolVersion": 1})
            assert "result" in rpc(second, 2, "session/load", {"sessionId": thread, "cwd": str(tmp_path),
                                                               "mcpServers": []})
    finally:
        for server in (one, two):
            server.stop()


@pytest.mark.skipif(not os.environ.get("LIMINAL_TEST_REDIS_URL"), reason="LIMINAL_TEST_REDIS_URL is not set")
def test_two_servers_on_two_homes_and_one_redis_see_each_others_locks(tmp_path: Path) -> None:
    """Sidecars on different machines share no home: their locks meet in Redis."""
    url = os.environ["LIMINAL_TEST_REDIS_URL"]
    config = f'[cache]\nurl = "{url}"\n[serve]\nbusy_wait_seconds = 1\n'
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one = serve(tmp_path / "a", config=config)
    two = serve(tmp_path / "b", config=config)
    try:
        with one.connect() as first:
            rpc(first, 1, "initialize", {"protocolVersion": 1})
            thread = rpc(first, 2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["result"]["sessionId"]
            with two.connect() as second:
                rpc(second, 1, "initialize", {"protocolVersion": 1})
                refused = rpc(second, 2, "session/prompt", {"sessionId": thread, "prompt": []})
                assert refused["error"]["code"] == -32002
        # Released in Redis when the first connection ended.
        with two.connect() as second:
            rpc(second, 1, "initialize", {"protocolVersion": 1})
            answer = rpc(second, 2, "session/prompt", {"sessionId": thread, "prompt": []})
            assert answer.get("result", {}).get("stopReason") == "end_turn", answer  # the turn ran
    finally:
        for server in (one, two):
            server.stop()


@pytest.mark.skipif(not os.environ.get("LIMINAL_TEST_REDIS_URL"), reason="LIMINAL_TEST_REDIS_URL is not set")
def test_a_redis_lock_of_a_dead_holder_expires(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import anyio

    from liminal.serve import locks as lockmod

    url = os.environ["LIMINAL_TEST_REDIS_URL"]
    # Renewed ten times within an expiry: a busy machine does not lose the lock.
    monkeypatch.setattr(lockmod, "REDIS_TTL_MS", 1000)
    monkeypatch.setattr(lockmod, "RENEW_SECONDS", 0.1)

    async def body() -> None:
        holder = lockmod.ThreadLocks(tmp_path / "h1", url)
        other = lockmod.ThreadLocks(tmp_path / "h2", url)
        thread = f"t-{os.getpid()}-{time.monotonic_ns()}"
        taken_at = time.monotonic()
        assert await holder.try_take(thread)
        # Wait for the moment the first expiry has passed; the key is still the holder's, so
        # it was renewed (a lock only taken, never renewed, is gone by then).
        while time.monotonic() < taken_at + 1.5 * lockmod.REDIS_TTL_MS / 1000:  # noqa: ASYNC110
            await anyio.sleep(0.05)
        assert await holder._redis().get(holder.key(thread)) == holder.token.encode()
        assert not await other.try_take(thread)
        assert holder._renewer is not None
        holder._renewer.cancel()  # the holder "dies": nobody renews
        taken = False
        for _ in range(100):  # the expiry is 1 s; up to 10 s on a busy machine
            taken = await other.try_take(thread)
            if taken:
                break
            await anyio.sleep(0.1)
        assert taken
        await other.release_all()
        await holder.release_all()

    anyio.run(body)


def test_session_list_answers_with_liminals_threads(served: Served, tmp_path: Path) -> None:
    env = child_env(tmp_path)
    with served.connect() as ws:
        rpc(ws, 1, "initialize", {"protocolVersion": 1})
        thread = rpc(ws, 2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["result"]["sessionId"]
        rpc(ws, 3, "session/prompt", {"sessionId": thread, "prompt": [{"type": "text", "text": "hello"}]})
        # The user names the thread (the index runs a little behind: wait until it knows it).
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            done = subprocess.run([sys.executable, "-m", "liminal", "threads", "rename", thread, "Flux", "work"],
                                  env=env, capture_output=True, timeout=60, check=False)
            if done.returncode == 0:
                break
            time.sleep(0.2)
        assert done.returncode == 0, done.stderr
        listed = rpc(ws, 4, "session/list", {"cwd": str(tmp_path)})["result"]["sessions"]
        mine = [s for s in listed if s["sessionId"] == thread]
        assert len(mine) == 1 and mine[0]["title"] == "Flux work" and mine[0]["updatedAt"]


def test_sigterm_does_not_wait_for_a_turn_that_does_not_end(tmp_path: Path) -> None:
    server = serve(tmp_path, config="[serve]\nshutdown_seconds = 1\n")
    try:
        with server.connect() as ws:
            rpc(ws, 1, "initialize", {"protocolVersion": 1})
            thread = rpc(ws, 2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["result"]["sessionId"]
            ws.send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
                "sessionId": thread, "prompt": [{"type": "text", "text": "ask"}]}}))
            while "session/request_permission" not in ws.recv(timeout=30):
                pass  # the turn waits for the user, who does not answer
            started = time.monotonic()
            server.proc.send_signal(signal.SIGTERM)
            assert server.proc.wait(60) == 128 + signal.SIGTERM
            assert time.monotonic() - started < 15
    finally:
        if server.proc.poll() is None:
            server.stop()


def drop_mid_turn(served: Served, tmp_path: Path) -> str:
    """A connection opens a thread, starts a turn that runs until cancelled, and drops."""
    with served.connect() as ws:
        rpc(ws, 1, "initialize", {"protocolVersion": 1})
        thread = str(rpc(ws, 2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["result"]["sessionId"])
        ws.send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
            "sessionId": thread, "prompt": [{"type": "text", "text": "until-cancel"}]}}))
        while '"working"' not in ws.recv(timeout=30):
            pass
    return thread


def test_a_take_over_answers_what_came_before_and_frees_the_connections_own_threads(
        served: Served, tmp_path: Path) -> None:
    """Requests sent just before the load that takes a dropped turn over are answered (they
    got nothing), and the connection's own threads stay open to it (it locked itself out)."""
    running = drop_mid_turn(served, tmp_path)
    with served.connect() as ws:
        for rpc_id, method, params in ((1, "initialize", {"protocolVersion": 1}),
                                       (2, "session/new", {"cwd": str(tmp_path), "mcpServers": []}),
                                       (3, "session/load", {"sessionId": running, "cwd": str(tmp_path), "mcpServers": []})):
            ws.send(json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params}))
        answers: dict[int, dict[str, Any]] = {}
        while len(answers) < 3:
            message = json.loads(ws.recv(timeout=30))
            if "method" not in message:
                answers[message["id"]] = message
        assert all("result" in a for a in answers.values()), answers
        own = answers[2]["result"]["sessionId"]
        loaded = rpc(ws, 4, "session/load", {"sessionId": own, "cwd": str(tmp_path), "mcpServers": []})
        assert "result" in loaded, loaded


def test_a_message_only_the_lenient_parser_reads_still_waits_for_the_lock(tmp_path: Path) -> None:
    """NaN or an escaped key: the router reads such a prompt (the stdlib parser), so the lock
    must too, or it reaches the agent of a thread another connection holds."""
    server = serve(tmp_path, config="[serve]\nbusy_wait_seconds = 0.5\n")
    try:
        with server.connect() as a, server.connect() as b:
            rpc(a, 1, "initialize", {"protocolVersion": 1})
            thread = rpc(a, 2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["result"]["sessionId"]
            rpc(b, 1, "initialize", {"protocolVersion": 1})
            for n, raw in enumerate((
                    '{"jsonrpc":"2.0","id":%d,"method":"session/prompt","x":NaN,"params":{"sessionId":"%s","prompt":[]}}',
                    '{"jsonrpc":"2.0","id":%d,"me\\u0074hod":"session/prompt","params":{"sessionId":"%s","prompt":[]}}'),
                    start=10):
                b.send(raw % (n, thread))
                while (answer := json.loads(b.recv(timeout=30))).get("id") != n:
                    pass
                assert answer.get("error", {}).get("code") == -32002, answer
    finally:
        server.stop()


def test_a_listen_address_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "liminal", "serve", "--listen", f"127.0.0.1:{port}", "--", *scripted_agent_argv()],
            env=child_env(tmp_path), capture_output=True, timeout=60)
    lines = [line for line in done.stderr.decode().splitlines() if line.startswith("liminal serve: serve.listen")]
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr.decode(), done.stderr


@pytest.mark.parametrize("kind", ["not UTF-8", "a folder", "not a token"])
def test_a_token_file_that_cannot_be_the_token_is_one_line_and_exit_2(tmp_path: Path, kind: str) -> None:
    """Left damaged (a disk error, a hand edit), the token file crashed liminal serve with a
    traceback; one holding something no browser can offer was taken as the token."""
    env = child_env(tmp_path)
    home = Path(env["LIMINAL_HOME"])
    home.mkdir(mode=0o700)
    path = home / "serve-token"
    if kind == "not UTF-8":
        path.write_bytes(b"\xff\xfe" * 20 + b"\n")
    elif kind == "a folder":
        path.mkdir()
    else:
        path.write_text("my token, with spaces and é\n")
    path.chmod(0o700 if kind == "a folder" else 0o600)
    done = subprocess.run([sys.executable, "-m", "liminal", "serve", "--listen", "127.0.0.1:0", "--",
                           *scripted_agent_argv()], env=env, capture_output=True, timeout=60, check=False)
    err = done.stderr.decode()
    assert done.returncode == 2 and "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "serve-token" in lines[0] and "delete it" in lines[0], err


def test_an_agent_starts_at_initialize_not_at_connect(served: Served, tmp_path: Path) -> None:
    """Three authenticated probes that never send initialize start no agent and no index worker:
    before, each accepted socket started both at once (three probes, three adapters)."""
    with contextlib.ExitStack() as stack:
        probes = [stack.enter_context(served.connect()) for _ in range(3)]
        with served.connect() as ws:  # a client that initializes gets its agent, as before
            assert rpc(ws, 1, "initialize", {"protocolVersion": 1})["result"]["protocolVersion"] == 1
            assert "result" in rpc(ws, 2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})
        assert len(agent_pids(tmp_path)) == 1
        # What a probe sends before initialize is answered, and starts nothing either.
        probes[0].send(json.dumps({"jsonrpc": "2.0", "id": 5, "method": "session/new",
                                   "params": {"cwd": str(tmp_path), "mcpServers": []}}))
        refused = json.loads(probes[0].recv(timeout=30))
        assert refused["id"] == 5 and refused["error"]["code"] == -32600, refused
        assert "initialize" in refused["error"]["message"]
        probes[1].send('{"jsonrpc":"2.0","method":"session/cancel","params":{}}')  # dropped
        probes[1].send("not json")
        assert json.loads(probes[1].recv(timeout=30))["error"]["code"] == -32700
        assert rpc(probes[2], 9, "session/list", {})["error"]["code"] == -32600
        assert len(agent_pids(tmp_path)) == 1
        log = (tmp_path / "serve.log").read_text()
        assert log.count('"agent started"') == 1, log


def test_a_connection_that_never_initializes_is_closed(tmp_path: Path) -> None:
    server = serve(tmp_path, config="[serve]\ninitialize_seconds = 1\n")
    try:
        with server.connect() as ws:
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=60)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
        with server.connect() as ws:  # initialized in time: it stays, with its agent
            assert rpc(ws, 1, "initialize", {"protocolVersion": 1})["result"]
            assert "result" in rpc(ws, 2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})
        assert len(agent_pids(tmp_path)) == 1
    finally:
        server.stop()


def test_a_connection_past_max_connections_is_refused_with_503(tmp_path: Path) -> None:
    """``serve.max_connections`` (issue 21: the 503 never ran in a test): the one past the limit
    is refused before its socket opens, and once one closes there is room again."""
    server = serve(tmp_path, config="[serve]\nmax_connections = 2\n")
    try:
        with server.connect() as first, server.connect() as second:
            for ws in (first, second):  # both are being served (counted) before the third comes
                assert rpc(ws, 1, "initialize", {"protocolVersion": 1})["result"]
            with pytest.raises(InvalidStatus) as refused:
                server.connect()
            assert refused.value.response.status_code == 503
            assert b"too many connections" in refused.value.response.body
            # The two still work.
            assert rpc(first, 2, "_echo", {"still": 1})["result"] == {"still": 1}
        deadline = time.monotonic() + 30
        while True:  # the server notices the two closes a moment after the client
            try:
                third = server.connect()
                break
            except InvalidStatus as exc:
                assert exc.response.status_code == 503 and time.monotonic() < deadline
                time.sleep(0.05)
        with third:
            assert rpc(third, 1, "initialize", {"protocolVersion": 1})["result"]
        log = (tmp_path / "serve.log").read_text()
        assert log.count("too many connections") >= 1, log
    finally:
        server.stop()


def test_an_agent_that_keeps_dying_is_not_started_a_fourth_time(tmp_path: Path) -> None:
    """The agent's crash loop ends (issue 21: the limit had no test): three deaths within two
    minutes are each followed by a new agent that resumes the thread; the fourth is not, the
    client's request is answered with the error, the connection closes, and the server goes on
    serving others."""
    claude = tmp_path / "claude"
    claude.mkdir()
    server = serve(tmp_path, env={"AGENT_CLAUDE_CONFIG_DIR": str(claude), "CLAUDE_CONFIG_DIR": str(claude)})
    try:
        with server.connect() as ws:
            rpc(ws, 1, "initialize", {"protocolVersion": 1})
            thread = rpc(ws, 2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["result"]["sessionId"]
            prompt = {"sessionId": thread, "prompt": [{"type": "text", "text": "hello there"}]}
            assert rpc(ws, 3, "session/prompt", prompt)["result"]["stopReason"] == "end_turn"
            for death in range(1, 4):
                assert "error" in rpc(ws, 10 * death, "_die", {"code": 3})
                # Started again: the next prompt is answered by a new process.
                answer = rpc(ws, 10 * death + 1, "session/prompt", prompt)
                assert answer.get("result", {}).get("stopReason") == "end_turn", (
                    death, answer, (tmp_path / "serve.log").read_text()[-3000:])
                assert len(agent_pids(tmp_path)) == 1 + death
            died = rpc(ws, 40, "_die", {"code": 3})
            assert "exit code 3" in died["error"]["message"], died
            # Not again: the connection ends, with no fifth agent.
            with pytest.raises(ConnectionClosed):
                while True:
                    ws.recv(timeout=30)
        assert len(agent_pids(tmp_path)) == 4
        log = (tmp_path / "serve.log").read_text()
        assert log.count("the agent keeps dying; not restarting it again") == 1, log[-3000:]
        # The server is still there: the next connection gets an agent of its own.
        with server.connect() as ws:
            assert rpc(ws, 1, "initialize", {"protocolVersion": 1})["result"]
            assert "result" in rpc(ws, 2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})
        assert len(agent_pids(tmp_path)) == 5
    finally:
        server.stop()


def test_an_agent_that_cannot_start_answers_each_connections_requests(tmp_path: Path) -> None:
    """Before, a connection whose agent could not start had its initialize never answered: the
    proxy returned 127 at once and the socket closed."""
    missing = str(tmp_path / "no-such-adapter")
    server = serve(tmp_path, agent=[missing])
    try:
        for _ in range(2):  # each connection, and the server goes on
            with server.connect() as ws:
                first = rpc(ws, 1, "initialize", {"protocolVersion": 1})
                after = rpc(ws, 2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})
            for answer in (first, after):
                assert answer["error"]["message"] == (
                    f"liminal could not start the agent `{missing}`: no such file or directory")
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(60) == 128 + signal.SIGTERM
    finally:
        server.stop()
    log = (tmp_path / "serve.log").read_text()
    assert log.count('"exit_code": 127') == 2, log


@pytest.mark.parametrize("client", ["plain", "notices"])
def test_a_restarted_agent_is_told_as_the_client_declared(tmp_path: Path, client: str) -> None:
    """The turn after the agent died and was started again says so, once: a ``notice``
    (severity warning) to a client that declared ACP's ``session.notices``, never a thought
    (live information, not history); the thought to any other client."""
    claude = tmp_path / "claude"
    claude.mkdir()
    capabilities = {"session": {"notices": {}}} if client == "notices" else {}
    server = serve(tmp_path, env={"AGENT_CLAUDE_CONFIG_DIR": str(claude), "CLAUDE_CONFIG_DIR": str(claude)})
    try:
        with server.connect() as ws:
            rpc(ws, 1, "initialize", {"protocolVersion": 1, "clientCapabilities": capabilities})
            thread = rpc(ws, 2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["result"]["sessionId"]
            prompt = {"sessionId": thread, "prompt": [{"type": "text", "text": "hello there"}]}
            assert rpc(ws, 3, "session/prompt", prompt)["result"]["stopReason"] == "end_turn"
            assert "error" in rpc(ws, 4, "_die", {"code": 3})
            ws.send(json.dumps({"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": prompt}))
            updates = []
            while True:
                message = json.loads(ws.recv(timeout=30))
                if message.get("id") == 5:
                    break
                if message.get("method") == "session/update":
                    updates.append(message["params"]["update"])
            assert message["result"]["stopReason"] == "end_turn", message
    finally:
        server.stop()
    told = [u for u in updates if (u.get("_meta") or {}).get("liminal", {}).get("agentRestarted") == 3]
    assert len(told) == 1, updates
    if client == "notices":
        assert told[0]["sessionUpdate"] == "notice" and told[0]["severity"] == "warning", told
        assert "liminal started it again" in told[0]["title"] and "3" in told[0]["description"]
        assert "agent_thought_chunk" not in [u["sessionUpdate"] for u in updates]
    else:
        assert told[0]["sessionUpdate"] == "agent_thought_chunk" and "exit code 3" in told[0]["content"]["text"]
        assert "notice" not in [u["sessionUpdate"] for u in updates]


def test_a_client_asking_for_acp_v2_is_answered_v2(tmp_path: Path) -> None:
    """As ``liminal acp`` answers it (tests/integration/test_protocol_version_scripted.py): the
    client in v2 at liminal's edge (``liminal.acp.v2``), the agent, which would answer 2, asked
    for 1 (``liminal.kernel.version``)."""
    server = serve(tmp_path, env={"AGENT_SPEAKS_V2": "1"})
    try:
        with server.connect() as ws:
            answer = rpc(ws, 1, "initialize", {"protocolVersion": 2, "info": {"name": "c", "version": "1"}})
            assert answer["result"]["protocolVersion"] == 2 and "capabilities" in answer["result"], answer
            opened = rpc(ws, 2, "session/new", {"cwd": str(tmp_path)})  # v2: mcpServers may be left out
            assert "sessionId" in opened["result"] and "modes" not in opened["result"], opened
    finally:
        server.stop()
