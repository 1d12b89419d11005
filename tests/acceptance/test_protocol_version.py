"""A client that asks for ACP v2, through ``liminal acp`` to the real adapters that speak v2 as
well as v1 (claude-agent-acp and codex-acp route a client asking for 2 to their v2 surface).
liminal speaks v1 (``liminal.kernel.version``): the adapter is asked for 1, the client answered
1, and it goes on in v1 as ACP's version negotiation says: the swap invisible (one session id),
``/context`` answered by liminal, the thread replayed on ``session/load``."""

from __future__ import annotations

from fixtures.harness import Adapter, Rig
from tests.acceptance.conftest import adapter_fixture
from tests.support.acp_thread import BIG, committed, liminal_client, said, scenario

adapter = adapter_fixture(["claude-agent", "codex-agent"])

V2_INITIALIZE = {"protocolVersion": 2, "info": {"name": "a-v2-client", "version": "1.0.0"}, "capabilities": {}}


def test_a_v2_client_is_answered_v1_and_everything_works_for_it(adapter: Adapter, rig: Rig) -> None:
    rig.server.script = scenario()
    # Without liminal the adapter answers a v2 client in v2: what liminal must not pass on.
    with rig.client(via_liminal=False) as direct:
        assert direct.request("initialize", V2_INITIALIZE)["protocolVersion"] == 2
    rig.home.liminal_home.mkdir(parents=True, exist_ok=True)
    (rig.home.liminal_home / "config.toml").write_text(
        "[swap]\nevery_turns = 2\nhold_timeout_seconds = 60\n"
        "[gradient]\nrecent_tokens = 600\nmiddle_tokens = 600\nsummary_tokens = 600\n")
    with liminal_client(rig) as client:
        answer = client.request("initialize", V2_INITIALIZE)
        assert answer["protocolVersion"] == 1 and "agentCapabilities" in answer, answer
        thread = str(client.new_session(rig.home.project)["sessionId"])
        for text in BIG[:3]:
            said(client, thread, text)
        assert committed(rig), rig.stderr_tail()
        assert "Last move: swap" in said(client, thread, "/context")
        assert client.session_ids() == {thread}
    with liminal_client(rig) as client:
        assert client.request("initialize", V2_INITIALIZE)["protocolVersion"] == 1
        replayed = str(client.load_session(thread, rig.home.project, timeout=120))
        assert all(text in replayed for text in BIG[:3]), replayed[-2000:]
        said(client, thread, BIG[3])
        assert client.session_ids() == {thread}
