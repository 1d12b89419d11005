"""A client that asks for ACP v2, through ``liminal acp`` to the real adapters that speak v2 as
well as v1 (claude-agent-acp and codex-acp route a client asking for 2 to their v2 surface).
liminal speaks v1 to the adapter (it is asked for 1) and v2 to the client (``liminal.acp.v2``):
the client is answered 2 and everything works for it in v2's shapes: each prompt acknowledged
with its user message's id and ended by ``state_update`` idle, the swap invisible (one session
id), ``/context`` answered by liminal, the thread replayed from the store on ``session/resume``
with ``replayFrom``, followed by the current state."""

from __future__ import annotations

from typing import Any

from fixtures.harness import AcpClient, Adapter, Rig
from fixtures.harness.acp_client import Frame
from tests.acceptance.conftest import adapter_fixture
from tests.support.acp_thread import BIG, committed, liminal_client, scenario

adapter = adapter_fixture(["claude-agent", "codex-agent"])

V2_INITIALIZE = {"protocolVersion": 2, "info": {"name": "a-v2-client", "version": "1.0.0"}, "capabilities": {}}


def updates(frames: list[Frame], thread: str) -> list[dict[str, Any]]:
    return [f.msg["params"]["update"] for f in frames if f.method == "session/update"
            and f.msg["params"].get("sessionId") == thread]


def told(client: AcpClient, thread: str, text: str) -> str:
    """A v2 prompt: acknowledged with its user message's id, ended by ``idle`` (``end_turn``)
    after ``running``; the agent's text of the turn."""
    start = len(client.received)
    answer = client.request("session/prompt", {"sessionId": thread, "prompt": [{"type": "text", "text": text}]},
                            timeout=180)
    client.wait_for(lambda frames: any(u.get("state") == "idle" for u in updates(frames[start:], thread)),
                    timeout=60)
    turn = updates(client.received[start:], thread)
    states = [(u["state"], u.get("stopReason")) for u in turn if u["sessionUpdate"] == "state_update"]
    assert states == [("running", None), ("idle", "end_turn")], states
    assert [u["messageId"] for u in turn if u["sessionUpdate"] == "user_message"] == [answer["messageId"]]
    assert all(isinstance(u.get("messageId"), str) for u in turn if u["sessionUpdate"].endswith("_chunk"))
    assert not {"tool_call", "plan", "current_mode_update"} & {u["sessionUpdate"] for u in turn}
    return "".join(u["content"].get("text", "") for u in turn if u["sessionUpdate"] == "agent_message_chunk")


def test_a_v2_client_is_answered_v2_and_everything_works_for_it(adapter: Adapter, rig: Rig) -> None:
    rig.server.script = scenario()
    rig.home.liminal_home.mkdir(parents=True, exist_ok=True)
    (rig.home.liminal_home / "config.toml").write_text(
        "[swap]\nevery_turns = 2\nhold_timeout_seconds = 60\n"
        "[gradient]\nrecent_tokens = 600\nmiddle_tokens = 600\nsummary_tokens = 600\n")
    with liminal_client(rig) as client:
        answer = client.request("initialize", V2_INITIALIZE)
        assert answer["protocolVersion"] == 2 and "agentCapabilities" not in answer, answer
        assert answer["info"]["name"] and answer["capabilities"]["session"]["mcp"]["stdio"] == {}
        thread = str(client.new_session(rig.home.project)["sessionId"])
        for text in BIG[:3]:
            told(client, thread, text)
        assert committed(rig), rig.stderr_tail()
        assert "Last move: swap" in told(client, thread, "/context")
        assert client.session_ids() == {thread}
        compactions = [u["status"] for u in updates(client.received, thread) if u["sessionUpdate"] == "compaction_update"]
        assert "completed" in compactions, compactions
    with liminal_client(rig) as client:
        assert client.request("initialize", V2_INITIALIZE)["protocolVersion"] == 2
        start = len(client.received)
        client.request("session/resume", {"sessionId": thread, "cwd": str(rig.home.project),
                                          "replayFrom": {"type": "start"}}, timeout=120)
        replayed = updates(client.received[start:], thread)
        typed = "".join(u["content"].get("text", "") for u in replayed if u["sessionUpdate"] == "user_message_chunk")
        assert all(text in typed for text in BIG[:3]), typed[-2000:]
        assert replayed[-1] == {"sessionUpdate": "state_update", "state": "idle"}, replayed[-1]
        told(client, thread, BIG[3])
        assert client.session_ids() == {thread}
