"""``liminal serve`` stopping on SIGTERM within ``serve.shutdown_seconds``, whatever its clients
and agents do (issue 21): clients that never answer the close frame, a turn under way, an agent
that ignores SIGTERM. Each waited in turn before: six clients that never answer took 50 s."""

from __future__ import annotations

import contextlib
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

from tests.support.processes import alive
from tests.support.proxy_process import agent_pids
from tests.support.raw_ws import RawClient
from tests.support.served import Served, Servers

# The promise is "stopped within ``serve.shutdown_seconds``". What a stop does after its deadline
# is bounded work that no client or agent can hold up: SIGKILL what is left and reap it, close the
# store and the log, and the interpreter's exit. That took 1.2 s at most here (2 cores, other test
# runs beside it); the allowance is four times that for a machine that is loaded harder. It is no
# benchmark: a stop that waits on any client or agent (ten seconds each, before) is far past it.
EXIT_ALLOWANCE = 5.0


def serve(servers: Servers, tmp_path: Path, config: str, *agent_flags: str) -> Served:
    return servers.serve(tmp_path, config=config, agent_flags=agent_flags)


def gone(pids: list[int], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not any(alive(p) for p in pids)


def stopped(server: Served, tmp_path: Path, seconds: float, sig: int = signal.SIGTERM) -> str:
    """The signal; it exits as after SIGTERM within ``seconds`` (the stop's deadline) and
    ``EXIT_ALLOWANCE``; its log."""
    server.proc.send_signal(sig)
    bound = seconds + EXIT_ALLOWANCE
    try:
        code: int | None = server.proc.wait(bound)
    except subprocess.TimeoutExpired:
        code = None
    log = (tmp_path / "serve.log").read_text()
    assert code is not None, f"still running {bound:.0f} s after the signal\n" + log[-3000:]
    assert code == 128 + signal.SIGTERM, log[-3000:]
    return log


def no_traceback(log: str) -> bool:
    return not [line for line in log.splitlines() if line.startswith("{") and "Traceback" in line]


def initialized(servers: Servers, server: Served, tmp_path: Path) -> tuple[RawClient, str]:
    client = RawClient(server.port, server.token)
    servers.clients.append(client)
    assert client.rpc(1, "initialize", {"protocolVersion": 1})["result"]
    thread = client.rpc(2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["result"]["sessionId"]
    return client, str(thread)


def test_sigterm_with_clients_that_never_answer_the_close_frame(servers: Servers, tmp_path: Path) -> None:
    """Six idle clients and one with a turn under way, none of which answers (or reads) the
    close frame: the server exits within the setting, closing them all at once, and no agent
    outlives it. Before, each close waited the WebSocket library's 10 s in turn."""
    shutdown = 10.0
    server = serve(servers, tmp_path, f"[serve]\nshutdown_seconds = {shutdown}\n")
    for _ in range(6):
        initialized(servers, server, tmp_path)
    busy, thread = initialized(servers, server, tmp_path)
    busy.send({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
        "sessionId": thread, "prompt": [{"type": "text", "text": "until-cancel"}]}})
    while "working" not in str(busy.recv()):
        pass
    pids = agent_pids(tmp_path)
    assert len(pids) == 7
    # From here on no client reads or answers anything.
    log = stopped(server, tmp_path, shutdown)
    assert gone(pids), [p for p in pids if alive(p)]
    assert no_traceback(log)
    assert '"liminal serve stopped"' in log, log[-3000:]


def test_an_agent_that_ignores_sigterm_is_killed_at_the_deadline(servers: Servers, tmp_path: Path) -> None:
    """``proxy.kill_grace_seconds`` longer than the shutdown's budget, and an agent that waits
    it out: the deadline wins; what is left is killed, and the log says so."""
    shutdown = 3.0
    server = serve(servers, tmp_path, f"[proxy]\nkill_grace_seconds = 120\n[serve]\nshutdown_seconds = {shutdown}\n",
                   "--ignore-eof", "--ignore-term")
    initialized(servers, server, tmp_path)
    pids = agent_pids(tmp_path)
    assert len(pids) == 1
    log = stopped(server, tmp_path, shutdown)
    assert gone(pids)
    assert no_traceback(log)
    assert '"shutdown deadline reached; killing what is left"' in log, log[-3000:]


def stored_frames(db: Path, method: str) -> int:
    if not db.exists():
        return 0
    with contextlib.closing(sqlite3.connect(db, timeout=30)) as conn:
        try:
            return int(conn.execute("SELECT count(*) FROM frames WHERE method = ?", (method,)).fetchone()[0])
        except sqlite3.OperationalError:  # the worker has not made the tables yet
            return 0


def test_a_store_that_takes_nothing_does_not_hold_the_stop_and_loses_nothing(servers: Servers, tmp_path: Path) -> None:
    """The index workers cannot write (another process holds the database): closing each
    connection waited up to 20 s for its worker's drain, after 10 s for its client's answer to
    the close frame, one connection after the other. The stop ends at the deadline anyway, and
    what was not indexed is indexed once the store takes writes again."""
    shutdown = 3.0
    server = serve(servers, tmp_path, f"[serve]\nshutdown_seconds = {shutdown}\n")
    db = server.home / "liminal.db"
    for _ in range(2):
        initialized(servers, server, tmp_path)
    deadline = time.monotonic() + 60
    while stored_frames(db, "session/new") < 4 and time.monotonic() < deadline:
        time.sleep(0.2)
    with contextlib.closing(sqlite3.connect(db, timeout=30, isolation_level=None)) as holder:
        holder.execute("BEGIN EXCLUSIVE")  # no worker writes from here on
        for client in servers.clients:
            assert client.rpc(5, "_echo", {"kept": True})["result"] == {"kept": True}
        log = stopped(server, tmp_path, shutdown)
        assert '"liminal serve stopped"' in log, log[-3000:]
        holder.execute("ROLLBACK")
    # The workers go on alone and index what the spools held.
    deadline = time.monotonic() + 120
    while stored_frames(db, "_echo") < 4 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert stored_frames(db, "_echo") == 4  # two requests and their answers


def test_a_second_signal_kills_what_is_left_at_once(servers: Servers, tmp_path: Path) -> None:
    """Ctrl-C again (or a second SIGTERM) while a turn is given its time: the stop ends now, as
    at its deadline, and says so. Before, a second SIGINT did not end the stop: it went on
    waiting for the turn (here, 300 s)."""
    server = serve(servers, tmp_path, "[serve]\nshutdown_seconds = 300\n")
    busy, thread = initialized(servers, server, tmp_path)
    busy.send({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
        "sessionId": thread, "prompt": [{"type": "text", "text": "until-cancel"}]}})
    while "working" not in str(busy.recv()):
        pass
    pids = agent_pids(tmp_path)
    server.proc.send_signal(signal.SIGTERM)
    log_path = tmp_path / "serve.log"
    deadline = time.monotonic() + 30
    while '"signal received; closing connections"' not in log_path.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    log = stopped(server, tmp_path, 0.0, signal.SIGINT)  # at once: no deadline to wait for
    assert '"another signal; killing what is left"' in log and '"liminal serve stopped"' in log
    assert gone(pids)
