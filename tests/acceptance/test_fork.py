"""``session/fork`` through the real CLIs (issue 25): answered by liminal for an agent that has
none (codex-zed: ``/fork``'s cut, opened for the client), forwarded to one that has its own. The
fork is a session the client prompts at once; the model sees the thread's context in it, and the
thread goes on without what was said in the fork."""

from __future__ import annotations

import json

from fixtures.harness import Adapter, Rig
from tests.acceptance.conftest import ADAPTER_NAMES, adapter_fixture
from tests.support.acp_thread import liminal_client, said, scenario

adapter = adapter_fixture(ADAPTER_NAMES)


def last_request(rig: Rig) -> str:
    return json.dumps(rig.server.views()[-1].body)


def test_a_fork_opens_with_the_threads_context(adapter: Adapter, rig: Rig) -> None:
    rig.server.script = scenario()
    with liminal_client(rig) as client:
        caps = client.initialize()["agentCapabilities"]
        assert "fork" in caps["sessionCapabilities"], caps
        thread = client.new_session(rig.home.project)["sessionId"]
        said(client, thread, "alpha topic first prompt")
        said(client, thread, "the fork remembers kilo")
        fork = client.request("session/fork", {"sessionId": thread, "cwd": str(rig.home.project),
                                               "mcpServers": []}, timeout=120)["sessionId"]
        assert fork != thread
        said(client, fork, "in the fork lima")
        seen = last_request(rig)
        assert "kilo" in seen and "lima" in seen, seen[-3000:]
        said(client, thread, "the parent goes on mike")
        seen = last_request(rig)
        assert "kilo" in seen and "mike" in seen and "lima" not in seen, seen[-3000:]
        listed = {s["sessionId"] for s in client.request(
            "session/list", {"cwd": str(rig.home.project)})["sessions"]}
        assert {thread, fork} <= listed, listed
        client.settle()
