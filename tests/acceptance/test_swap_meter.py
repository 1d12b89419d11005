"""What the client hears of a swap, through the real CLIs (issue 25): a ``usage_update`` with the
new, smaller context as soon as the swap commits (before the next prompt: the editor's context
meter drops then), for a client with ACP's ``session.compaction`` capability, one with ``session.notices`` and one
with neither; in the next turn, the compaction client gets ``compaction_update`` in progress then
completed, the notices client a ``notice``, the other liminal's thought."""

from __future__ import annotations

from typing import Any

import pytest

from fixtures.harness import AcpClient, Adapter, Rig
from fixtures.harness.acp_client import CLIENT_CAPABILITIES
from tests.acceptance.conftest import ADAPTER_NAMES, adapter_fixture
from tests.support.acp_thread import (
    BIG,
    FIRST,
    committed,
    configure,
    liminal_client,
    said,
    scenario,
)

adapter = adapter_fixture(ADAPTER_NAMES)


def updates(client: AcpClient, thread: str, start: int = 0) -> list[dict[str, Any]]:
    """The ``session/update``s of ``thread`` the client received from frame ``start`` on."""
    return [f.msg["params"]["update"] for f in client.received[start:]
            if f.direction == "recv" and f.msg.get("method") == "session/update"
            and f.msg["params"].get("sessionId") == thread]


@pytest.mark.parametrize("declared", ["compaction", "notices", "plain"],
                         ids=["compaction-client", "notices-client", "plain-client"])
def test_the_meter_drops_when_the_swap_commits(adapter: Adapter, rig: Rig, declared: str) -> None:
    compaction = declared == "compaction"
    rig.server.script = scenario()
    configure(rig, high=9_000, target=4_000)  # each BIG turn is 3-5k tokens: a swap in a few
    caps: dict[str, Any] = {**CLIENT_CAPABILITIES, **({"session": {declared: {}}} if declared != "plain" else {})}
    with liminal_client(rig) as client:
        client.request("initialize", {"protocolVersion": 1, "clientCapabilities": caps})
        thread = client.new_session(rig.home.project)["sessionId"]
        said(client, thread, FIRST)
        for text in BIG:
            said(client, thread, text)
            if committed(rig):
                break
        [swap] = committed(rig)
        assert swap.tokens_after and swap.tokens_before and swap.tokens_after < swap.tokens_before, swap
        # claude-zed sends no usage_update at all: its client has no meter, and liminal makes
        # up no window size for one (docs/facts.md).
        metered = any(u.get("sessionUpdate") == "usage_update" for u in updates(client, thread))
        if metered:  # the swap committed between turns: the meter's update comes, no prompt sent
            client.wait_for(lambda frames: any(
                u.get("sessionUpdate") == "usage_update" and u.get("used") == swap.tokens_after
                for u in updates(client, thread)), timeout=120)
            usage = [u for u in updates(client, thread) if u.get("sessionUpdate") == "usage_update"]
            dropped = next(i for i, u in enumerate(usage) if u["used"] == swap.tokens_after)
            assert dropped > 0 and usage[dropped - 1]["used"] > swap.tokens_after, usage
            assert usage[dropped]["size"] == usage[dropped - 1]["size"], usage

        said(client, thread, "after the swap uniform")  # a turn after the swap, whenever it came
        seen = updates(client, thread)
        kinds = " ".join(f"{u.get('sessionUpdate')}:{u.get('status') or u.get('used') or ''}" for u in seen)
        at_once = next((i for i, u in enumerate(seen)
                        if u.get("sessionUpdate") == "usage_update" and u.get("used") == swap.tokens_after),
                       -1 if not metered else len(seen))
        compactions = [(i, u) for i, u in enumerate(seen) if u.get("sessionUpdate") == "compaction_update"]
        thoughts = [i for i, u in enumerate(seen) if u.get("sessionUpdate") == "agent_thought_chunk"
                    and "Context optimised by liminal" in u["content"].get("text", "")]
        notices = [i for i, u in enumerate(seen) if u.get("sessionUpdate") == "notice"
                   and u.get("severity") == "info" and "Context optimised by liminal" in u.get("title", "")]
        # The swap's notice comes inside the turn after it; the meter's update came before.
        if compaction:
            assert [u["status"] for _, u in compactions] == ["in_progress", "completed"], kinds
            (first, started), (_, done) = compactions
            assert started["compactionId"] == done["compactionId"], compactions
            assert "Context optimised by liminal" in done["summary"][0]["text"], done
            assert at_once < first and not thoughts and not notices, kinds
        elif declared == "notices":  # live information, not history: never a thought
            assert not compactions and not thoughts and len(notices) == 1 and at_once < notices[0], kinds
        else:
            assert not compactions and not notices and len(thoughts) == 1 and at_once < thoughts[0], kinds
