"""``liminal serve`` runs one index worker for all its connections (issue 23). Before, each
connection started its own: 50 clients, 50 worker processes beside the 50 agents, 50 SQLite
writers on one file. The worker indexes every connection's spool; one that dies is started again
and no connection notices, nor loses a frame."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from websockets.sync.client import ClientConnection

from tests.support.processes import descendants
from tests.support.served import Served, Servers, rpc
from tests.support.spools import spool_files

CLIENTS = 20


def index_workers(server: Served) -> list[int]:
    """The index worker processes under the server."""
    return [p.pid for p in descendants(server.proc.pid) if "liminal.ingest" in p.cmdline]


def until(predicate: Callable[[], bool], timeout: float = 120, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what or predicate}"
        time.sleep(0.1)


def stored(db: Path, sql: str, *args: object) -> list[tuple[object, ...]]:
    if not db.exists():
        return []
    with contextlib.closing(sqlite3.connect(db, timeout=30)) as conn:
        try:
            return list(conn.execute(sql, args).fetchall())
        except sqlite3.OperationalError:  # the worker has not made the tables yet
            return []


def seqs_by_connection(db: Path) -> dict[str, list[int]]:
    found: dict[str, list[int]] = defaultdict(list)
    for connection, seq in stored(db, "SELECT connection_id, seq FROM frames ORDER BY seq"):
        found[str(connection)].append(int(str(seq)))
    return found


def opened(stack: contextlib.ExitStack, server: Served, cwd: Path) -> tuple[ClientConnection, str]:
    ws = stack.enter_context(server.connect())
    assert rpc(ws, 1, "initialize", {"protocolVersion": 1})["result"]
    thread = rpc(ws, 2, "session/new", {"cwd": str(cwd), "mcpServers": []})["result"]["sessionId"]
    return ws, str(thread)


def prompt(ws: ClientConnection, rpc_id: int, thread: str, text: str) -> None:
    ws.send(json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": "session/prompt", "params": {
        "sessionId": thread, "prompt": [{"type": "text", "text": text}]}}))


def answered(ws: ClientConnection, rpc_id: int) -> int:
    """The messages before the answer to ``rpc_id``; the answer must be a turn's end."""
    before = 0
    while True:
        message = json.loads(ws.recv(timeout=120))
        if message.get("id") == rpc_id and "method" not in message:
            assert message["result"]["stopReason"] == "end_turn", message
            return before
        before += 1


def test_one_index_worker_for_all_the_connections(servers: Servers, tmp_path: Path) -> None:
    """Twenty clients at once, each with a turn: one index worker process under the server
    (there were twenty), and every client's messages in the store once they have left."""
    server = servers.serve(tmp_path)
    db = server.home / "liminal.db"
    stack = contextlib.ExitStack()
    servers.clients.append(stack)
    assert index_workers(server) == []  # nothing before the first initialize
    clients = [opened(stack, server, tmp_path) for _ in range(CLIENTS)]
    for n, (ws, thread) in enumerate(clients):
        prompt(ws, 3, thread, f"client {n} chunks:5")
    for ws, _ in clients:
        assert answered(ws, 3) >= 5
    until(lambda: len(index_workers(server)) >= 1, what="an index worker")
    workers = index_workers(server)
    assert len(workers) == 1, workers
    for ws, _ in clients:
        ws.close()
    # Every client's prompt, the agent's reply to it, in the store; the spools gone.
    until(lambda: len(stored(db, "SELECT id FROM frames WHERE method = 'session/prompt' AND kind = 'request'")) == CLIENTS,
          what="every prompt stored")
    until(lambda: not spool_files(server.home), what="the spools drained")
    threads = {thread for _, thread in clients}
    seqs = seqs_by_connection(db)
    assert len(seqs) == CLIENTS
    assert all(s == list(range(len(s))) for s in seqs.values())  # no hole, no duplicate
    texts = stored(db, "SELECT thread_id, text FROM messages WHERE kind = 'user'")
    for n, (_, thread) in enumerate(clients):
        assert any(t == thread and f"client {n} chunks:5" in str(c) for t, c in texts), thread
    assert {str(t) for t, _ in texts} >= threads
    # The connections' ends did not end it: the same worker, for the connections after them.
    assert index_workers(server) == workers
    ws, thread = opened(stack, server, tmp_path)
    prompt(ws, 3, thread, "chunks:1")
    answered(ws, 3)
    assert index_workers(server) == workers


