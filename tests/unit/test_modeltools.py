"""liminal's MCP server in every session: the router's requests amended, nonces bound, the
model's slash commands handed over when its turn ends."""

from __future__ import annotations

import json
from pathlib import Path

from liminal.acp import jsonrpc
from liminal.acp.router import Router
from liminal.kernel.modeltools import SERVER_NAME, ModelTools
from liminal.kernel.threads import ThreadModel
from liminal.mcp import link

THREAD = "11111111-1111-4111-8111-111111111111"
BACKING = "22222222-2222-4222-8222-222222222222"
NOW = 1700000000.0
THEIRS = {"name": "github", "command": "gh-mcp", "args": [], "env": []}


def wired(tmp_path: Path) -> tuple[Router, ModelTools, list[link.SlashRequest]]:
    asked: list[link.SlashRequest] = []
    tools = ModelTools(tmp_path, on_slash=asked.append, threads=ThreadModel())
    router = Router(max_frame_bytes=1 << 20, connection_id="c1")
    for methods, hook in tools.request_hooks():
        router.add_request_hook(methods, hook)
    return router, tools, asked


def client(router: Router, tools: ModelTools, line: bytes) -> list[bytes]:
    router.receive_from_client(line + b"\n", NOW)
    out = router.take()
    for event in out.events:  # as the proxy's supervisor offers them
        tools.model.offer(event)  # the thread model tells the tools what they need
    return out.to_agent


def agent(router: Router, tools: ModelTools, line: bytes) -> None:
    router.receive_from_agent(line + b"\n", NOW)
    for event in router.take().events:
        tools.model.offer(event)  # the thread model tells the tools what they need


def forwarded(router: Router, tools: ModelTools, line: bytes) -> dict[str, object]:
    [sent] = client(router, tools, line)
    message: dict[str, object] = json.loads(sent)
    return message


def servers(message: dict[str, object]) -> list[dict[str, object]]:
    return message["params"]["mcpServers"]  # type: ignore[index, no-any-return]


def test_a_new_session_gets_a_server_bound_by_nonce_once_the_agent_names_it(tmp_path: Path) -> None:
    router, tools, _ = wired(tmp_path)
    sent = forwarded(router, tools, jsonrpc.request_frame(1, "session/new", {"cwd": "/w", "mcpServers": [THEIRS]}))
    theirs, ours = servers(sent)
    assert theirs == THEIRS and ours["name"] == SERVER_NAME
    args = ours["args"]
    assert isinstance(args, list) and args[:2] == ["-m", "liminal.mcp"] and "--bind" in args
    nonce = args[args.index("--bind") + 1]
    assert link.bound_thread(tmp_path, nonce) is None
    agent(router, tools, b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"' + THREAD.encode() + b'"}}')
    assert link.bound_thread(tmp_path, nonce) == THREAD


def test_a_new_session_the_agent_refuses_leaves_no_nonce_waiting(tmp_path: Path) -> None:
    """The nonce of a session/new is forgotten with its answer, an error too: the thread model
    tells the tools of opens that failed as of those that succeeded."""
    router, tools, _ = wired(tmp_path)
    forwarded(router, tools, jsonrpc.request_frame(1, "session/new", {"cwd": "/w", "mcpServers": []}))
    assert len(tools._nonces) == 1
    agent(router, tools, b'{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"no"}}')
    assert tools._nonces == {}


def test_loads_and_resumes_name_their_thread_and_replace_a_server_called_liminal(tmp_path: Path) -> None:
    router, tools, _ = wired(tmp_path)
    for rpc_id, method in enumerate(("session/load", "session/resume"), start=2):
        sent = forwarded(router, tools, jsonrpc.request_frame(rpc_id, method, {
            "sessionId": THREAD, "cwd": "/w", "mcpServers": [{"name": "liminal", "command": "old"}, THEIRS]}))
        theirs, ours = servers(sent)
        assert theirs == THEIRS and ours["command"] != "old"
        args = ours["args"]
        assert isinstance(args, list) and args[args.index("--thread") + 1] == THREAD


def test_an_id_that_cannot_be_a_file_name_is_left_alone(tmp_path: Path) -> None:
    router, tools, _ = wired(tmp_path)
    line = jsonrpc.request_frame(3, "session/load", {"sessionId": "../../x", "cwd": "/w", "mcpServers": []})
    assert client(router, tools, line) == [line]


