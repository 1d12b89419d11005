"""``liminal serve`` against hostile and careless clients (issue 21), as a real process with the
scripted agent behind it, driven with raw WebSocket frames (``tests.support.raw_ws``): frames that
do not parse as one message never reach a thread another connection holds; a dropped client's
turn finishes, paused or not; what it is owed is answered or dropped within a bound; idle
connections close; what the server holds is bounded in bytes."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import rss_kib
from tests.support.raw_ws import TEXT, Closed, RawClient
from tests.support.served import Served, Servers


def started(servers: Servers, tmp_path: Path, config: str = "") -> Served:
    return servers.serve(tmp_path, config=config)


def raw(server: Served, **options: Any) -> RawClient:
    return RawClient(server.port, server.token, answer_pings=True, **options)


def wait_until(done: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.1)


def opened(ws: RawClient, tmp_path: Path) -> str:
    """Initialize and open a new thread."""
    assert ws.rpc(1, "initialize", {"protocolVersion": 1})["result"]
    return str(ws.rpc(2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["result"]["sessionId"])


def prompt(rpc_id: Any, thread: str, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "method": "session/prompt",
            "params": {"sessionId": thread, "prompt": [{"type": "text", "text": text}]}}


def blocked_writing(pid: int, out: Path, looks: list[int]) -> bool:
    """The agent stays in a write to its stdout pipe (where the kernel shows wchan) and its
    output has not grown for half a second: liminal stopped reading it. A streaming agent is
    in that write for a moment now and then; paused, it stays."""
    try:
        wchan = Path(f"/proc/{pid}/wchan").read_text().strip()
    except OSError:
        wchan = ""
    size = out.stat().st_size if out.exists() else 0
    still = bool(looks) and looks[-1] == size and (wchan in ("", "0") or "pipe_write" in wchan)
    looks.append(size)
    if not still:
        time.sleep(0.5)
    return still


def log_of(tmp_path: Path) -> str:
    return (tmp_path / "serve.log").read_text()


# -- two writers on one thread --------------------------------------------------------------------


def test_no_spelling_of_a_frame_reaches_a_thread_another_connection_holds(
        servers: Servers, tmp_path: Path) -> None:
    """A holds a thread with a turn running. B names it in every way a lenient parser reads
    differently from the lock: invalid UTF-8 in a binary frame (the issue's attack: both turns
    ran to end_turn), a batch, a repeated key, the id in capitals or without hyphens (one UUID
    to Codex), a path around it, escapes. B gets an error for each, and B's agent never reads
    the thread's id; A's turn runs on, alone."""
    server = started(servers, tmp_path, "[serve]\nbusy_wait_seconds = 1\n")
    with raw(server) as a, raw(server) as b:
        thread = opened(a, tmp_path)
        a.send(prompt(3, thread, "until-cancel"))
        while "working" not in str(a.recv()):
            pass
        assert b.rpc(1, "initialize", {"protocolVersion": 1})["result"]
        pid = b.rpc(2, "_pid", {})["result"]["pid"]

        def text(message: dict[str, Any]) -> bytes:
            return json.dumps(message).encode()

        load = {"jsonrpc": "2.0", "id": 10, "method": "session/load",
                "params": {"sessionId": thread, "cwd": str(tmp_path) + "/\udcff", "mcpServers": []}}
        invalid = json.dumps(load).replace("\\udcff", "@@").encode().replace(b"@@", b"\xff")
        b.send_binary(invalid)
        b.send_binary(text(prompt(11, thread, "chunks:1 ")).replace(b"chunks:1 ", b"chunks:1 \xfe"))
        b.send_text(text([prompt(12, thread, "chunks:1")]))
        decoy = json.dumps(prompt(13, "decoy", "chunks:1")["params"])
        b.send_text(json.dumps(prompt(13, thread, "chunks:1"))[:-1] + ', "params": ' + decoy + "}")
        b.send(prompt(14, thread.upper(), "chunks:1"))
        b.send(prompt(15, thread.replace("-", ""), "chunks:1"))
        b.send(prompt(16, "../" + thread, "chunks:1"))
        escaped = "".join(f"\\u{ord(c):04x}" for c in thread)
        b.send_text(json.dumps(prompt(17, "@@", "chunks:1")).replace("@@", escaped))
        b.send_binary(b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"%s","x":"\xff"}}'
                      % thread.encode())
        b.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": thread}})
        answers: dict[Any, dict[str, Any]] = {}
        unknown = []  # answers to what has no id that can be read (the batch, the cancel)
        while len(answers) < 7 or len(unknown) < 2:
            message = b.recv()
            if "method" in message:
                continue
            if message["id"] is None:
                unknown.append(message["error"]["code"])
            else:
                answers[message["id"]] = message
        assert sorted(unknown) == [-32700, -32600], unknown  # the batch as ACP's SDK answers one
        for rpc_id in (10, 11, 13, 14, 15, 16, 17):
            assert "error" in answers[rpc_id], answers[rpc_id]
        assert answers[10]["error"]["code"] == answers[11]["error"]["code"] == -32700
        for rpc_id in (14, 15, 17):  # read as the thread: they wait for its lock, then are refused
            assert answers[rpc_id]["error"]["code"] == -32002, answers[rpc_id]
        assert b.rpc(30, "_pid", {})["result"]["pid"] == pid  # everything before it was handed on
        seen = Path(f"{tmp_path / 'agent_in.bin'}.{pid}").read_bytes().lower()
        assert thread.encode() not in seen and thread.replace("-", "").encode() not in seen
        # A's turn was never disturbed: it ends when A cancels it.
        a.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": thread}})
        assert a.answer_to(3)["result"]["stopReason"] == "cancelled"
    log = log_of(tmp_path)
    assert "frame refused" in log and "notification for a thread this connection has not opened" in log


# -- slots held for an hour -----------------------------------------------------------------------


def test_a_turn_whose_client_stopped_reading_and_left_finishes(servers: Servers, tmp_path: Path) -> None:
    """The client stops reading while its agent streams, until liminal pauses the agent, then
    vanishes (a reset). The agent went on paused for good (only a take-over freed it, else the
    hour's limit); now it is let go, its output goes to the store, the turn ends and so does
    the connection."""
    server = started(servers, tmp_path)
    ws = raw(server, rcvbuf=4096)
    thread = opened(ws, tmp_path)
    pid = ws.rpc(3, "_pid", {})["result"]["pid"]
    ws.send(prompt(4, thread, "chunks:20000 size:1000"))
    looks: list[int] = []
    wait_until(lambda: blocked_writing(pid, tmp_path / "agent_out.bin", looks), 120,
               "the agent paused for the client that does not read")
    ws.reset()
    wait_until(lambda: b'{"jsonrpc":"2.0","id":4,"result":{"stopReason":"end_turn"}}'
               in (tmp_path / "agent_out.bin").read_bytes(), 120, "the turn's end")
    wait_until(lambda: "detached connection finished" in log_of(tmp_path), 60, "the connection's end")


def test_a_request_id_an_agent_cannot_echo_is_refused_and_holds_no_slot(
        servers: Servers, tmp_path: Path) -> None:
    """A 5,000-digit id: an agent answers it with id null (or not at all), so the request
    stayed owed and a dropped connection 'under way' for an hour, holding its slot."""
    server = started(servers, tmp_path, "[serve]\nmax_connections = 1\n")
    digits = "9" * 5000
    with raw(server) as ws:
        assert ws.rpc(1, "initialize", {"protocolVersion": 1})["result"]
        ws.send_text('{"jsonrpc":"2.0","id":' + digits + ',"method":"_echo","params":{}}')
        answer = json.loads(ws.recv_frame()[1], parse_int=str)
        assert answer["id"] == digits and answer["error"]["code"] == "-32600", answer  # (all as text)
        ws.send_text('{"jsonrpc":"2.0","id":9007199254740993,"method":"_echo","params":{}}')
        assert ws.recv()["error"]["code"] == -32600
    connected_again(server)


def connected_again(server: Served) -> None:
    """A new client gets the one connection slot (503 until the last one's proxy ended)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            with raw(server) as ws:
                assert ws.rpc(1, "initialize", {"protocolVersion": 1})["result"]
                return
        except ConnectionError as refused:
            assert "503" in str(refused) and time.monotonic() < deadline, refused
            time.sleep(0.2)


def test_a_dropped_connection_whose_agent_never_answers_frees_its_slot(
        servers: Servers, tmp_path: Path) -> None:
    """A request the agent never answers kept a dropped connection 'under way' for an hour; now
    the agent's silence past serve.detached_quiet_seconds ends it, and says what was owed."""
    server = started(servers, tmp_path, "[serve]\nmax_connections = 1\ndetached_quiet_seconds = 1\n")
    ws = raw(server)
    assert ws.rpc(1, "initialize", {"protocolVersion": 1})["result"]
    ws.send({"jsonrpc": "2.0", "id": 2, "method": "_hang", "params": {}})
    ws.rpc(3, "_pid", {})  # the agent has read the _hang before this
    ws.reset()
    connected_again(server)
    log = log_of(tmp_path)
    assert "a dropped connection's agent has gone quiet" in log and "_hang" in log, log[-3000:]


def test_an_idle_connection_is_closed_and_one_with_a_turn_under_way_is_not(
        servers: Servers, tmp_path: Path) -> None:
    server = started(servers, tmp_path, "[serve]\nidle_seconds = 1\n")
    with raw(server) as busy, raw(server) as idle:
        thread = opened(busy, tmp_path)
        busy.send(prompt(3, thread, "until-cancel"))
        while "working" not in str(busy.recv()):
            pass
        opened(idle, tmp_path)
        with pytest.raises(Closed) as closed:
            idle.recv(timeout=60)
        assert closed.value.code == 1000 and "serve.idle_seconds" in closed.value.reason
        # The busy one was quiet longer, and is still there: its turn ends when it says so.
        busy.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": thread}})
        assert busy.answer_to(3)["result"]["stopReason"] == "cancelled"
    assert "connection closed: idle" in log_of(tmp_path)


# -- memory bounded by bytes ----------------------------------------------------------------------


def test_a_message_past_max_message_bytes_closes_before_it_is_held(servers: Servers, tmp_path: Path) -> None:
    """With the defaults, a message of 17 MiB (256 MiB were taken and held whole) closes the
    connection at its header: the server never reads the rest."""
    server = started(servers, tmp_path)
    with raw(server) as ws:
        assert ws.rpc(1, "initialize", {"protocolVersion": 1})["result"]
        ws.send_header(TEXT, 17 * 1024 * 1024)
        with pytest.raises(Closed) as closed:
            ws.recv(timeout=30)
        assert closed.value.code == 1009
    with raw(server) as ws:  # the server goes on
        assert ws.rpc(1, "initialize", {"protocolVersion": 1})["result"]


def test_a_client_that_never_reads_costs_the_server_a_bounded_number_of_bytes(
        servers: Servers, tmp_path: Path) -> None:
    """The agent streams 400 updates of 256 KiB to a client that reads none: they were all
    queued (up to 1,024 frames, whatever their size); now the agent is paused once
    serve.queue_bytes (4 MiB) wait, and the server holds a few megabytes more, not 100."""
    server = started(servers, tmp_path)
    ws = raw(server, rcvbuf=4096)
    thread = opened(ws, tmp_path)
    pid = ws.rpc(3, "_pid", {})["result"]["pid"]
    before = rss_kib(server.proc.pid)
    ws.send(prompt(4, thread, "chunks:400 size:262144"))
    looks: list[int] = []
    out = tmp_path / "agent_out.bin"
    wait_until(lambda: blocked_writing(pid, out, looks) or b'"id":4,"result"' in out.read_bytes(), 120,
               "the agent paused, or done")
    grown = rss_kib(server.proc.pid) - before
    assert grown < 64 * 1024, f"the server grew by {grown} KiB"
    ws.reset()


def test_messages_waiting_for_a_lock_are_bounded_in_bytes(servers: Servers, tmp_path: Path) -> None:
    """Messages that wait for a thread's lock were all held (12 x 60 MiB: 733 MB). Now one
    connection holds at most serve.max_message_bytes waiting, and all of them
    serve.buffer_bytes: past either, a message is refused at once; small ones still pass."""
    config = ("[serve]\nbusy_wait_seconds = 60\nmax_message_bytes = 1048576\nbuffer_bytes = 2097152\n")
    server = started(servers, tmp_path, config)
    with raw(server) as a, raw(server) as b, raw(server) as c, raw(server) as d:
        thread = opened(a, tmp_path)
        other = a.rpc(3, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["result"]["sessionId"]
        for ws in (b, c, d):
            assert ws.rpc(1, "initialize", {"protocolVersion": 1})["result"]
        big = "chunks:1 " + "z" * 900_000
        b.send(prompt(10, thread, big))  # waits for the lock
        b.send(prompt(11, thread, big))  # would make this connection's waiting 1.8 MB
        refused = b.answer_to(11)
        assert refused["error"]["code"] == -32003 and "serve.max_message_bytes" in refused["error"]["message"]
        c.send(prompt(20, other, big))  # waits too: 1.8 MB in the server
        d.send(prompt(30, thread, big))  # would make it 2.7 MB
        refused = d.answer_to(30)
        assert refused["error"]["code"] == -32003 and "serve.buffer_bytes" in refused["error"]["message"]
        assert d.rpc(31, "_echo", {"small": 1})["result"] == {"small": 1}
        a.close()  # the thread is free: b's first prompt gets it, and runs
        answer = b.answer_to(10, timeout=60)
        assert answer["result"]["stopReason"] == "end_turn", answer
