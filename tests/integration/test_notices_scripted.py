"""What a client is told of the moves that compact its context, by what it declared in
``initialize``: ``session.notices`` a ``notice``, ``session.compaction`` a ``compaction_update``
(a swap and ``/optimise``), any other client the thought. A real ``liminal acp``, the scripted
agent keeping Claude Code's files; every frame liminal wrote, both ways, checked against ACP's
schema (``fixtures.harness.acp_schema``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from fixtures.harness import acp_schema
from liminal.kernel.journal import SwapJournal
from tests.support.proxy_process import ProxyProcess
from tests.support.proxy_process import run_liminal as run

pytestmark = pytest.mark.anyio

CWD = "/work/project"
CLIENTS = {"plain": {}, "notices": {"session": {"notices": {}}}, "compaction": {"session": {"compaction": {}}}}


def updates(proxy: ProxyProcess, start: int = 0) -> list[dict[str, Any]]:
    return [m["params"]["update"] for m in proxy.messages()[start:] if m.get("method") == "session/update"]


async def swap_then_optimise(tmp_path: Path, capabilities: dict[str, Any]) -> tuple[list[dict[str, Any]],
                                                                                     list[dict[str, Any]]]:
    """A swap, the turn after it, then ``/optimise``: the updates of that turn, and of
    ``/optimise``'s."""
    seen: dict[str, list[dict[str, Any]]] = {}

    async def body(proxy: ProxyProcess) -> None:
        await proxy.request("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities})
        thread = str((await proxy.request("session/new", {"cwd": CWD, "mcpServers": []}))["result"]["sessionId"])
        for text in ("turn alpha used:5000", "turn bravo used:130000"):
            assert (await proxy.prompt(thread, text))["result"]["stopReason"] == "end_turn"
        journal = SwapJournal(tmp_path / "liminal-home" / "swaps.jsonl")
        with anyio.fail_after(30):
            while not any(r.outcome == "committed" for r in journal.records()):  # noqa: ASYNC110
                await anyio.sleep(0.05)
        start = len(proxy.messages())
        assert (await proxy.prompt(thread, "turn charlie used:21000 chunks:1"))["result"]["stopReason"] == "end_turn"
        seen["turn"] = updates(proxy, start)
        start = len(proxy.messages())
        assert (await proxy.prompt(thread, "/optimise"))["result"]["stopReason"] == "end_turn"
        seen["optimise"] = updates(proxy, start)
        await proxy.close_stdin()
        agent_sent = (tmp_path / "agent_out.bin").read_bytes().splitlines()
        acp_schema.assert_conforms([(proxy.sent, proxy.lines, agent_sent),
                                    (agent_sent, (tmp_path / "agent_in.bin").read_bytes().splitlines(), proxy.sent)])

    code = await run(tmp_path, body, LIMINAL_MCP_ENABLED="false", LIMINAL_SWAP_HIGH_TOKENS="100000",
                     LIMINAL_SWAP_TARGET_TOKENS="20000")
    assert code == 0
    return seen["turn"], seen["optimise"]


def kinds(found: list[dict[str, Any]]) -> list[str]:
    return [u["sessionUpdate"] for u in found]


async def test_a_notices_client_sees_the_swap_as_a_notice_never_a_thought(tmp_path: Path) -> None:
    turn, optimise = await swap_then_optimise(tmp_path, CLIENTS["notices"])
    [notice] = [u for u in turn if u["sessionUpdate"] == "notice"]
    assert notice["severity"] == "info" and "Context optimised by liminal" in notice["title"]
    assert "agent_thought_chunk" not in kinds(turn) + kinds(optimise)
    assert "compaction_update" not in kinds(turn) + kinds(optimise)
    # The turn's own answer follows the notice, which heads it.
    assert kinds(turn).index("notice") < kinds(turn).index("agent_message_chunk")


async def test_a_compaction_client_sees_the_swap_and_optimise_as_compactions(tmp_path: Path) -> None:
    turn, optimise = await swap_then_optimise(tmp_path, CLIENTS["compaction"])
    ids = set()
    for found in (turn, optimise):
        compactions = [u for u in found if u["sessionUpdate"] == "compaction_update"]
        ids.add(compactions[0]["compactionId"])
        assert [u["status"] for u in compactions] == ["in_progress", "completed"], found
        assert compactions[0]["compactionId"] == compactions[1]["compactionId"]
        assert " -> " in compactions[1]["summary"][0]["text"]
        # The first update fixes the compaction's place: ahead of everything else the turn says
        # (the meter's usage_update is sent at the commit, and is no part of the timeline).
        assert next(u for u in found if u["sessionUpdate"] != "usage_update") == compactions[0], found
    assert len(ids) == 2  # one id per compaction
    assert "notice" not in kinds(turn) + kinds(optimise)
    assert "agent_thought_chunk" not in kinds(turn) + kinds(optimise)
    assert "Context optimised" in optimise[-1]["content"]["text"]  # the command's answer still


async def test_a_plain_client_keeps_the_thought(tmp_path: Path) -> None:
    turn, optimise = await swap_then_optimise(tmp_path, CLIENTS["plain"])
    [thought] = [u for u in turn if u["sessionUpdate"] == "agent_thought_chunk"]
    assert "Context optimised by liminal" in thought["content"]["text"]
    assert not {"notice", "compaction_update"} & set(kinds(turn) + kinds(optimise))
