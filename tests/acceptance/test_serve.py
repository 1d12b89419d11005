"""``liminal serve`` with the real Claude Code (and Codex, where the thread outlives its
connection and its adapter; Gemini CLI, where it outlives its connection) behind it and a real ``websockets`` client
(issue 15): a conversation over a WebSocket, swapped on the way; the connection dropped; a new
connection loads the thread and gets its whole history, under the one thread id, and goes on.

``liminal serve`` runs outside the loopback-only namespace (so the test can reach it); every
agent process it starts runs inside it (the agent command is the rig's wrapped adapter).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import pytest

from fixtures.harness import Adapter, Rig, Scenario, Shell
from fixtures.harness.acp_client import AcpError, Frame
from fixtures.harness.ws_client import WsAcpClient
from liminal.kernel.journal import SwapJournal
from liminal.serve.locks import ThreadLocks
from tests.acceptance.conftest import adapter_fixture, flag_scenario

adapter = adapter_fixture(["claude-agent"])


def start_serve(rig: Rig) -> tuple[subprocess.Popen[bytes], str, str]:
    """``liminal serve`` in front of the rig's adapter: its process, its URL, its token."""
    rig.home.liminal_home.mkdir(parents=True, exist_ok=True)
    (rig.home.liminal_home / "config.toml").write_text(
        "[swap]\nevery_turns = 2\nhold_timeout_seconds = 60\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "liminal", "serve", "--listen", "127.0.0.1:0", "--print-port", "--",
         *rig.home.wrap(rig.home.liminal_agent())],
        env=rig.home.env(), cwd=rig.home.project, stdout=subprocess.PIPE,
        stderr=open(rig.home.logs / "stderr-serve.log", "wb"))  # noqa: SIM115
    assert proc.stdout is not None
    port = proc.stdout.readline().strip().decode()
    assert port.isdigit(), (rig.home.logs / "stderr-serve.log").read_text()
    token = (rig.home.liminal_home / "serve-token").read_text().strip()
    return proc, f"ws://127.0.0.1:{port}/acp", token


def client(rig: Rig, url: str, token: str) -> WsAcpClient:
    """A client of ``liminal serve``, one of the rig's: the schema check reads what liminal wrote
    to it (a client whose ``argv`` names liminal)."""
    made = WsAcpClient(argv=["liminal", "serve"], env={}, cwd=rig.home.project,
                       stderr_path=rig.home.logs / "stderr-serve.log", url=url, token=token)
    rig.clients.append(made)
    return made


@pytest.mark.parametrize("adapter", ["claude-agent", "codex-agent", "gemini"], indirect=True)
def test_a_thread_outlives_its_connection(adapter: Adapter, rig: Rig, tmp_path: Path) -> None:
    rig.server.script = Scenario().add("TOOL", Shell("echo tool-output-here", "Echo"), "the tool ran")
    proc, url, token = start_serve(rig)
    prompts = ["first alpha", "second TOOL bravo", "third charlie"]
    try:
        first = client(rig, url, token)
        first.initialize()
        thread = first.new_session(rig.home.project)["sessionId"]
        for text in prompts:
            assert first.prompt(thread, text, timeout=180).stop_reason == "end_turn"
        first.close()
        committed = [s for s in SwapJournal(rig.home.liminal_home / "swaps.jsonl").records()
                     if s.outcome == "committed"]
        assert committed, (rig.home.logs / "stderr-serve.log").read_text()[-3000:]
        assert any("tool-output-here" in r.text for v in rig.server.views() for r in v.tool_results)

        again = client(rig, url, token)
        again.initialize()
        replay = again.load_session(thread, rig.home.project, timeout=120)
        said = [u["update"]["content"].get("text", "") for u in replay
                if u["update"].get("sessionUpdate") == "user_message_chunk"]
        assert said == prompts
        assert again.prompt(thread, "after the reconnect delta", timeout=180).stop_reason == "end_turn"
        seen = rig.server.views()[-1].raw.decode()
        assert "alpha" in seen and "charlie" in seen and "delta" in seen
        again.close()
        for c in (first, again):
            assert c.session_ids() == {thread}
            everything = b"\n".join(f.raw for f in c.received)
            assert not any(s.new_backing_id and s.new_backing_id.encode() in everything for s in committed)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(90) == 128 + signal.SIGTERM