def test_a_killed_index_worker_is_replaced_and_nothing_is_lost(servers: Servers, tmp_path: Path) -> None:
    """SIGKILL of the shared worker while three clients stream 20,000 updates each: every
    turn is answered whole, another worker takes over (one, not one per connection), and every
    frame of every connection is in the store, once."""
    server = servers.serve(tmp_path)
    db = server.home / "liminal.db"
    stack = contextlib.ExitStack()
    servers.clients.append(stack)
    clients = [opened(stack, server, tmp_path) for _ in range(3)]
    until(lambda: len(index_workers(server)) == 1, what="the index worker")
    (worker,) = index_workers(server)
    for ws, thread in clients:
        prompt(ws, 3, thread, "chunks:20000")
    first = clients[0][0]
    for _ in range(5000):
        first.recv(timeout=120)
    until(lambda: bool(stored(db, "SELECT 1 FROM frames WHERE method = 'session/update' LIMIT 1")),
          what="the worker storing the turn")
    os.kill(worker, signal.SIGKILL)
    assert answered(first, 3) == 20_000 - 5000
    for ws, _ in clients[1:]:
        assert answered(ws, 3) == 20_000
    until(lambda: index_workers(server) not in ([], [worker]), what="another worker")
    assert len(index_workers(server)) == 1
    for ws, _ in clients:
        ws.close()
    until(lambda: not spool_files(server.home), what="the spools drained")
    seqs = seqs_by_connection(db)
    assert len(seqs) == 3
    for connection, s in seqs.items():
        assert s == list(range(len(s))), connection  # no hole, no duplicate
    updates = stored(db, "SELECT connection_id, count(*) FROM frames WHERE method = 'session/update' "
                         "GROUP BY connection_id")
    assert sorted(int(str(n)) for _, n in updates) == [20_000] * 3
    log = (tmp_path / "serve.log").read_text()
    assert '"index worker exited; starting another"' in log


def test_a_spool_orphaned_while_the_server_runs_is_replayed_at_the_next_connection(
        servers: Servers, tmp_path: Path) -> None:
    """A ``liminal acp`` on the same home killed while the server runs leaves its spool: with a
    worker per connection the next connection's worker replayed it at its start; the one
    worker, started long before, looks again at each new connection."""
    from liminal.ingest.spool import SpoolDir, frame_rows
    from liminal.store.records import FrameRecord, frame_id

    server = servers.serve(tmp_path)
    db = server.home / "liminal.db"
    stack = contextlib.ExitStack()
    servers.clients.append(stack)
    opened(stack, server, tmp_path)
    # The worker has been at work a while (its look for orphans at its start is long over).
    until(lambda: len(stored(db, "SELECT 1 FROM frames WHERE method = 'session/new'")) == 2,
          what="the first connection stored")
    orphan = SpoolDir(server.home / "spool" / "orphan")
    assert orphan.acquire()
    frames = [FrameRecord(frame_id("orphan", i), "orphan", i, 1.0 + i, "c2a", "request", None,
                          None, "_echo", str(i), 20, b'{"jsonrpc":"2.0","id":%d}' % i)
              for i in range(3)]
    orphan.append_block(0, *frame_rows(frames), [f.raw for f in frames], rpc_text=True)
    orphan.release(remove_if_empty=False)  # as a process killed: the lock free, the frames left
    opened(stack, server, tmp_path)
    until(lambda: seqs_by_connection(db).get("orphan") == [0, 1, 2], what="the orphan replayed")
    until(lambda: not list(orphan.path.glob("*.spool")), what="the orphan's spool removed")
