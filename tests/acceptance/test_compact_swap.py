"""The CLI's own ``/compact``, then a swap, with the real Claude Code (2.1.316 and 2.1.44).

Claude Code compacts a session by writing a ``compact_boundary`` and its summary into the
session file; the model is sent the summary and what follows, not the turns before. The next
swap rewrites that file like any other (docs/facts.md). Shown before only on a file recorded
from Claude Code 2.1.44 (``tests/test_compress_commands.py``); here the CLI compacts the thread
through ``liminal acp`` (its swaps on at every turn end, before the compaction and after), and
the conversation goes on on the swapped, compacted session: the model is sent the CLI's
summary and every turn after it and none before, the strict fake model takes every request,
and the client sees one session id.
"""

from __future__ import annotations

import json

from fixtures.harness import AcpClient, Adapter, Rig, Scenario
from tests.acceptance.conftest import adapter_fixture
from tests.acceptance.test_swap_kill import swap_at_every_turn_end

adapter = adapter_fixture(["claude-agent", "claude-zed"])
CONTINUED = "This session is being continued from a previous conversation"


def test_a_swap_after_the_clis_own_compact_keeps_its_summary_and_what_followed(adapter: Adapter, rig: Rig) -> None:
    rig.server.script = Scenario()
    journal = swap_at_every_turn_end(rig)
    client = AcpClient(rig.home.liminal_argv(), rig.home.env(), rig.home.project,
                       rig.home.logs / "stderr-liminal.log")
    rig.clients.append(client)
    with client:
        client.initialize()
        opened = client.new_session(rig.home.project)
        thread, mode = opened["sessionId"], opened["modes"]["currentModeId"]
        for text in ("turn 0: hello", "turn 1: hello", "/compact"):
            assert client.prompt(thread, text, timeout=180).stop_reason == "end_turn"
            client.request("session/set_mode", {"sessionId": thread, "modeId": mode}, timeout=180)
        compacted = len(journal.records())
        after = ["turn 2: hello", "turn 3: hello"]
        for text in after:
            assert client.prompt(thread, text, timeout=180).stop_reason == "end_turn"
            client.request("session/set_mode", {"sessionId": thread, "modeId": mode}, timeout=180)
        moves = [r for r in journal.records()[compacted:] if r.outcome == "committed"]
        assert moves, (journal.records(), rig.stderr_tail())
        last = json.dumps(rig.server.views()[-1].body["messages"])
        assert CONTINUED in last and all(t in last for t in after), last[-3000:]
        assert "turn 0: hello" not in last, last[-3000:]
        assert client.session_ids() == {thread}