def test_a_turn_under_way_when_the_connection_drops_is_there_on_return(adapter: Adapter, rig: Rig,
                                                                      tmp_path: Path) -> None:
    """Connect, prompt, drop the connection mid-turn, reconnect, load the thread: the history has
    the turn that finished while away, a swap happened in between, and no new id was seen."""
    flag = tmp_path / "go"
    rig.server.script = flag_scenario(flag)
    proc, url, token = start_serve(rig)
    try:
        first = client(rig, url, token)
        first.initialize()
        thread = first.new_session(rig.home.project)["sessionId"]
        assert first.prompt(thread, "one alpha", timeout=180).stop_reason == "end_turn"
        first.send({"jsonrpc": "2.0", "id": 99, "method": "session/prompt", "params": {
            "sessionId": thread, "prompt": [{"type": "text", "text": "two WAIT bravo"}]}})
        rig.server.wait_for(lambda rs: any(b"two WAIT bravo" in r.raw and r.reply is not None
                                           for r in rs), timeout=120)
        first.close()  # mid-turn: the tool call is running
        flag.touch()
        # The turn finishes without a client, is recorded and swapped; then its proxy ends and
        # frees the thread's lock, which is what this test waits for.
        locks = ThreadLocks(rig.home.liminal_home)
        for _ in range(1200):
            if anyio.run(locks.try_take, thread):
                break
            time.sleep(0.1)
        anyio.run(locks.release_all)

        again = client(rig, url, token)
        again.initialize()
        replay = again.load_session(thread, rig.home.project, timeout=180)
        said = [u["update"]["content"].get("text", "") for u in replay
                if u["update"].get("sessionUpdate") == "user_message_chunk"]
        answers = "".join(u["update"]["content"].get("text", "") for u in replay
                          if u["update"].get("sessionUpdate") == "agent_message_chunk")
        assert said == ["one alpha", "two WAIT bravo"], said
        assert "waited" in answers
        committed = [s for s in SwapJournal(rig.home.liminal_home / "swaps.jsonl").records()
                     if s.outcome == "committed"]
        assert committed, (rig.home.logs / "stderr-serve.log").read_text()[-3000:]
        assert again.prompt(thread, "three charlie", timeout=180).stop_reason == "end_turn"
        seen = rig.server.messages_requests()[-1].raw.decode()
        assert "alpha" in seen and "bravo" in seen and "charlie" in seen and "waited" in seen
        again.close()
        for c in (first, again):
            assert c.session_ids() == {thread}
            everything = b"\n".join(f.raw for f in c.received)
            assert not any(s.new_backing_id and s.new_backing_id.encode() in everything for s in committed)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(90) == 128 + signal.SIGTERM


@pytest.mark.parametrize("adapter", ["claude-agent", "codex-agent"], indirect=True)
def test_the_thread_goes_on_after_the_adapter_is_killed(adapter: Adapter, rig: Rig) -> None:
    rig.server.script = Scenario().add("TOOL", Shell("echo tool-output-here", "Echo"), "the tool ran")
    proc, url, token = start_serve(rig)
    try:
        c = client(rig, url, token)
        c.initialize()
        thread = c.new_session(rig.home.project)["sessionId"]
        assert c.prompt(thread, "first TOOL alpha", timeout=180).stop_reason == "end_turn"
        # Kill the adapter (the whole process group liminal started for it).
        serve_pid = proc.pid
        children = subprocess.run(["pgrep", "-P", str(serve_pid)], capture_output=True, text=True,
                                  check=False).stdout.split()
        agents = [int(c) for c in children
                  if adapter.bin.encode() in Path(f"/proc/{c}/cmdline").read_bytes()]
        assert len(agents) == 1, children
        os.killpg(agents[0], signal.SIGKILL)
        # A prompt that reaches the dying process gets an error (it cannot be answered); the
        # UI sends it again, to the new process.
        try:
            result = c.prompt(thread, "second bravo", timeout=180)
        except AcpError as exc:
            assert "the agent exited before answering" in str(exc)
            result = c.prompt(thread, "second bravo", timeout=180)
        assert result.stop_reason == "end_turn", (rig.home.logs / "stderr-serve.log").read_text()[-3000:]
        notes = [u for u in result.updates if "started it again" in json.dumps(u)]
        assert len(notes) == 1
        seen = rig.server.views()[-1].raw.decode()
        assert "alpha" in seen and "tool-output-here" in seen and "bravo" in seen
        assert c.session_ids() == {thread}
        c.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(90) == 128 + signal.SIGTERM