def test_the_models_slash_commands_run_when_its_turn_ends(tmp_path: Path) -> None:
    router, tools, asked = wired(tmp_path)
    client(router, tools, jsonrpc.request_frame(1, "session/new", {"cwd": "/w", "mcpServers": []}))
    agent(router, tools, b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"' + THREAD.encode() + b'"}}')
    client(router, tools, jsonrpc.request_frame(2, "session/prompt", {"sessionId": THREAD, "prompt": []}))
    link.leave_slash(tmp_path, THREAD, "mark", "A")
    link.leave_slash(tmp_path, THREAD, "clear", "A")
    link.leave_slash(tmp_path, BACKING, "undo", "")  # another thread's: not this turn's
    assert asked == []
    agent(router, tools, b'{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}')
    assert [(r.thread, r.command, r.args) for r in asked] == [(THREAD, "mark", "A"), (THREAD, "clear", "A")]
    assert [r.command for r in link.take_slash(tmp_path, BACKING)] == ["undo"]


def test_old_bind_files_are_swept(tmp_path: Path) -> None:
    import os
    import time

    link.bind(tmp_path, "old", THREAD)
    link.bind(tmp_path, "young", THREAD)
    past = time.time() - 40 * 24 * 3600
    os.utime(link.folder(tmp_path) / "bind-old", (past, past))
    stale_slash = link.leave_slash(tmp_path, THREAD, "mark", "A")
    fresh_slash = link.leave_slash(tmp_path, BACKING, "mark", "B")
    half = link.folder(tmp_path) / ".tmp-abc"
    half.write_bytes(b"{")
    hour_ago = time.time() - 3700
    os.utime(stale_slash, (past, past))
    os.utime(half, (hour_ago, hour_ago))
    assert link.sweep(tmp_path) == 3
    assert link.bound_thread(tmp_path, "old") is None and link.bound_thread(tmp_path, "young") == THREAD
    assert not stale_slash.exists() and fresh_slash.exists() and not half.exists()


def test_the_slash_queue_gives_a_thread_its_own_commands_and_nothing_else(tmp_path: Path) -> None:
    import os

    link.leave_slash(tmp_path, "a-", "mark", "theirs")  # a thread whose id starts like "a--"
    mine = link.leave_slash(tmp_path, "a", "mark", "M1")
    queue = mine.parent
    (queue / f"a--{'9' * 20}-0000000f.json").mkdir()  # a folder named as a command: left alone
    os.mkfifo(queue / f"a--{'9' * 20}-000000ff.json")  # a FIFO: never read (it would block)
    (queue / f"a--{'9' * 20}-00000fff.json").symlink_to("/dev/zero")  # a link: never followed
    (queue / f"a--{'1' * 20}-0000ffff.json").write_bytes(b'{"thread":"b","command":"undo","args":""}')
    taken = link.take_slash(tmp_path, "a")
    assert [(r.thread, r.command, r.args) for r in taken] == [("a", "mark", "M1")]
    assert [(r.thread, r.args) for r in link.take_slash(tmp_path, "a-")] == [("a-", "theirs")]
    assert (queue / f"a--{'9' * 20}-0000000f.json").is_dir()


def test_recall_keys_take_ascii_digits_only() -> None:
    import pytest

    from liminal.gradient.recall import RecallError, RecallKey

    session = "11111111-1111-4111-8111-111111111111"
    assert RecallKey.parse(f"{session}:u1:2:input.3").block == 2
    for bad in ("²", "1" * 5000, "-1", "", "٣"):
        with pytest.raises(RecallError):
            RecallKey.parse(f"{session}:u1:{bad}")


def test_a_load_liminal_answered_from_the_store_opens_the_thread_as_the_clients_would(tmp_path: Path) -> None:
    """``liminal.kernel.restore`` opens the session of a thread whose file was gone as its own
    request: the thread model tells it as the client's open (the recycle counts the thread live
    from its note), not as one of liminal's moves."""
    router, tools, _ = wired(tmp_path)
    told: list[tuple[str, str, object, bool]] = []
    tools.model.on_opened.append(lambda *args: told.append(args))
    router.note("liminal/restored", {"backing_id": BACKING, "written": True}, NOW, thread_id=THREAD)
    for event in router.take().events:
        tools.model.offer(event)
    assert told == [(THREAD, "session/load", None, False)]
