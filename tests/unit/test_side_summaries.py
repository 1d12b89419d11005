"""The side summaries (``liminal.kernel.summaries``) through a fake port: a turn end past
``summary_at`` of the trigger has the turns a swap would consolidate summarised in a side
session of liminal's own, which the client never sees and whose files are removed; the summary
is stored and the swap's summarizer holds it; a range is summarised once, by this liminal or
the next."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from liminal.acp.port import OwnRequestError
from liminal.config import GradientSettings, Settings, SwapSettings
from liminal.gradient.summarize import TurnDigest
from liminal.kernel.policy import CostPolicy
from liminal.kernel.summaries import SUMMARY_THREAD, SideSummaries, side_root
from liminal.kernel.threads import ThreadModel, ThreadState
from liminal.store.configured import open_store
from tests.support.fakeport import FakePort

pytestmark = pytest.mark.anyio
THREAD = "11111111-1111-4111-8111-111111111111"
SIDE = "33333333-3333-4333-8333-333333333333"
TURNS = [TurnDigest(n, f"request {n}: move the port", (f"reply {n}",), ()) for n in range(1, 5)]
ANSWER = "## STATE\nGoal: the port moves to 8080\n## SUMMARY\nMODEL SUMMARY: 8080 it is."


class Harness:
    name = "fake"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.forgotten: list[tuple[str, str]] = []

    def locate(self, backing_id: str, cwd: str | None) -> Path | None:
        return self.path

    def ancient(self, path: Path, target_tokens: int) -> list[TurnDigest]:
        return TURNS

    def side_params(self) -> dict[str, Any]:
        return {"_meta": {"x": 1}}

    def forget(self, session_id: str, cwd: str) -> None:
        self.forgotten.append((session_id, cwd))


def agent(port: list[FakePort], asked: list[tuple[str, dict[str, Any]]]) -> Any:
    def answer(method: str, params: dict[str, Any]) -> Any:
        asked.append((method, params))
        if method == "session/new":
            return {"sessionId": SIDE}
        if method == "session/prompt":
            # The model tries a tool (refused by the router), then answers in chunks.
            port[0].from_agent({"jsonrpc": "2.0", "id": 99, "method": "session/request_permission", "params": {
                "sessionId": SIDE, "toolCall": {"toolCallId": "t"}, "options": [
                    {"optionId": "ok", "kind": "allow_once", "name": "Allow"},
                    {"optionId": "no", "kind": "reject_once", "name": "Reject"}]}})
            for part in (ANSWER[:20], ANSWER[20:]):
                port[0].from_agent({"jsonrpc": "2.0", "method": "session/update", "params": {
                    "sessionId": SIDE, "update": {"sessionUpdate": "agent_message_chunk",
                                                  "content": {"type": "text", "text": part}}}})
            return {"stopReason": "end_turn"}
        if method == "session/close":
            return {}
        raise OwnRequestError(method, {"code": -32601, "message": "no"})
    return answer


async def made(tmp_path: Path, asked: list[tuple[str, dict[str, Any]]],
               context: int) -> tuple[SideSummaries, FakePort, Harness]:
    settings = Settings(home=tmp_path)
    swap = SwapSettings(high_tokens=10_000, target_tokens=5_000, summaries=True)  # off by default
    model = ThreadModel()
    model.capabilities = {"sessionCapabilities": {"close": {}}}
    model.threads[THREAD] = ThreadState(THREAD, cwd=str(tmp_path / "project"), context_tokens=context)
    harness = Harness(tmp_path / "session.jsonl")
    summaries = SideSummaries(swap, harness, model, CostPolicy(swap, GradientSettings(), 167_000),  # type: ignore[arg-type]
                              tmp_path, lambda: open_store(settings))
    holder: list[FakePort] = []
    port = FakePort(answer=agent(holder, asked))
    holder.append(port)
    await summaries.prepare(port)
    return summaries, port, harness


async def test_a_swap_coming_has_the_oldest_turns_summarised_in_a_side_session(tmp_path: Path) -> None:
    asked: list[tuple[str, dict[str, Any]]] = []
    summaries, port, harness = await made(tmp_path, asked, context=8_000)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(summaries.run, port)
        assert summaries.summarizer(THREAD) is None  # nothing yet: the swap's preamble is extractive
        summaries._turn_ended(THREAD, True)
        with anyio.fail_after(10):
            await summaries.wait_for(1)
        summaries._turn_ended(THREAD, True)  # one side session per swap cycle
        assert summaries._receive.statistics().current_buffer_used == 0
        port.bind(THREAD, "22222222-2222-4222-8222-222222222222")  # swapped: a new cycle
        summaries._turn_ended(THREAD, True)  # the same range again: not asked twice
        with anyio.fail_after(10):
            await summaries.wait_for(2)
        tasks.cancel_scope.cancel()
    await summaries.aclose()
    methods = [m for m, _ in asked]
    assert methods == ["session/new", "session/prompt", "session/close"]
    opened = asked[0][1]
    assert opened["mcpServers"] == [] and Path(opened["cwd"]).parent == side_root(tmp_path)
    assert opened["_meta"] == {"x": 1}  # what the harness adds for its adapter
    assert "request 1: move the port" in asked[1][1]["prompt"][0]["text"]
    assert "Do not use any tools" in asked[1][1]["prompt"][0]["text"]
    assert port.to_client == []  # not a frame of it reached the client
    refusal = next(m for m in port.to_agent if m.get("id") == 99)
    assert refusal["result"] == {"outcome": {"outcome": "selected", "optionId": "no"}}
    # Removed after the close, and once more when the agent has gone (``aclose``).
    assert set(harness.forgotten) == {(SIDE, opened["cwd"])} and not await anyio.Path(opened["cwd"]).exists()
    summarizer = summaries.summarizer(THREAD)
    assert summarizer is not None and summarizer.anchor == "Goal: the port moves to 8080"
    assert "MODEL SUMMARY: 8080 it is." in summarizer.summarize(TURNS, None, 4000)
    assert summaries.anchor(THREAD) == "Goal: the port moves to 8080"
    async with open_store(Settings(home=tmp_path)) as store:
        stored = await store.messages(SUMMARY_THREAD, "summary")
    assert [m.text for m in stored] == ["MODEL SUMMARY: 8080 it is."]
    assert stored[0].data["thread"] == THREAD and len(stored[0].data["keys"]) == 4
    assert stored[0].data["content_hash"]

    # The next liminal reads it from the store and does not ask again.
    again: list[tuple[str, dict[str, Any]]] = []
    later, port2, _ = await made(tmp_path, again, context=8_000)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(later.run, port2)
        later._turn_ended(THREAD, True)
        with anyio.fail_after(10):
            await later.wait_for(1)
        tasks.cancel_scope.cancel()
    await later.aclose()
    assert again == [] and later.anchor(THREAD) == "Goal: the port moves to 8080"


async def test_no_summary_far_from_the_trigger_or_when_turned_off(tmp_path: Path) -> None:
    asked: list[tuple[str, dict[str, Any]]] = []
    summaries, _, _ = await made(tmp_path, asked, context=3_000)  # under 0.6 of 10k
    summaries._turn_ended(THREAD, True)
    assert summaries._receive.statistics().current_buffer_used == 0
    summaries.settings = SwapSettings(high_tokens=10_000, target_tokens=5_000, summaries=False)
    summaries.model.threads[THREAD].context_tokens = 9_000
    summaries._turn_ended(THREAD, True)
    assert summaries._receive.statistics().current_buffer_used == 0



async def test_a_summary_waits_until_the_swap_is_a_turn_or_two_away(tmp_path: Path) -> None:
    """Each side session costs the CLI's own prompt again (issue 24: a side session at every
    turn end past ``summary_at`` cost 0.86 of auto-compact in bench/cost.py, once per swap cycle
    0.82): past ``summary_at`` but further from the trigger than two turns at the thread's pace,
    none is asked for."""
    asked: list[tuple[str, dict[str, Any]]] = []
    summaries, _, _ = await made(tmp_path, asked, context=6_500)  # past 0.6 of 10k
    summaries.model.threads[THREAD].pace.observe(1_000, 1)  # turns of 1k: the swap is 3.5 away
    summaries._turn_ended(THREAD, True)
    assert summaries._receive.statistics().current_buffer_used == 0
    summaries.model.threads[THREAD].context_tokens = 8_000  # two turns away
    summaries._turn_ended(THREAD, True)
    assert summaries._receive.statistics().current_buffer_used == 1