def test_a_client_that_returns_while_its_turn_runs_gets_the_rest_live(adapter: Adapter, rig: Rig,
                                                                     tmp_path: Path) -> None:
    flag = tmp_path / "go"
    rig.server.script = flag_scenario(flag)
    proc, url, token = start_serve(rig)
    try:
        first = client(rig, url, token)
        first.initialize()
        thread = first.new_session(rig.home.project)["sessionId"]
        assert first.prompt(thread, "one alpha", timeout=180).stop_reason == "end_turn"
        first.send({"jsonrpc": "2.0", "id": 99, "method": "session/prompt", "params": {
            "sessionId": thread, "prompt": [{"type": "text", "text": "two WAIT bravo"}]}})
        rig.server.wait_for(lambda rs: any(b"two WAIT bravo" in r.raw and r.reply is not None
                                           for r in rs), timeout=120)
        first.close()  # mid-turn: the tool waits for the flag

        again = client(rig, url, token)
        again.initialize()
        # The turn still runs: this connection takes its proxy over. The load answers with the
        # history so far, and the rest of the turn arrives live.
        replay = again.load_session(thread, rig.home.project, timeout=60)
        said = [u["update"]["content"].get("text", "") for u in replay
                if u["update"].get("sessionUpdate") == "user_message_chunk"]
        assert said == ["one alpha", "two WAIT bravo"], said
        flag.touch()
        start = len(again.received)

        def live_text(frames: list[Frame]) -> str:  # the fake model streams a text in two halves
            return "".join(str(((f.msg.get("params") or {}).get("update") or {}).get("content", {}).get("text", ""))
                           for f in frames[start:] if b'"agent_message_chunk"' in f.raw)

        again.wait_for(lambda frames: "waited" in live_text(frames), timeout=120)
        assert again.prompt(thread, "three charlie", timeout=180).stop_reason == "end_turn"
        seen = rig.server.messages_requests()[-1].raw.decode()
        assert "alpha" in seen and "bravo" in seen and "waited" in seen and "charlie" in seen
        assert not [f for f in again.received if f.msg.get("id") == 99]  # the old client's answer
        again.close()
        assert again.session_ids() == {thread}
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(90) == 128 + signal.SIGTERM


def test_a_frame_the_lock_cannot_read_never_reaches_the_real_adapter(adapter: Adapter, rig: Rig,
                                                                      tmp_path: Path) -> None:
    """Issue 21's attack on the real adapter: while one connection's turn runs, another sends
    ``session/load`` and ``session/prompt`` for its thread as binary frames with one invalid
    UTF-8 byte (Node reads it as U+FFFD), and as a batch. Both reached the second adapter and
    ran to end_turn beside the first; now each is refused, and the model never sees them."""
    from tests.support.raw_ws import RawClient

    flag = tmp_path / "go"
    rig.server.script = flag_scenario(flag)
    proc, url, token = start_serve(rig)
    try:
        first = client(rig, url, token)
        first.initialize()
        thread = first.new_session(rig.home.project)["sessionId"]
        first.send({"jsonrpc": "2.0", "id": 99, "method": "session/prompt", "params": {
            "sessionId": thread, "prompt": [{"type": "text", "text": "one WAIT alpha"}]}})
        rig.server.wait_for(lambda rs: any(b"one WAIT alpha" in r.raw and r.reply is not None
                                           for r in rs), timeout=120)
        with RawClient(urlsplit(url).port or 0, token, answer_pings=True) as second:
            assert second.rpc(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}},
                              timeout=120)["result"]
            load = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/load", "params": {
                "sessionId": thread, "cwd": str(rig.home.project), "mcpServers": [], "_meta": {"x": "@"}}})
            second.send_binary(load.encode().replace(b"@", b"\xff"))
            assert second.answer_to(2, timeout=60)["error"]["code"] == -32700
            intrude = {"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
                "sessionId": thread, "prompt": [{"type": "text", "text": "INTRUDER @"}]}}
            second.send_binary(json.dumps(intrude).encode().replace(b"@", b"\xff"))
            assert second.answer_to(3, timeout=60)["error"]["code"] == -32700
            second.send_text(json.dumps([dict(intrude, id=4)]))
            assert second.recv(timeout=60)["error"]["code"] == -32600
        flag.touch()
        first.wait_for(lambda frames: any(f.msg.get("id") == 99 for f in frames), timeout=180)
        answer = next(f.msg for f in first.received if f.msg.get("id") == 99)
        assert answer.get("result", {}).get("stopReason") == "end_turn", answer
        assert not any(b"INTRUDER" in r.raw for r in rig.server.messages_requests())
        first.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(90) == 128 + signal.SIGTERM
